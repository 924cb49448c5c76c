package gateway

// Security review of search mode (search.go): each test is named for a bug
// it demonstrates, and fails until the bug is fixed. See the comment of
// each for the attack.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// reviewAnswer decodes the one JSON-RPC answer of a POST, whether the
// gateway answered it as JSON (the fast path, the task door) or as one SSE
// event (go-sdk).
func reviewAnswer(t *testing.T, body string) (result, rpcErr map[string]any) {
	t.Helper()
	raw := strings.TrimSpace(body)
	if !strings.HasPrefix(raw, "{") {
		for line := range strings.SplitSeq(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				raw = d
			}
		}
	}
	var m struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m.Result, m.Error
}

// searchPlaybookGateway is a stateless gateway in search mode in front of
// the example playbook engine (demo/fast, demo/slow, demo/fail).
func searchPlaybookGateway(t *testing.T) string {
	t.Helper()
	e := engine.New(&engine.Options{Step: 100 * time.Millisecond})
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "search"}, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json",
		Handler: e.Handler(), Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.search == nil {
		t.Fatal("not in search mode")
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestReviewMetaCallWritesSharedPlaybookResult: a meta-call writes
// _meta["mcpgate/tool"] into the result the real handler returned
// (searchMode.call: res.Meta[MetaTool] = …). For a playbook tool that
// result is not the call's own: the runner hands every request that joins
// a run (the same caller, playbook and arguments, while it runs or within
// playbooks.dedup_window, 30 s by default, after it succeeded) the same
// *mcp.CallToolResult (playbook.Runner.Run copies the Outcome, not its
// Result). So
//
//   - two call_tool calls of one playbook in flight at once write the same
//     map from two goroutines: a data race, and Go's "fatal error:
//     concurrent map writes" kills the whole gateway (not a recoverable
//     panic). Any caller can do it to itself with two identical POSTs: a
//     denial of service for everyone. (Under -race this test reports it.)
//   - deterministically, the meta-call's mark leaks into other answers: a
//     plain tools/call of the playbook within the dedup window answers
//     _meta["mcpgate/tool"], which says it came through a meta-call.
//
// Old-protocol (2025-06-18) POSTs are used so that go-sdk itself does not
// write the result (see TestReviewDedupedPlaybookResultMutatedByGoSDK).
// Fix: in call, set the mark on a copy (r := *res; r.Meta =
// maps.Clone(res.Meta)); and have the runner give each request its own copy
// of the Result (see the other test).
func TestReviewMetaCallWritesSharedPlaybookResult(t *testing.T) {
	url := searchPlaybookGateway(t)
	h := http.Header{"Authorization": {"Bearer one-caller"}, "Mcp-Protocol-Version": {"2025-06-18"}}

	// Concurrent meta-calls that join one run of demo/slow.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := authPost(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"call_tool","arguments":{"name":"demo_slow","arguments":{"label":"race"}}}}`, i+1), h)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("meta-call %d: %d %s", i, resp.StatusCode, body)
			}
		}()
	}
	wg.Wait()

	// A meta-call, then the same call by name within the dedup window.
	_, body := authPost(t, url, toolCallArgs(metaCall, `{"name":"demo_fast","arguments":{"name":"Ada"}}`), h)
	res, rpcErr := reviewAnswer(t, body)
	if rpcErr != nil || res["isError"] == true {
		t.Fatalf("call_tool demo_fast: %s", body)
	}
	_, body = authPost(t, url, toolCallArgs("demo_fast", `{"name":"Ada"}`), h)
	res, rpcErr = reviewAnswer(t, body)
	if rpcErr != nil || res["isError"] == true {
		t.Fatalf("demo_fast by name: %s", body)
	}
	if meta, _ := res["_meta"].(map[string]any); meta[MetaTool] != nil {
		t.Errorf("a tools/call of demo_fast by name answers _meta[%q] = %v: the meta-call wrote the result every caller joining the run shares", MetaTool, meta[MetaTool])
	}
}

