package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSessionLifeClosedByFront: a session the Front closes itself
// (CloseSessions at the drain; the oldest retired gateway's, past
// maxRetired) is gone from go-sdk, which answers its id 404. The front
// door's fast path must not go on answering the session's calls because
// sessionLife was not told: each call it answered would also restart the
// idle timer of a session that no longer exists.
func TestSessionLifeClosedByFront(t *testing.T) {
	rec, g := newFrontGateway(t, Config{Stateful: true}, nil)
	if g.life == nil {
		t.Fatal("no sessionLife: the stateful fast path is off")
	}
	f := NewFront(g)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"
	id := openSession(t, url, "")
	if resp, body := post(t, url, call(1, "get_thing", `{"id":"a"}`), sessionHeader(id, "")); resp.StatusCode != http.StatusOK {
		t.Fatalf("a call on a live session: %d %s", resp.StatusCode, body)
	}
	f.CloseSessions()
	if g.hasSession(id) {
		t.Fatal("CloseSessions left the session open")
	}
	rec.allowed.Store(false) // the upstream must not be called
	if resp, body := post(t, url, call(2, "get_thing", `{"id":"a"}`), sessionHeader(id, "")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a call on a session the Front closed: %d %s, want 404 (go-sdk's)", resp.StatusCode, body)
	}
	if g.life.ready(id) {
		t.Error("sessionLife still has the closed session ready")
	}
}
