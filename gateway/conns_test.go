package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
		// The client's pace is the case under test: calls idle/3 apart,
		// for longer than idle. A machine that stalls the client for most
		// of idle between two calls makes a legitimately idle connection,
		// which proves nothing: such a run is measured and done again.
		for attempt := 1; ; attempt++ {
			conns, stalled := keptAlive(t, url, idle)
			if stalled > 0 && attempt < 3 {
				t.Logf("attempt %d: the client stalled %s between two calls; again", attempt, stalled)
				continue
			}
			if conns != 1 {
				t.Errorf("%d connections for calls %s apart and a %s call, want one kept alive (longest pause %s)", conns, idle/3, 600*time.Millisecond, stalled)
			}
			return
		}
	})
}

// keptAlive makes calls on one keep-alive connection, a 600ms one among
// them, idle/3 apart; it returns how many connections they took and, if
// the client paused for more than 3/4 of idle between two calls, the
// longest pause.
func keptAlive(t *testing.T, url string, idle time.Duration) (int32, time.Duration) {
	t.Helper()
	var conns atomic.Int32
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	defer client.CloseIdleConnections()
	var stalled time.Duration
	var answered time.Time
	for i, tool := range []string{"get_thing", "nap", "get_thing", "get_thing", "get_thing", "get_thing"} {
		if i > 1 {
			time.Sleep(idle / 3)
		}
		if !answered.IsZero() {
			if pause := time.Since(answered); pause > idle*3/4 {
				stalled = max(stalled, pause)
			}
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
		answered = time.Now()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":true`) {
			t.Fatalf("call %d (%s): %d %s", i+1, tool, resp.StatusCode, b)
		}
	}
	return conns.Load(), stalled
}

// ConfigureServer, with idle as IdleTimeout.
func watchedServer(t *testing.T, cfg Config, watched bool, idle time.Duration) (*recorder, *smallServer) {
	t.Helper()
	rec, g := newFrontGateway(t, cfg, nil)
	return rec, serveSmallBuffers(t, g, watched, idle)
}