// TestReviewDedupedPlaybookResultMutatedByGoSDK: not search mode's own bug,
// but the root of the previous one, found on the way. go-sdk v1.8.0 writes
// the result a tool handler returns when the request is 2026-07-28
// (setCompleteResultType: resultType; annotateServerInfo:
// _meta["io.modelcontextprotocol/serverInfo"]). The playbook runner hands
// the same *mcp.CallToolResult to every request that joins a run, so
//
//   - two 2026-07-28 calls (the go-sdk client's default) joining one run
//     race on its _meta map in go-sdk (reported under -race: mrtr.go:59,
//     server.go annotateServerInfo), with the same fatal "concurrent map
//     writes" risk;
//   - deterministically, a 2025-06-18 caller that joins the run later gets
//     2026-07-28's serverInfo in its _meta (and a resultType).
//
// Fix: playbook.Runner.Run (and the task path) returns a copy of the
// Result per request, with its own Meta map.
func TestReviewDedupedPlaybookResultMutatedByGoSDK(t *testing.T) {
	url := searchPlaybookGateway(t)
	authz := http.Header{"Authorization": {"Bearer one-caller"}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := connect(t, url, authz)
			if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo_slow", Arguments: map[string]any{"label": "sdk"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	s := connect(t, url, authz)
	if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo_fast", Arguments: map[string]any{"name": "world"}}); err != nil || res.IsError {
		t.Fatalf("demo_fast over 2026-07-28: %v %+v", err, res)
	}
	h := authz.Clone()
	h.Set("Mcp-Protocol-Version", "2025-06-18")
	_, body := authPost(t, url, toolCallArgs("demo_fast", `{"name":"world"}`), h)
	res, _ := reviewAnswer(t, body)
	if meta, _ := res["_meta"].(map[string]any); meta["io.modelcontextprotocol/serverInfo"] != nil || res["resultType"] != nil {
		t.Errorf("a 2025-06-18 answer carries what go-sdk wrote for another caller's 2026-07-28 answer: %s", body)
	}
}

// TestReviewRelistMakesDescribesNotifyEveryone: list_changed for a
// describe is to go to the describing session only (notifyMiddleware). But
// once any relist has happened (searchMode.changes > 0, which relist bumps
// on every re-read, even one that changes nothing), a session that never
// described anything (described[ss] == nil) is sent every list_changed
// go-sdk broadcasts, including the one each describe_tools of any other
// session provokes (addDescribed re-adds describe_tools). So every client
// learns when any other session describes tools, and one client can make
// every other client re-fetch tools/list up to ~100 times a second
// (go-sdk's 10 ms debounce) by alternating describes.
// Fix: track what a session was told even when it described nothing (e.g.
// create its sessionTools, seen = changes, the first time a notification
// reaches it), and send only when pending or seen < changes.
func TestReviewRelistMakesDescribesNotifyEveryone(t *testing.T) {
	up := newFedUpstream(t)
	cfg := &Config{Stateful: true, Catalog: config.CatalogConfig{Mode: "search"},
		Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}}}
	g, url := serveGateway(t, cfg, nil)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "bystander", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	bystander, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer bystander.Close()

	// The upstream changes a tool: everyone is told, rightly.
	up.desc.Store("Echoes its text, described anew.")
	g.relist("fs")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the relist")
	}

	// Another session describes tools: the bystander's list is unchanged.
	// The describing session is told (so go-sdk's broadcast has gone out);
	// then a second change of the upstream's: the bystander's next
	// notification must be that one, and the only one (notifications
	// reach a session in order), with no fixed wait.
	told := make(chan struct{}, 16)
	oc := mcp.NewClient(&mcp.Implementation{Name: "describer", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { told <- struct{}{} },
	})
	other, err := oc.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, name := range []string{"fs_echo", "fs_delete_file"} {
		callJSON(t, other, metaDescribe, map[string]any{"names": []string{name}})
		select {
		case <-told:
		case <-time.After(10 * time.Second):
			t.Fatal("the describing session was not told")
		}
	}
	up.desc.Store("Echoes its text, described a third time.")
	g.relist("fs")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the second relist")
	}
	// Ping round-trips on the bystander's session: anything sent before
	// its answer has been handled.
	if err := bystander.Ping(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(changed); n != 0 {
		t.Errorf("the bystander was sent %d list_changed more than the upstream's changes: another session's describe_tools reached it", n)
	}
}

