package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestFrontRetiredBounded: in stateful mode a retired gateway is kept while
// a session it made is open, and a client that keeps a session alive (any
// request within session_timeout) keeps it forever. Each reload (SIGHUP,
// --watch on a ConfigMap) then keeps one more whole gateway — its catalog,
// upstream clients, Redis connection and goroutines — so a client that
// opens a session before each reload grows the process without bound.
// The Front keeps at most maxRetired: past that, the oldest one's sessions
// are closed (its clients get 404 and start a new session, as when their
// replica goes away) and it is closed once its requests end.
func TestFrontRetiredBounded(t *testing.T) {
	_, g := newFrontGateway(t, Config{Stateful: true}, nil)
	f := NewFront(g)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Cleanup(f.Close)
	url := srv.URL + "/mcp"
	var ids []string
	for range maxRetired + 3 {
		res, _ := post(t, url, initialize, nil)
		id := res.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatal("no session id")
		}
		ids = append(ids, id)
		_, next := newFrontGateway(t, Config{Stateful: true}, nil)
		f.Replace(next)
	}
	f.Reap()
	if n := f.Retired(); n > maxRetired {
		t.Fatalf("%d retired gateways kept, want at most %d", n, maxRetired)
	}
	// The newest sessions are still served by the gateways that made them.
	h := http.Header{"Mcp-Session-Id": {ids[len(ids)-1]}, "Mcp-Protocol-Version": {"2025-06-18"}}
	if res, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h); res.StatusCode != 200 {
		t.Fatalf("the newest retired session: %d %s", res.StatusCode, body)
	}
}
