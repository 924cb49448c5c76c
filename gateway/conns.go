package gateway

import (
	"net/http"

	"github.com/mcpgate/mcpgate/gateway/internal/httpbound"
)

// ConfigureServer bounds srv's connections with one watcher instead of
// runtime timers per request; call it before srv serves (mcpgate serve
// does), and call the stop it returns once srv's Shutdown or Close has
// returned. It bounds:
//
//   - each write of an answer by write_timeout, as Handler does;
//   - a keep-alive connection's wait for its next request by srv's
//     IdleTimeout, when that is above 0. ConfigureServer then sets
//     IdleTimeout to -1, which tells net/http to set no deadline of its own.
//
// Why: every deadline set on a connection changes a runtime timer, and
// adding one wakes an idle core to watch it. net/http sets the idle
// deadline after every answer; Handler sets a write deadline per
// answer, since net/http clears it after each. On the 2-core bench machine
// those two wakes cost about 0.03 of the c=1 latency ratio (mcpgate-bench
// -c 1 -rounds 7, six A/B pairs). The watcher instead
// notes when a write starts and ends and when a connection goes idle
// (atomic stores), and a goroutine looks every quarter of the shorter
// bound:
//
//   - a write under way for longer than write_timeout gets a deadline in the
//     past, which ends it as its own deadline would, and the connection is
//     closed at the end of its request, so that no later request on it
//     meets that deadline;
//   - a connection idle for longer than IdleTimeout gets a read deadline of
//     srv's ReadHeaderTimeout (else ReadTimeout) from then, once, and is
//     closed when it passes, as net/http closes one whose idle deadline
//     passed; a request head that began meanwhile gets its header deadline
//     from net/http, as it would have. With neither timeout it is closed.
//
// Each bound thus ends between once and 1.25 times its value (the idle one
// plus the header grace), where a deadline ends at it.
//
// It is meant for HTTP/1 servers, as mcpgate serve's (no TLS): an HTTP/2
// connection idle past the bound is ended by its read deadline, without a
// GOAWAY. srv's ConnContext and ConnState, when set, still run, after the
// watcher's own. A handler served on a server not configured so (an embedder's own)
// sets per-request deadlines, as before, as it does for a connection whose
// type cannot be a map key (a listener's own struct value).
func (g *Gateway) ConfigureServer(srv *http.Server) (stop func()) {
	return httpbound.Configure(srv, g.cfg.WriteTimeout)
}
