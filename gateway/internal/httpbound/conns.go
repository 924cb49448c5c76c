package httpbound

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// Configure bounds srv's connections with one watcher instead of
// runtime timers per request; call it before srv serves (mcpgate serve
// does), and call the stop it returns once srv's Shutdown or Close has
// returned. It bounds:
//
//   - each write of an answer by write, as Writes does;
//   - a keep-alive connection's wait for its next request by srv's
//     IdleTimeout, when that is above 0. ConfigureServer then sets
//     IdleTimeout to -1, which tells net/http to set no deadline of its own.
//
// Why: every deadline set on a connection changes a runtime timer, and
// adding one wakes an idle core to watch it. net/http sets the idle
// deadline after every answer; Writes sets a write deadline per
// answer, since net/http clears it after each. On the 2-core bench machine
// those two wakes cost about 0.03 of the c=1 latency ratio (mcpgate-bench
// -c 1 -rounds 7, six A/B pairs). The watcher instead
// notes when a write starts and ends and when a connection goes idle
// (atomic stores), and a goroutine looks every quarter of the shorter
// bound:
//
//   - a write under way for longer than the write bound gets a deadline in the
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
func Configure(srv *http.Server, write time.Duration) (stop func()) {
	w := &connWatch{write: write, done: make(chan struct{})}
	if srv.IdleTimeout > 0 {
		w.idle = srv.IdleTimeout
		w.grace = srv.ReadHeaderTimeout
		if w.grace <= 0 {
			w.grace = srv.ReadTimeout
		}
		srv.IdleTimeout = -1
	}
	if w.write <= 0 && w.idle <= 0 {
		return func() {}
	}
	nextCtx, nextState := srv.ConnContext, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if reflect.TypeOf(c).Comparable() {
			wc := &watchedConn{c: c}
			w.conns.Store(c, wc)
			ctx = context.WithValue(ctx, watchKey{}, wc)
		}
		if nextCtx != nil {
			ctx = nextCtx(ctx, c)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		w.state(c, s)
		if nextState != nil {
			nextState(c, s)
		}
	}
	// Not stopped by Shutdown: it waits for the answers being written,
	// which the watcher must still be able to cut.
	go w.run()
	return w.stop
}

// connWatch is Configure's watcher.
type connWatch struct {
	write, idle time.Duration // 0: not bounded here
	grace       time.Duration // an idle connection's last read deadline; 0: closed at once
	conns       sync.Map      // net.Conn → *watchedConn, from ConnContext to closed
	done        chan struct{}
	once        sync.Once
}

// watchedConn is what the watcher knows of one connection.
type watchedConn struct {
	c          net.Conn
	idleSince  atomic.Int64 // when it went idle between requests (Unix ns); 0 otherwise
	idleEnding atomic.Int64 // the idleSince whose last read deadline is set
	writeSince atomic.Int64 // when a bounded write began (Unix ns); 0 when none is under way
	cut        atomic.Bool  // a write was cut: close at the end of the request
}

type watchKey struct{}

// watched returns r's connection's watch, nil when its server was not
// configured by ConfigureServer.
func watched(r *http.Request) *watchedConn {
	wc, _ := r.Context().Value(watchKey{}).(*watchedConn)
	return wc
}

func (w *connWatch) state(c net.Conn, s http.ConnState) {
	if !reflect.TypeOf(c).Comparable() {
		return // not watched (see ConfigureServer)
	}
	switch s {
	case http.StateActive, http.StateIdle:
		v, ok := w.conns.Load(c)
		if !ok {
			return
		}
		wc := v.(*watchedConn)
		if s == http.StateActive {
			wc.idleSince.Store(0)
			return
		}
		// The answer, its last flush included, is written.
		wc.writeSince.Store(0)
		if wc.cut.Load() {
			c.Close() // the cut deadline may have landed after net/http cleared it
			return
		}
		wc.idleSince.Store(time.Now().UnixNano())
	case http.StateHijacked, http.StateClosed:
		w.conns.Delete(c)
	}
}

func (w *connWatch) stop() { w.once.Do(func() { close(w.done) }) }

func (w *connWatch) run() {
	every := w.write
	if every <= 0 || (w.idle > 0 && w.idle < every) {
		every = w.idle
	}
	t := time.NewTicker(max(every/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case now := <-t.C:
			w.sweep(now)
		}
	}
}

// aLongTimeAgo is a deadline already past: it ends a write under way.
var aLongTimeAgo = time.Unix(1, 0)

// sweep cuts the writes under way for longer than the write bound, and
// ends the connections idle for longer than the idle bound.
func (w *connWatch) sweep(now time.Time) {
	ns := now.UnixNano()
	w.conns.Range(func(_, v any) bool {
		wc := v.(*watchedConn)
		if s := wc.writeSince.Load(); w.write > 0 && s != 0 && ns-s > int64(w.write) {
			// cut first: a request that ends from here on closes its
			// connection (state), so the deadline cannot outlive it. The
			// write still under way is cut; one that ended meanwhile (its
			// request may have, too) is let be.
			wc.cut.Store(true)
			if wc.writeSince.Load() == s {
				wc.c.SetWriteDeadline(aLongTimeAgo)
			} else {
				wc.cut.Store(false)
			}
		}
		if s := wc.idleSince.Load(); w.idle > 0 && s != 0 && ns-s > int64(w.idle) && wc.idleEnding.Load() != s {
			wc.idleEnding.Store(s)
			if w.grace > 0 {
				wc.c.SetReadDeadline(now.Add(w.grace))
			} else {
				wc.c.Close()
			}
		}
		return true
	})
}
