package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
)

// searchGateways serves cfg three ways: the fast path, go-sdk stateless and
// go-sdk stateful.
func searchGateways(t *testing.T, cfg func(stateful bool) *Config) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range []struct {
		name           string
		stateful, slow bool
	}{{"fast path", false, false}, {"go-sdk stateless", false, true}, {"go-sdk stateful", true, false}} {
		g, err := New(context.Background(), cfg(s.stateful), &Options{DisableFastPath: s.slow})
		if err != nil {
			t.Fatal(err)
		}
		if g.search == nil {
			t.Fatalf("%s: not in search mode", s.name)
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		out[s.name] = srv.URL + "/mcp"
	}
	return out
}

func (c *credRecorder) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// callJSON calls a tool and returns its result and its structured content.
func callJSON(t *testing.T, s *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return res, m
}

func callText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestSearchMode: tools/list holds the pinned tool and the meta-tools; the
// meta-tools search, describe and call, each on every path a request can
// take; call_read_only_tool refuses a destructive tool and sends nothing;
// real tools stay callable by name.
func TestSearchMode(t *testing.T) {
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	urls := searchGateways(t, func(stateful bool) *Config {
		return &Config{Stateful: stateful, Catalog: config.CatalogConfig{Mode: "search", Pinned: []string{"list_things"}},
			Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}
	})
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			s := connect(t, url, nil)
			ctx := context.Background()
			list, err := s.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			if want := []string{"call_read_only_tool", "call_tool", "describe_tools", "list_things", "search_tools"}; !slices.Equal(names, want) {
				t.Errorf("tools/list: %v, want %v", names, want)
			}
			for _, tl := range list.Tools {
				if tl.Name == metaCallReadOnly && !tl.Annotations.ReadOnlyHint || tl.Name == metaCall && (tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint) {
					t.Errorf("%s: hints %+v", tl.Name, tl.Annotations)
				}
			}

			_, found := callJSON(t, s, metaSearch, map[string]any{"query": "delete a thing"})
			cards, _ := found["tools"].([]any)
			if len(cards) != 2 {
				t.Fatalf("search: %v", found)
			}
			first := cards[0].(map[string]any)
			hints := first["annotations"].(map[string]any)
			if first["name"] != "delete_thing" || hints["destructiveHint"] != true || hints["readOnlyHint"] != false || first["upstream"] != "api" {
				t.Errorf("first card: %v", first)
			}
			if p, _ := first["provenance"].(map[string]any); p["destructiveHint"] == "" || p["destructiveHint"] == nil {
				t.Errorf("no provenance: %v", first)
			}
			_, found = callJSON(t, s, metaSearch, map[string]any{"query": "delete a thing", "read_only": true})
			if cards, _ := found["tools"].([]any); len(cards) != 1 || cards[0].(map[string]any)["name"] != "list_things" {
				t.Errorf("read_only search: %v", found)
			}

			_, described := callJSON(t, s, metaDescribe, map[string]any{"names": []string{"delete_thing", "nope"}})
			tools, _ := described["tools"].([]any)
			if len(tools) != 1 || tools[0].(map[string]any)["name"] != "delete_thing" || tools[0].(map[string]any)["inputSchema"] == nil {
				t.Errorf("describe: %v", described)
			}
			if u, _ := described["unknown"].([]any); len(u) != 1 || u[0] != "nope" {
				t.Errorf("describe unknown: %v", described)
			}

			before := rec.count()
			res, _ := callJSON(t, s, metaCallReadOnly, map[string]any{"name": "delete_thing", "arguments": map[string]any{"id": "1"}})
			if !res.IsError || !strings.Contains(callText(res), "delete_thing is not read-only") || rec.count() != before {
				t.Errorf("call_read_only_tool on a destructive tool: %v %q, upstream calls %d → %d", res.IsError, callText(res), before, rec.count())
			}
			res, _ = callJSON(t, s, metaCallReadOnly, map[string]any{"name": "list_things"})
			if res.IsError || res.Meta[MetaTool] != "list_things" || rec.count() != before+1 {
				t.Errorf("call_read_only_tool on a read-only tool: %v %q %v", res.IsError, callText(res), res.Meta)
			}
			res, _ = callJSON(t, s, metaCall, map[string]any{"name": "delete_thing", "arguments": map[string]any{"id": "1"}})
			if res.IsError || res.Meta[MetaTool] != "delete_thing" || rec.count() != before+2 {
				t.Errorf("call_tool: %v %q %v", res.IsError, callText(res), res.Meta)
			}
			// The real tool's own argument checks: nothing sent.
			res, _ = callJSON(t, s, metaCall, map[string]any{"name": "delete_thing", "arguments": map[string]any{}})
			if !res.IsError || rec.count() != before+2 {
				t.Errorf("call_tool without the path parameter: %v %q", res.IsError, callText(res))
			}
			res, _ = callJSON(t, s, "delete_thing", map[string]any{"id": "2"})
			if res.IsError || rec.count() != before+3 {
				t.Errorf("a real tool by name: %v %q", res.IsError, callText(res))
			}
		})
	}
}