// TestReviewTaskAugmentedMetaCallUnknownTool: a task-augmented call_tool
// (params.task, protocol 2025-11-25) of a playbook tool is answered by the
// task door, which looks up params.name among the tools served and answers
// -32602 `unknown tool "call_tool"`: the client is told a tool tools/list
// lists does not exist, instead of the spec's -32601 for a tool without
// execution.taskSupport (what taskDoor.create answers a REST tool) — or a
// task for the playbook it names. Errors are to be clear (claim 4).
// Fix: in taskDoor.create, answer a meta-tool as a tool without
// taskSupport (or resolve metaCallTarget, apply call_read_only_tool's
// refusal, and create the real tool's task).
func TestReviewTaskAugmentedMetaCallUnknownTool(t *testing.T) {
	url := searchPlaybookGateway(t)
	for _, meta := range []string{metaCall, metaCallReadOnly} {
		_, body := authPost(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+meta+`","arguments":{"name":"demo_fast","arguments":{}},"task":{"ttl":60000}}}`,
			http.Header{"Mcp-Protocol-Version": {"2025-11-25"}})
		_, rpcErr := reviewAnswer(t, body)
		if msg, _ := rpcErr["message"].(string); strings.Contains(msg, "unknown tool") {
			t.Errorf("task-augmented %s: %s", meta, body)
		}
	}
}

// TestReviewSearchCardTrustsUntrustedHints: a search card's hints are
// documented as "the hints the gateway's policy goes by (policyHints: a
// federated tool's untrusted claims do not count)". policyHints resets
// only readOnlyHint and destructiveHint, so a card passes on an untrusted
// upstream's idempotentHint: true (and openWorldHint: false) as if the
// gateway vouched for them — while the gateway itself will not retry the
// call on that claim (federatedIdempotent). A client choosing to retry or
// auto-approve on the card is misled by exactly the upstream the gateway
// distrusts. Fix: hintsOf an untrusted federated tool gives MCP's defaults
// (idempotent false, open world true) unless the config set them, or
// policyHints resets all four.
func TestReviewSearchCardTrustsUntrustedHints(t *testing.T) {
	up := newFedUpstream(t) // echo claims readOnlyHint: true, hence idempotent
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "search"},
		Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}}}
	_, url := serveGateway(t, cfg, nil)
	s := connect(t, url, nil)
	_, found := callJSON(t, s, metaSearch, map[string]any{"query": "echo text"})
	cards, _ := found["tools"].([]any)
	for _, c := range cards {
		card := c.(map[string]any)
		if card["name"] != "fs_echo" {
			continue
		}
		hints := card["annotations"].(map[string]any)
		if hints["readOnlyHint"] != false {
			t.Fatalf("untrusted read-only claim: %v", card)
		}
		if hints["idempotentHint"] == true || hints["openWorldHint"] == false {
			t.Errorf("the card of an untrusted upstream's tool vouches for its idempotentHint/openWorldHint: %v (provenance %v)", hints, card["provenance"])
		}
		return
	}
	t.Fatalf("no card for fs_echo: %v", found)
}

// TestReviewSearchNamesHiddenUpstreams: under auth.list: callable,
// search_tools is to reveal nothing of what the caller may not call. Its
// error for an unknown upstream lists every upstream configured, those
// whose tools the caller may call none of included (here "admin", whose
// only tool needs mcp:destructive), and upstream: "admin" answers an empty
// list where upstream: "nope" answers an error: an oracle for hidden
// upstreams. Fix: name only the upstreams with a tool visible to the
// caller, and answer the others as unknown.
func TestReviewSearchNamesHiddenUpstreams(t *testing.T) {
	is := newAuthIssuer(t)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	adminDoc := strings.Replace(strings.Replace(authDoc, `"operationId": "list_things"`, `"operationId": "list_secrets"`, 1), `"operationId": "delete_thing"`, `"operationId": "purge_everything"`, 1)
	adminDoc = strings.Replace(adminDoc, `"/things": {"get"`, `"/things": {"delete"`, 1)
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "search"},
		Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}, List: auth.ListCallable,
			Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}},
		Upstreams: []Upstream{
			{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL, Auth: auth.Upstream{Mode: auth.ModeNone}},
			{Name: "admin", OpenAPI: "admin.json", Document: []byte(adminDoc), BaseURL: api.URL, ToolPrefix: "admin_", Auth: auth.Upstream{Mode: auth.ModeNone}},
		}}
	_, url := serveGateway(t, cfg, nil)
	reader := http.Header{"Authorization": {"Bearer " + is.token(t, "mcp things:read")}}
	s := connect(t, url, reader)
	_, found := callJSON(t, s, metaSearch, map[string]any{"query": "purge everything secrets", "upstream": "admin"})
	if cards, _ := found["tools"].([]any); len(cards) != 0 {
		t.Fatalf("the reader finds admin tools: %v", found)
	}
	res, _ := callJSON(t, s, metaSearch, map[string]any{"query": "x", "upstream": "nope"})
	if txt := callText(res); strings.Contains(txt, "admin") {
		t.Errorf("search_tools names an upstream none of whose tools the caller may call: %q", txt)
	}
}

