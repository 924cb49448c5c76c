package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
)

const retryDoc = `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/x":{"get":{"operationId":"get_x","responses":{"200":{"description":"ok"}}}}}}`

// TestRetryKeepsGateway: while an upstream's remote document cannot be
// fetched, serve retries it with backoff (1 s, doubling to a minute). A
// retry that still cannot load it must keep the gateway served: it swapped
// in a whole new one each time, which reset the gateway's metrics, dropped
// the task records and dedup table of the memory backend, opened another
// Redis connection, and retired the old one with its stateful sessions (of
// which only 4 generations are kept). A retry that loads it swaps.
func TestRetryKeepsGateway(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "good.json")
	if err := os.WriteFile(doc, []byte(retryDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // refused until the document server starts below
	path := filepath.Join(dir, "mcpgate.yaml")
	yaml := fmt.Sprintf("upstreams:\n  - name: good\n    openapi: %s\n    base_url: http://127.0.0.1:1\n    expose_all: true\n    auth: {mode: none}\n"+
		"  - name: remote\n    openapi: http://%s/openapi.json\n    base_url: http://127.0.0.1:1\n    expose_all: true\n    auth: {mode: none}\n", doc, addr)
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &common{config: path}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, false)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	g, err := gateway.New(context.Background(), cfg, &gateway.Options{Logger: logger, DeferUnavailable: true})
	if err != nil {
		t.Fatal(err)
	}
	front := gateway.NewFront(g)
	t.Cleanup(front.Close)
	if len(g.NotLoaded()) != 1 {
		t.Fatalf("not loaded: %v, want the remote upstream", g.NotLoaded())
	}
	rl := &reloader{c: c, front: front, logger: logger, life: context.Background(), served: cfg}
	rl.reload(retryTrigger)
	if front.Current() != g || front.Retired() != 0 {
		t.Fatalf("a retry that loaded nothing swapped the gateway (%d retired)", front.Retired())
	}

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(retryDoc))
	})}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	rl.reload(retryTrigger)
	if front.Current() == g || len(front.Current().NotLoaded()) != 0 {
		t.Fatalf("a retry that loaded the upstream did not swap it in (not loaded: %v)", front.Current().NotLoaded())
	}
}