// pipeline sends n copies of req to gw on one connection with a small
// receive buffer, reads nothing until the server has closed the connection
// (at most cutWait), then reads what comes within 10 s; it returns the
// number of status lines read.
func pipeline(t *testing.T, gw *smallServer, req []byte, n int) int {
	t.Helper()
	c, err := net.Dial("tcp", gw.Listener.Addr().String())
	if err != nil {
		t.Error(err)
		return n
	}
	defer c.Close()
	cut := gw.closedConn(c)
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	go c.Write(bytes.Repeat(req, n)) // blocks while the server does; ends with c
	// Waiting for the server to give up on the connection, not for a
	// time: on a loaded machine the server may take longer than any fixed
	// pause to fill the buffers and block. A server that never cuts the
	// write is caught below: once the client reads, every answer comes.
	select {
	case <-cut:
	case <-time.After(cutWait):
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got bytes.Buffer
	io.Copy(&got, c)
	return strings.Count(got.String(), "HTTP/1.1 ")
}

// cutWait bounds how long pipeline waits for a cut that write_timeout
// (200ms) should make: far longer, so that only a missing cut reaches it.
const cutWait = 10 * time.Second

// TestBoundWritesEveryRoute: a client that pipelines requests and reads
// nothing is cut off at write_timeout on every route of Gateway.Handler,
// not only /mcp: health checks, 404s and status-only answers too; with
// per-request deadlines and with the watcher. ("Expect: 100-continue":
// net/http's own 100 Continue, written as the body is read, is bounded
// too.)
func TestBoundWritesEveryRoute(t *testing.T) {
	const n = 1500
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	for _, watched := range []bool{false, true} {
		_, gw := watchedServer(t, Config{WriteTimeout: 200 * time.Millisecond}, watched, time.Minute)
		host := gw.Listener.Addr().String()
		for _, tc := range []struct{ name, req string }{
			{"healthz", "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n"},
			{"404", "GET /nope HTTP/1.1\r\nHost: " + host + "\r\n\r\n"},
			{"mcp notification", fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", host, len(note), note)},
			{"mcp notification, Expect: 100-continue", fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", host, len(note), note)},
		} {
			t.Run(fmt.Sprintf("watched=%v/%s", watched, tc.name), func(t *testing.T) {
				// Several connections: where the buffers fill (an answer or
				// a 100 Continue) varies with each.
				const conns = 8
				got := make(chan int, conns)
				for range conns {
					go func() { got <- pipeline(t, gw, []byte(tc.req), n) }()
				}
				for range conns {
					if g := <-got; g >= n {
						t.Errorf("%d status lines for %d requests from a client that read nothing until the server closed the connection (waited up to %s): the blocked write was never cut (write_timeout 200ms)", g, n, cutWait)
					}
				}
			})
		}
	}
}

// TestConfigureServerShutdown: Shutdown waits for the answers being
// written, and the watcher still cuts one whose client reads nothing, so
// Shutdown ends within about write_timeout, as with per-request deadlines.
func TestConfigureServerShutdown(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			served := make(chan struct{}, 1)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, bigAnswer)
				served <- struct{}{}
			}))
			t.Cleanup(api.Close)
			cfg := &Config{WriteTimeout: 300 * time.Millisecond,
				Upstreams: []Upstream{{Name: "api", OpenAPI: "big.json", Document: []byte(bigDoc), BaseURL: api.URL, Timeout: time.Minute}}}
			g, err := New(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			gw := serveSmallBuffers(t, g, watched, time.Minute)
			a := postUnread(t, gw)
			defer a.Close()
			<-served
			// The answer's write is under way once its first byte arrives;
			// a 1 MB answer then blocks on the buffers, which one byte read
			// does not drain.
			a.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(a, make([]byte, 1)); err != nil {
				t.Fatalf("the answer's write did not begin: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			if err := gw.Config.Shutdown(ctx); err != nil || time.Since(start) > 2*time.Second {
				t.Errorf("Shutdown: %v after %s, with a client that reads nothing; want it done soon after write_timeout (300ms)", err, time.Since(start))
			}
		})
	}
}

// TestConfigureServerSlowHead: a request whose head begins inside the idle
// bound and arrives in pieces across it is served, as net/http serves it
// (its header deadline replaces the idle one once the head begins).
func TestConfigureServerSlowHead(t *testing.T) {
	const idle = 300 * time.Millisecond
	_, gw := watchedServer(t, Config{}, true, idle)
	host := gw.Listener.Addr().String()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	buf := make([]byte, 4096)
	if n, err := c.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("200 OK")) {
		t.Fatalf("first answer: %q %v", buf[:n], err)
	}
	time.Sleep(idle * 8 / 10)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", host)
	for i := range 6 { // the head's rest, over 600 ms
		time.Sleep(100 * time.Millisecond)
		fmt.Fprintf(c, "X-Part-%d: %s\r\n", i, strings.Repeat("a", 100))
	}
	fmt.Fprintf(c, "\r\n")
	if n, err := c.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte("200 OK")) {
		t.Errorf("a request begun %s into a %s idle bound, head sent over 600ms: %q %v", idle*8/10, idle, buf[:n], err)
	}
}

// sliceConn is a net.Conn of a type that cannot be a map key, as a
// listener of one's own may return.
type sliceConn struct {
	net.Conn
	tags []string
}

type sliceListener struct{ net.Listener }

func (l sliceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return sliceConn{Conn: c}, nil
}

// TestConfigureServerUncomparableConn: such connections are served, with
// per-request deadlines, instead of panicking in Server.Serve.
func TestConfigureServerUncomparableConn(t *testing.T) {
	rec, g := newFrontGateway(t, Config{}, nil)
	rec.allowed.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g.Handler(), IdleTimeout: time.Minute}
	defer g.ConfigureServer(srv)()
	go srv.Serve(sliceListener{ln})
	defer srv.Close()
	resp, body := post(t, "http://"+ln.Addr().String()+"/mcp", call(1, "get_thing", `{"id":"a"}`), nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Errorf("call: %d %s", resp.StatusCode, body)
	}
}
