package gateway

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestFastPathStatefulDifferentialSessionState adds to
// TestFastPathStatefulDifferential what a session's own state could change
// in go-sdk's answer to a call the fast path takes: a logging level set on
// the session, a notifications/cancelled naming no call in flight, a
// task-augmented call of a REST tool on a gateway serving no tasks (both
// ignore params.task: no tasks capability was declared), a call
// made at each protocol version on a session initialized at 2025-06-18,
// and calls on a second session of the same caller. Each call is answered
// by the fast path on one gateway, by go-sdk on the other, alike.
func TestFastPathStatefulDifferentialSessionState(t *testing.T) {
	p := newFastPairMode(t, 0, true)
	const authz = "Bearer tok-1"
	sessions := map[bool]string{true: openSession(t, p.fast, authz), false: openSession(t, p.sdk, authz)}
	onSession := func(fast bool) http.Header { return sessionHeader(sessions[fast], authz) }
	get := `{"name":"get_thing","arguments":{"id":"7"}}`
	pv := func(v string) http.Header { return http.Header{"Mcp-Protocol-Version": {v}} }
	cases := []fastCase{
		{"logging/setLevel", rpc("1", "logging/setLevel", `{"level":"debug"}`), nil, false},
		{"call after setLevel debug", rpc("2", "tools/call", get), nil, true},
		{"call failing after setLevel debug", rpc("3", "tools/call", `{"name":"fail"}`), nil, true},
		{"cancel of no call in flight", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"x"}}`, nil, false},
		// go-sdk reads a session's messages in order, but cancels in a
		// goroutine of its own (canceller.Preempt: go conn.Cancel(id)):
		// one that runs late cancels the next call with that id. The ping
		// is read after the cancel, so once it is answered that goroutine
		// has begun; the next cases wait for it to end.
		{"ping after the cancel", rpc("40", "ping", ""), nil, false},
	}
	runFastDifferential(t, p, cases, onSession)
	waitNoGoroutineIn(t, "jsonrpc2.(*Connection).Cancel")
	cases = []fastCase{
		{"call with the cancelled id", rpc("4", "tools/call", get), nil, true},
		{"task-augmented call of a REST tool, no tasks served", rpc("5", "tools/call", `{"name":"get_thing","arguments":{"id":"7"},"task":{}}`), pv("2025-11-25"), true},
		{"call at 2024-11-05 on a 2025-06-18 session", rpc("6", "tools/call", get), pv("2024-11-05"), true},
		{"call at 2025-03-26 on a 2025-06-18 session", rpc("7", "tools/call", get), pv("2025-03-26"), true},
		{"call at 2025-11-25 on a 2025-06-18 session", rpc("8", "tools/call", get), pv("2025-11-25"), true},
		{"call without a version header", rpc("9", "tools/call", get), http.Header{"Mcp-Protocol-Version": nil}, true},
		{"call with the token of another caller", rpc("10", "tools/call", get), http.Header{"Authorization": {"Bearer tok-2"}}, false},
	}
	runFastDifferential(t, p, cases, onSession)

	// A second session of the same caller: its own state, the same answers.
	sessions = map[bool]string{true: openSession(t, p.fast, authz), false: openSession(t, p.sdk, authz)}
	runFastDifferential(t, p, []fastCase{
		{"call on a second session", rpc("2", "tools/call", get), nil, true},
		{"re-used id on a second session", rpc("4", "tools/call", get), nil, true},
	}, onSession)
}

// TestFastPathStatefulPlaybookTasks: on sessions initialized at 2025-11-25
// (tasks declared), with a playbook whose task is required, the fast path
// answers the plain calls of playbook tools as go-sdk's session does, and
// leaves alone what the tasks door answers (a plain call of the required
// tool: -32601; a task-augmented call of a tool without task support).
func TestFastPathStatefulPlaybookTasks(t *testing.T) {
	p := &fastPair{}
	for _, disable := range []bool{false, true} {
		e := engine.New(&engine.Options{NumericIDs: true})
		api := httptest.NewServer(http.HandlerFunc(fastAPI))
		t.Cleanup(api.Close)
		cfg := &Config{Stateful: true, Upstreams: []Upstream{
			{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
				Playbooks: &Playbooks{Items: []PlaybookItem{{Path: "demo/slow", Task: "required"}}}},
			{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api.URL},
		}}
		g, err := New(t.Context(), cfg, &Options{DisableFastPath: disable})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		if disable {
			p.sdk = srv.URL + "/mcp"
		} else {
			g.fast.onServe = func() { p.answered.Add(1) }
			p.fast = srv.URL + "/mcp"
		}
	}
	const authz = "Bearer alice"
	open := func(url string) string {
		init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}},"clientInfo":{"name":"t","version":"1"}}}`
		resp, body := post(t, url, init, http.Header{"Authorization": {authz}})
		id := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || id == "" || !strings.Contains(body, `"2025-11-25"`) {
			t.Fatalf("initialize: %d, session %q: %s", resp.StatusCode, id, body)
		}
		h := http.Header{"Authorization": {authz}, "Mcp-Session-Id": {id}, "Mcp-Protocol-Version": {"2025-11-25"}}
		if resp, body := post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("initialized: %d %s", resp.StatusCode, body)
		}
		return id
	}
	sessions := map[bool]string{true: open(p.fast), false: open(p.sdk)}
	onSession := func(fast bool) http.Header {
		return http.Header{"Authorization": {authz}, "Mcp-Session-Id": {sessions[fast]}, "Mcp-Protocol-Version": {"2025-11-25"}}
	}
	runFastDifferential(t, p, []fastCase{
		{"plain call of a playbook", rpc("1", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ada"}}`), nil, true},
		{"plain call of the task-required playbook", rpc("2", "tools/call", `{"name":"demo_slow","arguments":{}}`), nil, false},
		{"task-augmented call of a REST tool", rpc("3", "tools/call", `{"name":"get_thing","arguments":{"id":"7"},"task":{}}`), nil, false},
		{"failed run", rpc("4", "tools/call", `{"name":"demo_fail","arguments":{}}`), nil, true},
		{"REST call", rpc("5", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`), nil, true},
		{"after them, numbered alike", rpc("6", "tools/call", `{"name":"demo_fast","arguments":{"name":"Bo"}}`), nil, true},
	}, onSession)
}

// TestFastPathStatefulHangUpCancels: a call the fast path serves on a
// session ends, upstream request included, when its client hangs up, as
// TestFastPathHangUpCancels checks without sessions; and the session's idle
// timer, held while the call ran, runs again once it has ended.
func TestFastPathStatefulHangUpCancels(t *testing.T) {
	var g *Gateway
	rec, url := startGatewayOn(t, Config{Stateful: true}, nil, func(gg *Gateway, _ *http.Server) { g = gg })
	var served atomic.Int64
	g.fast.onServe = func() { served.Add(1) }
	id := openSession(t, url, "")
	conn := rawPOST(t, url, call(1, "wait", `{}`), sessionHeader(id, ""), false)
	waitFor(t, "the upstream call to start", func() bool { _, started, _ := rec.counts(); return started == 1 })
	g.life.mu.Lock()
	posts := g.life.live[id].posts
	g.life.mu.Unlock()
	if posts != 1 {
		t.Errorf("%d POSTs of the session counted while the call runs, want 1", posts)
	}
	conn.Close()
	select {
	case <-rec.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream call was not cancelled when the client hung up")
	}
	waitFor(t, "the POST to end", func() bool {
		g.life.mu.Lock()
		defer g.life.mu.Unlock()
		return g.life.live[id].posts == 0
	})
	if served.Load() != 1 {
		t.Errorf("fast-served %d calls, want 1", served.Load())
	}
}

// waitNoGoroutineIn waits until no goroutine's stack holds fn (a function's
// name as runtime.Stack writes it): a goroutine that a library starts and
// nothing else tells the end of.
func waitNoGoroutineIn(t *testing.T, fn string) {
	t.Helper()
	waitFor(t, "no goroutine in "+fn, func() bool {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				return !strings.Contains(string(buf[:n]), fn)
			}
			buf = make([]byte, 2*len(buf))
		}
	})
}
