package main

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
)

// TestDrainSecondSignal: a second SIGTERM during the drain stops at once
// and cuts what is in flight. The error said "shutdown_timeout (1m0s)
// passed", which had not: an operator reading it after pressing Ctrl-C
// twice would raise a timeout that was never the cause.
func TestDrainSecondSignal(t *testing.T) {
	cfg := &gateway.Config{Upstreams: []gateway.Upstream{{OpenAPI: "d.json", Document: []byte(retryDoc), BaseURL: "http://127.0.0.1:1", ExposeAll: true}}}
	front, running := drainFront(t, cfg, time.Minute)

	hold := make(chan struct{})
	defer close(hold)
	inside := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inside)
		<-hold
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	go http.Get("http://" + ln.Addr().String() + "/slow")
	<-inside

	var stderr bytes.Buffer
	m := &cli{stderr: &stderr}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- m.drain(srv, front, running, sigs, 1, slog.New(slog.DiscardHandler)) }()
	sigs <- syscall.SIGTERM
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a second signal did not stop the drain")
	}
	if err == nil || strings.Contains(err.Error(), "shutdown_timeout") || !strings.Contains(err.Error(), "second signal") {
		t.Errorf("the drain stopped by a second signal says: %v", err)
	}
}
