package gateway

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ConfigureServer bounds srv's connections with one watcher instead of
// runtime timers per request; call it before srv serves (mcpgate serve
// does). It bounds:
//
//   - each write of an answer by write_timeout, as boundWrites does;
//   - a keep-alive connection's wait for its next request by srv's
//     IdleTimeout, when that is above 0. ConfigureServer then sets
//     IdleTimeout to -1, which tells net/http to set no deadline of its own.
//
// Why: every deadline set on a connection changes a runtime timer, and
// adding one wakes an idle core to watch it. net/http sets the idle
// deadline after every answer; boundWrites sets a write deadline per
// answer, since net/http clears it after each. On the 2-core bench machine
// those two wakes were 0.05 of the c=1 latency ratio (mcpgate-bench -c 1
// -rounds 7: median 1.27-1.33 with them, 1.20-1.25 without; see the README).
// The watcher instead notes when a write starts and when a connection goes
// idle (two atomic stores), and a goroutine looks every quarter of the
// shorter bound: a write under way for longer than write_timeout gets a
// deadline in the past, which ends it as its own deadline would; a
// connection idle for longer than IdleTimeout is closed. Each bound thus
// ends between once and 1.25 times its value, where a deadline ends at it.
//
// srv's ConnContext and ConnState, when set, still run, after the watcher's
// own. A handler served on a server not configured so (an embedder's own)
// sets per-request deadlines, as before. The returned stop ends the
// watcher; srv's Shutdown ends it too.
func (g *Gateway) ConfigureServer(srv *http.Server) (stop func()) {
	w := &connWatch{write: g.cfg.WriteTimeout, done: make(chan struct{})}
	if srv.IdleTimeout > 0 {
		w.idle = srv.IdleTimeout
		srv.IdleTimeout = -1
	}
	if w.write <= 0 && w.idle <= 0 {
		return func() {}
	}
	nextCtx, nextState := srv.ConnContext, srv.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		wc := &watchedConn{c: c}
		w.conns.Store(c, wc)
		ctx = context.WithValue(ctx, watchKey{}, wc)
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
	go w.run()
	srv.RegisterOnShutdown(w.stop)
	return w.stop
}

// connWatch is ConfigureServer's watcher.
type connWatch struct {
	write, idle time.Duration // 0: not bounded here
	conns       sync.Map      // net.Conn → *watchedConn, from ConnContext to closed
	done        chan struct{}
	once        sync.Once
}

// watchedConn is what the watcher knows of one connection.
type watchedConn struct {
	c          net.Conn
	idleSince  atomic.Int64 // when it went idle between requests (Unix ns); 0 otherwise
	writeSince atomic.Int64 // when a bounded write began (Unix ns); 0 when none is under way
}

type watchKey struct{}

// watched returns r's connection's watch, nil when its server was not
// configured by ConfigureServer.
func watched(r *http.Request) *watchedConn {
	wc, _ := r.Context().Value(watchKey{}).(*watchedConn)
	return wc
}

func (w *connWatch) state(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateActive, http.StateIdle:
		v, ok := w.conns.Load(c)
		if !ok {
			return
		}
		wc := v.(*watchedConn)
		if s == http.StateIdle {
			// The answer, its last flush included, is written.
			wc.writeSince.Store(0)
			wc.idleSince.Store(time.Now().UnixNano())
		} else {
			wc.idleSince.Store(0)
		}
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
			w.sweep(now.UnixNano())
		}
	}
}

// aLongTimeAgo is a deadline already past: it ends a write under way.
var aLongTimeAgo = time.Unix(1, 0)

// sweep ends the writes under way for longer than the write bound, and
// closes the connections idle for longer than the idle bound. A write that
// ends just as it is cut loses its connection: it took the whole bound.
func (w *connWatch) sweep(now int64) {
	w.conns.Range(func(_, v any) bool {
		wc := v.(*watchedConn)
		if s := wc.writeSince.Load(); w.write > 0 && s != 0 && now-s > int64(w.write) {
			wc.c.SetWriteDeadline(aLongTimeAgo)
		}
		if s := wc.idleSince.Load(); w.idle > 0 && s != 0 && now-s > int64(w.idle) {
			wc.c.Close()
		}
		return true
	})
}