// TestReviewRelistNotifiesBeforeSearchRebuild: relist bumps
// searchMode.changes, AddTools the changed tools (go-sdk sends
// notifications/tools/list_changed 10 ms later), and only when it returns
// rebuilds the search state (a deferred searchMode.rebuild, which indexes
// every tool: ~45 ms for 600 tools, ~360 ms for 3000, measured here). A
// client that re-lists on the notification — what it is for — is answered
// from the old state: a pinned (or described) tool the upstream just added
// is missing from its tools/list, and it will not be told again; a changed
// one is listed as it was; search_tools does not find it. Here the pinned
// tool big_late arrives (and goes) at each relist, and the test checks,
// when list_changed goes out, that the search state already holds the
// change. Timing-dependent: each round catches it about half the time on 2
// cores, so the test stops at the first stale round of up to 8.
// Fix: rebuild the search state before the AddTool/RemoveTools calls that
// make go-sdk notify (or hold the notification until it is rebuilt).
func TestReviewRelistNotifiesBeforeSearchRebuild(t *testing.T) {
	var late atomic.Bool
	newServer := func() *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
		h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		}
		for i := range 1500 {
			s.AddTool(&mcp.Tool{Name: fmt.Sprintf("op_%d", i), Description: fmt.Sprintf("Lists the things of kind %d for a repository, paginated and sorted.", i),
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"owner": map[string]any{"type": "string", "description": "The owner."}}}}, h)
		}
		if late.Load() {
			s.AddTool(&mcp.Tool{Name: "late", Description: "Arrived late.", InputSchema: map[string]any{"type": "object"}}, h)
		}
		return s
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	cfg := &Config{Stateful: true, Catalog: config.CatalogConfig{Mode: "search", Pinned: []string{"big_late"}},
		Upstreams: []Upstream{{Name: "big", MCP: &federation.Config{URL: srv.URL}}}}
	g, url := serveGateway(t, cfg, nil)
	fresh := make(chan bool, 16)
	var want atomic.Bool
	g.server.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/tools/list_changed" {
				fresh <- (g.search.state.Load().byName["big_late"] != nil) == want.Load()
			}
			return next(ctx, method, req)
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for round := range 8 {
		want.Store(round%2 == 0)
		late.Store(round%2 == 0)
		g.relist("big")
		select {
		case ok := <-fresh:
			if !ok {
				t.Fatalf("round %d: list_changed went out while the search state still had big_late %s: a client re-listing on it gets the old list",
					round, map[bool]string{true: "absent", false: "present"}[want.Load()])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: no list_changed", round)
		}
	}
}

// TestReviewUpstreamToolNamedLikeMetaToolStopsGateway: in search mode an
// MCP upstream served without a prefix (tool_prefix: "") that offers a
// tool named call_tool (or search_tools, describe_tools,
// call_read_only_tool) makes New fail: newSearchMode refuses any served
// tool named like a meta-tool. relist, for the same tool arriving later,
// withholds it with a warning; at start-up the whole gateway, every other
// upstream included, does not start. So an upstream MCP server — the party
// whose hints the gateway does not even believe — decides whether the
// gateway comes back after its next restart (and in auto mode, whether it
// crosses the threshold too). Fix: withhold a federated tool named like a
// meta-tool with a warning, as relist does (keep the error for the
// operator's own OpenAPI and playbook tools, which config can rename).
func TestReviewUpstreamToolNamedLikeMetaToolStopsGateway(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	s.AddTool(&mcp.Tool{Name: "call_tool", InputSchema: map[string]any{"type": "object"}}, h)
	s.AddTool(&mcp.Tool{Name: "harmless", InputSchema: map[string]any{"type": "object"}}, h)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "search"}, Upstreams: []Upstream{
		{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL, Auth: auth.Upstream{Mode: auth.ModeNone}},
		{Name: "tools", ToolPrefix: "", ToolPrefixSet: true, MCP: &federation.Config{URL: srv.URL}, Auth: auth.Upstream{Mode: auth.ModeNone}},
	}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("an MCP upstream's tool named call_tool stopped the gateway: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	if _, ok := g.live.lookup("call_tool"); ok {
		t.Errorf("the upstream's call_tool is served beside the meta-tool")
	}
}
