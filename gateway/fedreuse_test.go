package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestFederationReuseAcrossReload: a gateway built with Options.Previous
// keeps the previous one's client of an unchanged MCP upstream — no new
// session, no new handshake — and it keeps working when the previous one is
// closed; a changed upstream gets a client of its own; the shared client is
// closed (its session deleted upstream) with the last gateway that uses it.
func TestFederationReuseAcrossReload(t *testing.T) {
	up := newFedUpstream(t)
	up.swap(true) // sessions the upstream keeps: a new client would open another
	var inits, deletes atomic.Int64
	inner := *up.h.Load()
	counting := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
		}
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte(`"method":"initialize"`)) {
				inits.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		inner.ServeHTTP(w, r)
	}))
	up.h.Store(&counting)
	cfgOf := func(timeout time.Duration) *Config {
		return &Config{Stateful: true, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL, Timeout: timeout}}}}
	}
	build := func(cfg *Config, prev *Gateway) *Gateway {
		g, err := New(t.Context(), cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	call := func(g *Gateway, text string) {
		t.Helper()
		srv := httptest.NewServer(g.Handler())
		defer srv.Close()
		// A session of its own (2025-11-25): a sessionless caller's call
		// would go on the client's capability-less session, a second one
		// (federation.Upstream.bareFor).
		cs := connectSession(t, srv.URL+"/mcp", nil)
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs_echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError {
			t.Fatalf("a call through the gateway: %v %+v", err, res)
		}
	}

	old := build(cfgOf(0), nil)
	opened := inits.Load()
	if opened == 0 {
		t.Fatal("the upstream saw no initialize")
	}
	next := build(cfgOf(0), old)
	if inits.Load() != opened || next.federated["fs"] != old.federated["fs"] {
		t.Fatalf("an unchanged upstream's client was not kept: %d initialize requests, want %d", inits.Load(), opened)
	}
	old.Close()
	if deletes.Load() != 0 {
		t.Fatal("closing the previous gateway closed the client the new one uses")
	}
	call(next, "kept")
	if inits.Load() != opened {
		t.Errorf("a call after the reload opened a session: %d initialize requests, want %d", inits.Load(), opened)
	}

	// Changed (its timeout): a client of its own; the kept one stays next's.
	changed := build(cfgOf(7*time.Second), next)
	if changed.federated["fs"] == next.federated["fs"] || inits.Load() == opened {
		t.Fatal("a changed upstream kept the previous client")
	}
	changed.Close()
	if deletes.Load() != 1 {
		t.Errorf("closing the gateway with the changed upstream's client: %d session deletes, want 1", deletes.Load())
	}
	call(next, "still kept")
	next.Close() // the last user of the first client
	waitFor(t, "the shared client's session to be deleted upstream", func() bool { return deletes.Load() == 2 })
}
