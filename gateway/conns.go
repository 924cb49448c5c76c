package gateway

import (
	"net/http"

	"github.com/mcpgate/mcpgate/gateway/internal/httpbound"
)

// ConfigureServer bounds srv's connections with one watcher instead of
// runtime timers per request: each write of an answer by write_timeout, and
// a keep-alive connection's idle wait by srv's IdleTimeout (which it then
// sets to -1). Call it before srv serves (mcpgate serve does), and call the
// stop it returns once srv's Shutdown or Close has returned. How and why:
// [httpbound.Configure]. A handler served on a server not configured so
// sets per-request write deadlines instead.
func (g *Gateway) ConfigureServer(srv *http.Server) (stop func()) {
	return httpbound.Configure(srv, g.cfg.WriteTimeout)
}
