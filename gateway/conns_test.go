package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConfigureServerIdle: on a server set up by ConfigureServer, a
// keep-alive connection idle for longer than IdleTimeout is closed by the
// watcher (net/http is told to set no idle deadline), between IdleTimeout
// and 1.25 times it; a connection used more often than that, or busy with
// a call that takes longer, is not.
func TestConfigureServerIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	var srv *http.Server
	rec, url := startGatewayOn(t, Config{}, nil, func(g *Gateway, s *http.Server) {
		s.IdleTimeout = idle
		t.Cleanup(g.ConfigureServer(s))
		srv = s
	})
	if srv.IdleTimeout != -1 {
		t.Fatalf("IdleTimeout %s after ConfigureServer, want -1 (the watcher bounds idle connections)", srv.IdleTimeout)
	}
	rec.allowed.Store(true)

	t.Run("idle connection closed", func(t *testing.T) {
		conn := rawPOST(t, url, call(1, "get_thing", `{"id":"a"}`), http.Header{}, false)
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok":true`) {
			t.Fatalf("call: %d %s", resp.StatusCode, body)
		}
		answered := time.Now()
		n, err := br.Read(make([]byte, 1))
		waited := time.Since(answered)
		if n != 0 || err != io.EOF {
			t.Fatalf("after the answer: %d bytes, %v; want the connection closed (EOF)", n, err)
		}
		if waited < idle*9/10 || waited > idle*5/4+time.Second {
			t.Errorf("closed %s after the answer, want between %s and about %s", waited, idle, idle*5/4)
		}
	})

	t.Run("busy or often used connection kept", func(t *testing.T) {
		var conns atomic.Int32
		client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conns.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
		defer client.CloseIdleConnections()
		for i, tool := range []string{"get_thing", "nap", "get_thing", "get_thing", "get_thing", "get_thing"} {
			if i > 1 {
				time.Sleep(idle / 3)
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(call(i+1, tool, `{"id":"a"}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("call %d (%s): %v", i+1, tool, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":true`) {
				t.Fatalf("call %d (%s): %d %s", i+1, tool, resp.StatusCode, b)
			}
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("%d connections for calls %s apart and a %s call, want one kept alive", n, idle/3, 600*time.Millisecond)
		}
	})
}

// fakeConn records what the watcher does to a connection.
type fakeConn struct {
	net.Conn
	deadline time.Time
	closed   bool
}

func (c *fakeConn) SetWriteDeadline(t time.Time) error { c.deadline = t; return nil }
func (c *fakeConn) Close() error                       { c.closed = true; return nil }

// TestConnWatchSweep: a sweep cuts the writes under way for longer than the
// write bound and closes the connections idle for longer than the idle
// bound, and touches nothing else; a bound of 0 is no bound.
func TestConnWatchSweep(t *testing.T) {
	const bound = time.Second
	now := time.Now().UnixNano()
	long, short := now-int64(2*bound), now-int64(bound/2)
	tests := []struct {
		name                string
		write, idle         time.Duration
		writeSince, idleSin int64
		wantCut, wantClosed bool
	}{
		{"nothing under way", bound, bound, 0, 0, false, false},
		{"write within its bound", bound, bound, short, 0, false, false},
		{"write past its bound", bound, bound, long, 0, true, false},
		{"idle within its bound", bound, bound, 0, short, false, false},
		{"idle past its bound", bound, bound, 0, long, false, true},
		{"no write bound", 0, bound, long, 0, false, false},
		{"no idle bound", bound, 0, 0, long, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &connWatch{write: tt.write, idle: tt.idle}
			fc := &fakeConn{}
			wc := &watchedConn{c: fc}
			wc.writeSince.Store(tt.writeSince)
			wc.idleSince.Store(tt.idleSin)
			w.conns.Store(fc, wc)
			w.sweep(now)
			if cut := !fc.deadline.IsZero() && fc.deadline.Before(time.Now()); cut != tt.wantCut {
				t.Errorf("write cut: %v, want %v", cut, tt.wantCut)
			}
			if fc.closed != tt.wantClosed {
				t.Errorf("closed: %v, want %v", fc.closed, tt.wantClosed)
			}
		})
	}
}

// TestConnWatchStates: the states net/http reports start and end the idle
// bound and the final flush's write bound, and a closed or hijacked
// connection is forgotten.
func TestConnWatchStates(t *testing.T) {
	w := &connWatch{write: time.Second, idle: time.Second}
	fc := &fakeConn{}
	wc := &watchedConn{c: fc}
	w.conns.Store(fc, wc)
	wc.writeSince.Store(1) // the handler returned: its last flush is under way
	w.state(fc, http.StateIdle)
	if wc.writeSince.Load() != 0 || wc.idleSince.Load() == 0 {
		t.Errorf("idle: writeSince %d, idleSince %d; want the write ended and the idle begun", wc.writeSince.Load(), wc.idleSince.Load())
	}
	w.state(fc, http.StateActive)
	if wc.idleSince.Load() != 0 {
		t.Error("active: still idle")
	}
	for _, s := range []http.ConnState{http.StateClosed, http.StateHijacked} {
		w.conns.Store(fc, wc)
		w.state(fc, s)
		if _, ok := w.conns.Load(fc); ok {
			t.Errorf("%s: the connection is still watched", s)
		}
	}
	w.state(fc, http.StateIdle) // unknown now: nothing to do, no panic
}
