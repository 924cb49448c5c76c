package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFrontReplace: a reload's swap. A call in flight finishes on the old
// gateway, which is closed only once it has; every new request is the new
// one's; a stateful session made by the old gateway is served by it until
// it ends; readyz answers 503 once draining.
func TestFrontReplace(t *testing.T) {
	t.Run("stateless", func(t *testing.T) {
		rec1, g1 := newFrontGateway(t, Config{}, nil)
		rec2, g2 := newFrontGateway(t, Config{}, nil)
		f := NewFront(g1)
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		t.Cleanup(f.Close)
		url := srv.URL + "/mcp"

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(call(1, "wait", `{}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
		waitFor(t, "the call to reach the old upstream", func() bool { _, started, _ := rec1.counts(); return started == 1 })
		f.Replace(g2)
		if f.Current() != g2 || f.Retired() != 1 {
			t.Fatalf("current %p (want %p), %d retired, want 1", f.Current(), g2, f.Retired())
		}
		if res, body := post(t, url, call(2, "get_thing", `{"id":"a"}`), nil); res.StatusCode != 200 || !strings.Contains(body, `ok`) {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		if n, _, _ := rec2.counts(); n != 1 {
			t.Errorf("the new gateway's upstream saw %d requests, want 1", n)
		}
		if n, _, open := rec1.counts(); n != 1 || open != 1 {
			t.Errorf("the old gateway's upstream: %d requests, %d open; want 1, 1", n, open)
		}
		cancel()
		<-done
		waitFor(t, "the old gateway to be reaped", func() bool { return f.Retired() == 0 })
		if f.InFlight() != 0 {
			t.Errorf("%d in flight", f.InFlight())
		}
	})

	t.Run("stateful session stays on the gateway that made it", func(t *testing.T) {
		_, g1 := newFrontGateway(t, Config{Stateful: true}, nil)
		_, g2 := newFrontGateway(t, Config{Stateful: true}, nil)
		f := NewFront(g1)
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		t.Cleanup(f.Close)
		url := srv.URL + "/mcp"
		res, _ := post(t, url, initialize, nil)
		id := res.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatal("no session id")
		}
		h := http.Header{"Mcp-Session-Id": {id}, "Mcp-Protocol-Version": {"2025-06-18"}}
		f.Replace(g2)
		if res, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h); res.StatusCode != 200 || !strings.Contains(body, "get_thing") {
			t.Fatalf("the old session's request: %d %s", res.StatusCode, body)
		}
		if f.Retired() != 1 {
			t.Fatalf("%d retired while its session is open, want 1", f.Retired())
		}
		if res, _ := do(t, http.MethodDelete, url, nil, h); res.StatusCode/100 != 2 {
			t.Fatalf("DELETE: %d", res.StatusCode)
		}
		f.Reap()
		if f.Retired() != 0 {
			t.Fatalf("%d retired after its last session ended, want 0", f.Retired())
		}
		// A new session is the new gateway's.
		if res, _ := post(t, url, initialize, nil); res.Header.Get("Mcp-Session-Id") == "" || !g2.hasSession(res.Header.Get("Mcp-Session-Id")) {
			t.Fatal("a new session was not made by the new gateway")
		}
	})

	t.Run("drain", func(t *testing.T) {
		_, g := newFrontGateway(t, Config{}, nil)
		f := NewFront(g)
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		t.Cleanup(f.Close)
		if f.Probed() {
			t.Fatal("probed before any /readyz")
		}
		if res, _ := do(t, http.MethodGet, srv.URL+"/readyz", nil, nil); res.StatusCode != 200 || !f.Probed() {
			t.Fatalf("/readyz %d, probed %v", res.StatusCode, f.Probed())
		}
		f.Drain()
		if res, body := do(t, http.MethodGet, srv.URL+"/readyz", nil, nil); res.StatusCode != 503 || !strings.Contains(body, `"draining"`) {
			t.Fatalf("/readyz while draining: %d %s", res.StatusCode, body)
		}
		// Everything else is still served.
		if res, _ := post(t, srv.URL+"/mcp", call(1, "get_thing", `{"id":"a"}`), nil); res.StatusCode != 200 {
			t.Fatalf("a call while draining: %d", res.StatusCode)
		}
		_, body := do(t, http.MethodGet, srv.URL+"/metrics", nil, nil)
		for _, want := range []string{"mcpgate_draining 1", "mcpgate_config_reload_success 1", "mcpgate_tool_calls_total"} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}

// TestFrontSessionCapsAcrossReloads: the sessions a retired gateway still
// serves count against the current one's max_sessions_per_caller and
// max_sessions: they live in this process too. Before, each gateway counted
// its own, so every reload gave a caller its limit once more.
func TestFrontSessionCapsAcrossReloads(t *testing.T) {
	cfg := Config{Stateful: true, MaxSessions: 4, MaxSessionsPerCaller: 2}
	_, g1 := newFrontGateway(t, cfg, nil)
	_, g2 := newFrontGateway(t, cfg, nil)
	_, g3 := newFrontGateway(t, cfg, nil)
	f, srv := serveFront(t, g1)
	url := srv.URL + "/mcp"
	refused := func(who string, status int, words string) {
		t.Helper()
		resp, body := post(t, url, initialize, http.Header{"Authorization": {who}})
		if resp.StatusCode != status || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("%s's initialize: %d %s, want %d and no session", who, resp.StatusCode, body, status)
		}
		if e := decodeRPCError(t, resp, body); !strings.Contains(e.Error.Message, words) {
			t.Fatalf("%s's refusal %q does not say %q", who, e.Error.Message, words)
		}
	}

	m1 := openSession(t, url, "Bearer mallory")
	f.Replace(g2)
	openSession(t, url, "Bearer mallory")
	refused("Bearer mallory", http.StatusTooManyRequests, "this caller has 2 sessions open")
	f.Replace(g3) // two retired gateways, a session each
	refused("Bearer mallory", http.StatusTooManyRequests, "this caller has 2 sessions open")
	openSession(t, url, "Bearer alice")
	openSession(t, url, "Bearer bob")
	// Four sessions in the process, on three gateways: the cap.
	refused("Bearer carol", http.StatusServiceUnavailable, "at its session limit (4, max_sessions)")

	// mallory's first session ends on the gateway that made it: the slot
	// is free again, on the current gateway, and the first is reaped.
	if resp, body := do(t, http.MethodDelete, url, nil, sessionHeader(m1, "Bearer mallory")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	f.Reap()
	if f.Retired() != 1 {
		t.Fatalf("%d retired gateways after the first one's last session ended, want 1", f.Retired())
	}
	openSession(t, url, "Bearer mallory")
}

// slowInitialize starts an initialize POST whose body is not yet sent: the
// Front routes it to the gateway current now, but its session stage
// (guardSession → reserve) runs only once the body is read. send finishes the
// body and returns the status and session id.
func slowInitialize(t *testing.T, url, authorization string) (send func() (int, string)) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authorization)
	type result struct {
		status int
		id     string
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, resp.Header.Get("Mcp-Session-Id")}
	}()
	return func() (int, string) {
		io.WriteString(pw, initialize)
		pw.Close()
		r := <-done
		return r.status, r.id
	}
}

// TestFrontSessionCapsSlowInitialize: an initialize that reached the old
// gateway before a reload, its body read only after it, reserves on the
// retired gateway's book, which must count the current gateway's sessions
// too (found by review: it counted only its own, and mallory, whose cap is
// 2, ended with 4).
func TestFrontSessionCapsSlowInitialize(t *testing.T) {
	cfg := Config{Stateful: true, MaxSessions: 100, MaxSessionsPerCaller: 2}
	_, g1 := newFrontGateway(t, cfg, nil)
	_, g2 := newFrontGateway(t, cfg, nil)
	f, srv := serveFront(t, g1)
	url := srv.URL + "/mcp"

	s1 := f.cur.Load()
	a := slowInitialize(t, url, "Bearer mallory")
	b := slowInitialize(t, url, "Bearer mallory")
	waitFor(t, "both POSTs to be on g1", func() bool { return s1.active.Load() == 2 })

	f.Replace(g2)
	openSession(t, url, "Bearer mallory")
	openSession(t, url, "Bearer mallory")

	granted := 2
	for _, send := range []func() (int, string){a, b} {
		if status, id := send(); status == http.StatusOK && id != "" {
			granted++
		}
	}
	if granted > 2 {
		t.Errorf("mallory holds %d sessions, max_sessions_per_caller is 2", granted)
	}
}
