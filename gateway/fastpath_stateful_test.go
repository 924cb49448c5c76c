package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFastPathStatefulDifferential: on a stateful gateway the fast path
// answers a tools/call on a session as go-sdk's session would — the
// differential test's every request, sent on a session of each gateway —
// and answers nothing else: tools/list, calls on a session that is not the
// caller's or not there, 2026-07-28 requests (sessionless), progress tokens.
func TestFastPathStatefulDifferential(t *testing.T) {
	p := newFastPairMode(t, 1005, true)
	const authz = "Bearer tok-1"
	sessions := map[bool]string{true: openSession(t, p.fast, authz), false: openSession(t, p.sdk, authz)}
	onSession := func(fast bool) http.Header { return sessionHeader(sessions[fast], authz) }

	first := sendRaw(t, p.sdk, rpc("1", "tools/list", ""), onSession(false))
	res := first.Messages[0].(map[string]any)["result"].(map[string]any)
	cursor, _ := res["nextCursor"].(string)
	if cursor == "" {
		t.Fatal("no second page")
	}
	var cases []fastCase
	for _, c := range fastCases(cursor) {
		if strings.Contains(c.body, `"tools/list"`) {
			c.fast = false // a session's list is go-sdk's (fastPath.stateful)
		}
		cases = append(cases, c)
	}
	get := `{"name":"get_thing","arguments":{"id":"7"}}`
	cases = append(cases,
		fastCase{"call on another caller's session", rpc("50", "tools/call", get), http.Header{"Authorization": {"Bearer mallory"}}, false},
		fastCase{"call without Authorization", rpc("51", "tools/call", get), http.Header{"Authorization": nil}, false},
		fastCase{"call on no such session", rpc("52", "tools/call", get), http.Header{"Mcp-Session-Id": {"no-such-session"}}, false},
		fastCase{"call at 2026-07-28 with a session id", rpc("53", "tools/call", `{"name":"get_thing","arguments":{"id":"7"},`+newProtocolMeta+`}`),
			http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"get_thing"}}, false},
		fastCase{"cancel of no call", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, nil, false},
		fastCase{"call after the others", rpc("54", "tools/call", get), nil, true},
	)
	runFastDifferential(t, p, cases, onSession)
}

// TestFastPathStatefulSessionState: the fast path takes a session's calls
// only once go-sdk has initialized it and while it lives: a session closed
// by DELETE, or by session_timeout (which the front door keeps, since the
// calls it answers never reach go-sdk's timer), answers 404 again.
func TestFastPathStatefulSessionState(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var g *Gateway
	rec, url := startGatewayOn(t, Config{Stateful: true, SessionTimeout: timeout}, nil, func(gg *Gateway, _ *http.Server) { g = gg })
	if g.fast == nil || g.life == nil {
		t.Fatal("a stateful gateway without the fast path's session state")
	}
	var served int
	g.fast.onServe = func() { served++ }
	callOn := func(id string) (*http.Response, string) {
		return post(t, url, call(1, "get_thing", `{"id":"a"}`), sessionHeader(id, ""))
	}

	// DELETE: go-sdk closes it; the front door forgets it.
	id := openSession(t, url, "")
	if resp, body := callOn(id); resp.StatusCode != 200 || served != 1 {
		t.Fatalf("a call on a live session: %d %s, fast-served %d", resp.StatusCode, body, served)
	}
	if resp, body := do(t, http.MethodDelete, url, nil, sessionHeader(id, "")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	rec.allowed.Store(false)
	if resp, body := callOn(id); resp.StatusCode != http.StatusNotFound || served != 1 {
		t.Fatalf("a call on a deleted session: %d %s, fast-served %d; want 404 from no one", resp.StatusCode, body, served)
	}
	rec.allowed.Store(true)

	// session_timeout: the session is used (fast-served calls) for longer
	// than the timeout, kept, then closed once idle for it.
	id = openSession(t, url, "")
	start := time.Now()
	for time.Since(start) < 2*timeout {
		if resp, body := callOn(id); resp.StatusCode != 200 {
			t.Fatalf("a call on a session in use %s after it opened: %d %s", time.Since(start), resp.StatusCode, body)
		}
	}
	waitFor(t, "the idle session to be closed", func() bool { return !g.hasSession(id) && !g.life.ready(id) })
	rec.allowed.Store(false)
	if resp, body := callOn(id); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a call on an expired session: %d %s, want 404", resp.StatusCode, body)
	}
	if n := g.life.size(); n != 0 {
		t.Errorf("%d sessions still recorded", n)
	}
}