// TestSearchModeBadArguments: every meta-tool's argument errors say what
// is wrong, as a tool error the model can act on, and send nothing.
func TestSearchModeBadArguments(t *testing.T) {
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	url := searchGateways(t, func(stateful bool) *Config {
		return &Config{Stateful: stateful, Catalog: config.CatalogConfig{Mode: "search"},
			Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}
	})["fast path"]
	s := connect(t, url, nil)
	for _, tc := range []struct {
		tool string
		args any
		want string
	}{
		{metaSearch, map[string]any{}, "query is required"},
		{metaSearch, map[string]any{"query": "  "}, "query is required"},
		{metaSearch, map[string]any{"query": strings.Repeat("x", 2000)}, "at most 1024"},
		{metaSearch, map[string]any{"query": "x", "limit": 0}, "limit 0 is not between 1 and 50"},
		{metaSearch, map[string]any{"query": "x", "limit": 51}, "limit 51 is not between 1 and 50"},
		{metaSearch, map[string]any{"query": "x", "upstream": "nope"}, `no upstream named "nope" has tools for you (those that do: api)`},
		{metaSearch, map[string]any{"query": "x", "Query": "y"}, `unknown argument "Query"`},
		{metaSearch, map[string]any{"query": 3}, "search_tools:"},
		{metaDescribe, map[string]any{}, "names is required"},
		{metaDescribe, map[string]any{"names": make([]string, 51)}, "51 names, at most 50"},
		{metaCall, map[string]any{}, "name is required"},
		{metaCall, map[string]any{"name": "nope"}, `unknown tool "nope"`},
		{metaCallReadOnly, map[string]any{"name": "list_things", "args": map[string]any{}}, `unknown argument "args"`},
		{metaCall, map[string]any{"name": "delete_thing", "arguments": []int{1}}, "arguments must be a JSON object"},
	} {
		t.Run(fmt.Sprint(tc.tool, tc.args), func(t *testing.T) {
			res, _ := callJSON(t, s, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(callText(res), tc.want) {
				t.Errorf("got %v %q, want an error with %q", res.IsError, callText(res), tc.want)
			}
		})
	}
	if rec.count() != 0 {
		t.Errorf("%d requests reached the upstream", rec.count())
	}
}

// TestSearchModeAuth: a meta-call is authorized as the tool it runs (a
// destructive tool behind call_tool still needs its step-up scope), and
// under auth.list: callable search and describe show only what the caller
// may call.
func TestSearchModeAuth(t *testing.T) {
	is := newAuthIssuer(t)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	urls := searchGateways(t, func(stateful bool) *Config {
		return &Config{Stateful: stateful, Catalog: config.CatalogConfig{Mode: "search"},
			Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}, List: auth.ListCallable,
				Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}},
			Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}
	})
	reader := "Bearer " + is.token(t, "mcp things:read")
	admin := "Bearer " + is.token(t, "mcp things:read mcp:write mcp:destructive")
	url := urls["fast path"]
	for _, tc := range []struct {
		name, authz, body string
		status            int
	}{
		{"destructive through call_tool", reader, toolCallArgs(metaCall, `{"name":"delete_thing","arguments":{"id":"1"}}`), 403},
		{"destructive through call_read_only_tool", reader, toolCallArgs(metaCallReadOnly, `{"name":"delete_thing","arguments":{"id":"1"}}`), 403},
		{"read-only through call_read_only_tool", reader, toolCallArgs(metaCallReadOnly, `{"name":"list_things"}`), 200},
		{"destructive with its scope", admin, toolCallArgs(metaCall, `{"name":"delete_thing","arguments":{"id":"1"}}`), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rec.count()
			resp, body := authPost(t, url, tc.body, http.Header{"Authorization": {tc.authz}})
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == 403 {
				if ch := resp.Header.Get("WWW-Authenticate"); !strings.Contains(ch, "mcp:destructive") || rec.count() != before {
					t.Errorf("challenge %q, upstream calls %d → %d", ch, before, rec.count())
				}
			} else if rec.count() != before+1 {
				t.Errorf("upstream calls %d → %d: %s", before, rec.count(), body)
			}
		})
	}
	for name, url := range urls {
		t.Run("callable "+name, func(t *testing.T) {
			s := connect(t, url, http.Header{"Authorization": {reader}})
			_, found := callJSON(t, s, metaSearch, map[string]any{"query": "delete a thing"})
			cards, _ := found["tools"].([]any)
			if len(cards) != 1 || cards[0].(map[string]any)["name"] != "list_things" {
				t.Errorf("search for a reader: %v", found)
			}
			_, described := callJSON(t, s, metaDescribe, map[string]any{"names": []string{"delete_thing"}})
			if u, _ := described["unknown"].([]any); len(u) != 1 {
				t.Errorf("describe for a reader: %v", described)
			}
		})
	}
}

