package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway"
)

// TestDrainReleasedAnswerNotCut: a playbook call still waiting near the end
// of shutdown_timeout is answered, and the drain ends in time (exit 0) even
// when the answer takes a while to be written, as on a loaded machine.
// net/http's Shutdown sees the connection idle only at its next check, up
// to 550 ms later (500 ms, plus 10 % jitter), and with a 4 s
// shutdown_timeout the calls were released 400 ms before its end: the
// answer was written, yet the drain reported calls cut and exited 1 (the
// fleet end-to-end test's SIGTERM case failed so under load).
func TestDrainReleasedAnswerNotCut(t *testing.T) {
	e := engine.New(&engine.Options{Step: time.Hour})
	cfg := &gateway.Config{Upstreams: []gateway.Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &gateway.Playbooks{}}}}
	front, running := drainFront(t, cfg, 4*time.Second)

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		front.ServeHTTP(w, r)
		// A loaded machine: the handler ends a while after its answer.
		time.Sleep(150 * time.Millisecond)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	answered := make(chan string, 1)
	go func() {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_slow","arguments":{"label":"drain"}}}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- string(b)
	}()
	waitFor(t, "the run to start", func() bool { return e.Counts().Started > 0 })

	var stderr bytes.Buffer
	m := &cli{stderr: &stderr}
	if err := m.drain(srv, front, running, make(chan os.Signal), 1, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("drain: %v\n%s", err, stderr.String())
	}
	if got := <-answered; !strings.Contains(got, "the run goes on") {
		t.Errorf("the waiting call's answer: %s", got)
	}
}

// TestReleaseGrace: 2 s before the end, a tenth of a shorter timeout, at
// least 1 s (longer than net/http's 550 ms between two checks of Shutdown),
// at most half the timeout.
func TestReleaseGrace(t *testing.T) {
	for _, tt := range []struct{ timeout, want time.Duration }{
		{time.Minute, 2 * time.Second},
		{30 * time.Second, 2 * time.Second},
		{15 * time.Second, 1500 * time.Millisecond},
		{4 * time.Second, time.Second},
		{time.Second, 500 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
	} {
		if got := releaseGrace(tt.timeout); got != tt.want {
			t.Errorf("releaseGrace(%s) = %s, want %s", tt.timeout, got, tt.want)
		}
	}
}

// drainFront serves cfg's gateway behind a Front (closed with the test),
// and returns it with the configuration drain reads, its shutdown_timeout
// set to timeout.
func drainFront(t *testing.T, cfg *gateway.Config, timeout time.Duration) (*gateway.Front, *gateway.Config) {
	t.Helper()
	g, err := gateway.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	front := gateway.NewFront(g)
	t.Cleanup(front.Close)
	running := g.Config()
	running.ShutdownTimeout = timeout
	return front, running
}