func toolCallArgs(name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args)
}

// TestSearchModeDescribeLists: in stateful mode the tools a session
// described join its tools/list, and it is sent list_changed; another
// session's list stays as it was.
func TestSearchModeDescribeLists(t *testing.T) {
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	g, err := New(context.Background(), &Config{Stateful: true, Catalog: config.CatalogConfig{Mode: "search"},
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := context.Background()
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := connectSession(t, srv.URL+"/mcp", nil)

	callJSON(t, s, metaDescribe, map[string]any{"names": []string{"delete_thing"}})
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after describe_tools")
	}
	names := func(s *mcp.ClientSession) []string {
		list, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range list.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	if got := names(s); !slices.Contains(got, "delete_thing") || len(got) != 5 {
		t.Errorf("the describing session's tools/list: %v", got)
	}
	if got := names(other); slices.Contains(got, "delete_thing") || len(got) != 4 {
		t.Errorf("another session's tools/list: %v", got)
	}
}

// TestSearchModeRefusals: a tool named like a meta-tool, and the catalog
// section's errors.
func TestSearchModeRefusals(t *testing.T) {
	doc := strings.Replace(authDoc, `"operationId": "list_things"`, `"operationId": "search_tools"`, 1)
	_, err := New(context.Background(), &Config{Catalog: config.CatalogConfig{Mode: "search"},
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(doc), BaseURL: "http://127.0.0.1:1"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "upstream api's tool search_tools has the name of a search meta-tool") {
		t.Errorf("collision: %v", err)
	}
	// In flat mode the name is the tool's.
	if _, err := New(context.Background(), &Config{
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(doc), BaseURL: "http://127.0.0.1:1"}}}, nil); err != nil {
		t.Errorf("flat: %v", err)
	}
	// auto: search past the threshold only.
	for _, tc := range []struct {
		threshold int
		search    bool
	}{{1, true}, {2, false}} {
		g, err := New(context.Background(), &Config{Catalog: config.CatalogConfig{Mode: "auto", SearchThreshold: tc.threshold},
			Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: "http://127.0.0.1:1"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (g.search != nil) != tc.search {
			t.Errorf("auto, threshold %d, 2 tools: search %v", tc.threshold, g.search != nil)
		}
	}
}

// TestMetaCallTarget: the step-up check reads a meta-call's target as the
// handler does, and nothing else as one.
func TestMetaCallTarget(t *testing.T) {
	for _, tc := range []struct {
		tool, params string
		want         string
		ok           bool
	}{
		{metaCall, `{"name":"call_tool","arguments":{"name":"delete_thing"}}`, "delete_thing", true},
		{metaCallReadOnly, `{"name":"call_read_only_tool","arguments":{"name":"x","arguments":{}}}`, "x", true},
		{metaCall, `{"name":"call_tool","arguments":{"Name":"delete_thing"}}`, "", false}, // case-sensitive, as decodeArgs
		{metaCall, `{"name":"call_tool","arguments":"delete_thing"}`, "", false},
		{metaCall, `{"name":"call_tool"}`, "", false},
		{metaSearch, `{"name":"search_tools","arguments":{"name":"delete_thing"}}`, "", false},
		{"delete_thing", `{"name":"delete_thing","arguments":{"name":"list_things"}}`, "", false},
	} {
		got, ok := metaCallTarget(tc.tool, json.RawMessage(tc.params))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s: %q %v, want %q %v", tc.tool, tc.params, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFirstSentence(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Lists the things. Paginated.", "Lists the things."},
		{"Lists v1.2 things\nMore.", "Lists v1.2 things"},
		{"", ""},
		{strings.Repeat("é", 150), strings.Repeat("é", 100) + "…"},
	} {
		if got := firstSentence(tc.in); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzMetaCallTarget: whatever a meta-call's arguments are, the tool the
// step-up check authorizes (metaCallTarget) is the tool the handler runs
// (decodeArgs): a difference would let a call past the check of the tool
// it runs.
func FuzzMetaCallTarget(f *testing.F) {
	for _, s := range []string{`{"name":"a"}`, `{"name":"a","name":"b"}`, `{"Name":"a","name":"b"}`, `{"name":"a","arguments":{"name":"b"}}`,
		`{"name":"\u0061"}`, `{"name":null}`, `{"name":"a","x":1}`, `[]`, `"a"`, `{"name":"a"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		params := json.RawMessage(`{"name":"call_tool","arguments":` + args + `}`)
		target, ok := metaCallTarget(metaCall, params)
		var p struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if !json.Valid(params) || sdkwire.Decode(params, &p) != nil {
			return // go-sdk refuses the message before any handler
		}
		var a callArgs
		err := decodeArgs(metaCall, p.Arguments, &a, "name", "arguments")
		if err == nil && a.Name != "" && (!ok || target != a.Name) {
			t.Fatalf("arguments %s: the handler runs %q, the step-up check saw %q (%v)", args, a.Name, target, ok)
		}
	})
}

// TestSearchModeGitHubList: search mode's tools/list for GitHub's whole
// API (600+ tools, 1.5 MB listed flat) fits in 8 KB: the meta-tools and
// one pinned tool.
func TestSearchModeGitHubList(t *testing.T) {
	path := filepath.Join(corpusDir, "github-api-2020.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: the shared corpus is not beside this clone", path)
	}
	flat := &Config{Upstreams: []Upstream{{Name: "github", OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	searching := *flat
	searching.Catalog = config.CatalogConfig{Mode: "auto", Pinned: []string{"repos_get"}}
	sizes := map[string]int{}
	for name, cfg := range map[string]*Config{"flat": flat, "search": &searching} {
		g, err := New(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		resp, body := authPost(t, srv.URL+"/mcp", rpc("1", "tools/list", ""), nil)
		srv.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, body)
		}
		sizes[name] = len(body)
		if name == "search" && (g.search == nil || !strings.Contains(body, `"repos_get"`) || strings.Contains(body, `"repos_delete"`)) {
			t.Errorf("search mode's list: %.300s", body)
		}
	}
	t.Logf("GitHub --all tools/list: %d bytes flat, %d bytes in search mode", sizes["flat"], sizes["search"])
	if sizes["search"] > 8<<10 {
		t.Errorf("search mode's tools/list is %d bytes, over 8 KB", sizes["search"])
	}
}

// TestSearchModeAudit: the audit says what search mode's tools/list holds,
// and that every tool stays callable.
func TestSearchModeAudit(t *testing.T) {
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "auto", SearchThreshold: 1, Pinned: []string{"list_things", "gone"}},
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: "http://127.0.0.1:1"}}}
	cat, err := BuildCatalog(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := cat.ListingMode(cfg)
	if want := []string{"search_tools", "describe_tools", "call_read_only_tool", "call_tool", "list_things"}; !l.Search || !slices.Equal(l.Listed, want) {
		t.Fatalf("listing %+v", l)
	}
	r := annotations.NewReport(cat.Facts(), nil)
	r.Listing = l
	var b strings.Builder
	if err := r.Write(&b, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "tools/list: search mode (catalog.mode auto, 2 tools, threshold 1) lists search_tools, describe_tools, call_read_only_tool, call_tool, list_things;") {
		t.Errorf("table:\n%s", b.String())
	}
	cfg.Catalog.SearchThreshold = 2
	if l := cat.ListingMode(cfg); l.Search || l.Listed != nil {
		t.Errorf("under the threshold: %+v", l)
	}
}

// TestSearchModeFastPath: a 2025-06-18 request (the fast path's; the go-sdk
// client speaks 2026-07-28, which goes to go-sdk) lists search mode's tools
// from the fast path's prebuilt page, and hands a meta-call to go-sdk's
// handler, which runs it.
func TestSearchModeFastPath(t *testing.T) {
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	g, err := New(context.Background(), &Config{Catalog: config.CatalogConfig{Mode: "search", Pinned: []string{"list_things"}},
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	g.fast.onServe = func() { served++ }
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	h := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	_, body := authPost(t, srv.URL+"/mcp", rpc("1", "tools/list", ""), h)
	var list struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err, body)
	}
	var names []string
	for _, tl := range list.Result.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"call_read_only_tool", "call_tool", "describe_tools", "list_things", "search_tools"}; !slices.Equal(names, want) || served != 1 {
		t.Errorf("tools/list: %v (fast path answered %d), want %v", names, served, want)
	}
	_, body = authPost(t, srv.URL+"/mcp", toolCallArgs(metaCallReadOnly, `{"name":"list_things"}`), h)
	if !strings.Contains(body, `"mcpgate/tool":"list_things"`) || served != 1 || rec.count() != 1 {
		t.Errorf("meta-call (fast path answered %d, upstream %d): %s", served, rec.count(), body)
	}
	_, body = authPost(t, srv.URL+"/mcp", toolCallArgs("list_things", `{}`), h)
	if served != 2 || rec.count() != 2 || strings.Contains(body, "isError\":true") {
		t.Errorf("a real tool by name (fast path answered %d): %s", served, body)
	}
}

// TestSearchModeIndexesBeforeDrop: the gateway indexes each tool as the
// catalog's SearchDoc gives it with the documents still loaded — what the
// recall benchmark (gateway/catalog/search) measures — not after the
// catalog dropped them: a parameter whose description the size budget cut
// from the input schema (Kubernetes' are) is still searched by the
// operation's own description of it.
func TestSearchModeIndexesBeforeDrop(t *testing.T) {
	path := filepath.Join(corpusDir, "kubernetes-swagger-2.0.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s: the shared corpus is not beside this clone", path)
	}
	cfg := &Config{Catalog: config.CatalogConfig{Mode: "search"},
		Upstreams: []Upstream{{Name: "k8s", OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	cat, err := BuildCatalog(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{} // tool → parameters with a description
	for _, tl := range cat.Tools {
		for _, f := range tl.SearchDoc().Params {
			if f.Description != "" {
				want[tl.Tool.Name]++
			}
		}
	}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := g.search.state.Load()
	differ := 0
	for _, tl := range st.tools {
		got := 0
		for _, f := range g.search.docs[tl].Params {
			if f.Description != "" {
				got++
			}
		}
		if got != want[tl.Tool.Name] {
			differ++
		}
	}
	if differ > 0 || len(st.tools) != len(cat.Tools) {
		t.Errorf("%d of %d tools indexed with fewer parameter descriptions than their SearchDoc has", differ, len(st.tools))
	}
}
