package gateway

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// serveFront serves g through a Front, as mcpgate serve does, until the
// test ends.
func serveFront(t *testing.T, g *Gateway) (*Front, *httptest.Server) {
	t.Helper()
	f := NewFront(g)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Cleanup(f.Close)
	return f, srv
}

// followDoc is frontDoc after an edit: get_thing's description changed, nap
// renamed nap2, wait as it was.
var followDoc = strings.NewReplacer(
	`"operationId": "get_thing",`, `"operationId": "get_thing", "description": "Reads one thing (v2).",`,
	`"operationId": "nap"`, `"operationId": "nap2"`,
).Replace(frontDoc)

// TestReloadSessionFollows: a stateful session begun before a reload is
// served the new catalog from then on, and told so once
// (notifications/tools/list_changed); its calls go to the new gateway's
// upstream, through the fast path and through go-sdk's handler alike; a tool
// the reload removed is unknown to it; a reload that changes no tool
// changes nothing on it. A reload that changes what the session negotiated
// (here, search mode) leaves it on the catalog it has.
func TestReloadSessionFollows(t *testing.T) {
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	build := func(doc string, prev *Gateway, mode string) (*recorder, *Gateway) {
		rec, base := newRecorder(t)
		cfg := Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(doc), BaseURL: base, Timeout: time.Minute}}}
		cfg.Catalog.Mode = mode
		g, err := New(context.Background(), &cfg, &Options{Logger: logger, DisableLogSampling: true, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return rec, g
	}
	rec1, g1 := build(frontDoc, nil, "")
	f, srv := serveFront(t, g1)

	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	ctx := context.Background()
	list := func() map[string]*mcp.Tool {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*mcp.Tool{}
		for _, tl := range res.Tools {
			m[tl.Name] = tl
		}
		return m
	}
	names := func(m map[string]*mcp.Tool) []string {
		return slices.Sorted(func(yield func(string) bool) {
			for n := range m {
				if !yield(n) {
					return
				}
			}
		})
	}
	if got := names(list()); !slices.Equal(got, []string{"get_thing", "nap", "wait"}) {
		t.Fatalf("before the reload: %v", got)
	}
	init := cs.InitializeResult()
	if init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
		t.Fatalf("a stateful gateway does not offer tools.listChanged: %+v", init.Capabilities.Tools)
	}

	rec2, g2 := build(followDoc, g1, "")
	f.Replace(g2)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after a reload that changed the tools")
	}
	after := list()
	if got := names(after); !slices.Equal(got, []string{"get_thing", "nap2", "wait"}) {
		t.Fatalf("after the reload: %v", got)
	}
	if !strings.Contains(after["get_thing"].Description, "(v2)") {
		t.Errorf("get_thing's description is the old one: %q", after["get_thing"].Description)
	}
	if !strings.Contains(logs.String(), "sessions=1 added=1 changed=1 removed=1") {
		t.Errorf("no reload line with what the session was told:\n%s", logs)
	}

	before1, _, _ := rec1.counts()
	for _, name := range []string{"get_thing", "nap2"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"id": "a"}})
		if err != nil || res.IsError {
			t.Fatalf("%s after the reload: %v %+v", name, err, res)
		}
	}
	if n, _, _ := rec2.counts(); n != 2 {
		t.Errorf("the new gateway's upstream saw %d calls, want 2", n)
	}
	if n, _, _ := rec1.counts(); n != before1 {
		t.Errorf("the old gateway's upstream saw %d calls after the reload", n-before1)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nap", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "nap"`) {
		t.Errorf("a tool the reload removed: %v, want unknown tool", err)
	}

	// The same configuration again: nothing changes on the session.
	_, g3 := build(followDoc, g2, "")
	f.Replace(g3)
	if !strings.Contains(logs.String(), "sessions=1 added=0 changed=0 removed=0") {
		t.Errorf("a reload that changed no tool changed the session's:\n%s", logs)
	}

	// Search mode: the session keeps what it has, and the log says why.
	_, g4 := build(frontDoc, g3, "search")
	f.Replace(g4)
	if !strings.Contains(logs.String(), "keep the catalog they have") || !strings.Contains(logs.String(), "catalog.mode is search") {
		t.Errorf("no line saying why the session stays:\n%s", logs)
	}
	if got := names(list()); !slices.Equal(got, []string{"get_thing", "nap2", "wait"}) {
		t.Errorf("after a reload it cannot follow: %v, want the catalog it had", got)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nap2", Arguments: map[string]any{}}); err != nil {
		t.Errorf("a call after a reload it cannot follow: %v", err)
	}
}

// TestReloadSessionFollowsFederated: an MCP upstream's tools changing after
// the reload reach a session begun before it: the current gateway's relist
// is mirrored on the retired gateway's server (list_changed, the new
// definition listed), and the retired gateway's own relist of the shared
// upstream does not put its own definitions back.
func TestReloadSessionFollowsFederated(t *testing.T) {
	up := newFedUpstream(t)
	logs := &syncBuffer{}
	build := func(prev *Gateway) *Gateway {
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}}}
		g, err := New(t.Context(), cfg, &Options{Previous: prev, Logger: slog.New(slog.NewTextHandler(logs, nil)), DisableLogSampling: true})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1 := build(nil)
	f, srv := serveFront(t, g1)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	describe := func() string {
		t.Helper()
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "fs_echo" {
				return tl.Description
			}
		}
		t.Fatalf("no fs_echo in %d tools", len(res.Tools))
		return ""
	}
	first := describe()

	g2 := build(g1)
	f.Replace(g2)
	if !strings.Contains(logs.String(), "sessions=1 added=0 changed=0 removed=0") {
		t.Fatalf("an unchanged upstream's tools changed on the session:\n%s", logs)
	}
	up.desc.Store("Echoes its text, changed after the reload.")
	g2.relist("fs")
	g1.relist("fs") // the shared client tells both gateways
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the upstream's change")
	}
	if got := describe(); got == first || !strings.Contains(got, "changed after the reload") {
		t.Fatalf("the session lists %q after the upstream's change", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs_echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the change: %v %+v", err, res)
	}
}

// TestReloadSessionFollowsPrompts: prompts follow a reload like tools: the
// session is told (prompts/list_changed), lists and renders the new
// configuration's prompts, a removed one is unknown, and completion answers
// from the new configuration's enums.
func TestReloadSessionFollowsPrompts(t *testing.T) {
	build := func(prev *Gateway, prompts ...Prompt) *Gateway {
		_, base := newRecorder(t)
		cfg := Config{Stateful: true, Prompts: prompts, Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(frontDoc), BaseURL: base}}}
		g, err := New(t.Context(), &cfg, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tone := func(enum ...string) []PromptArgument { return []PromptArgument{{Name: "tone", Enum: enum}} }
	g1 := build(nil,
		Prompt{Name: "greet", Template: "Hello {{ input.tone }}", Arguments: tone("warm", "dry")},
		Prompt{Name: "old", Template: "Old"})
	f, srv := serveFront(t, g1)
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	f.Replace(build(g1,
		Prompt{Name: "greet", Template: "Hi {{ input.tone }}", Arguments: tone("warm", "dry", "curt")},
		Prompt{Name: "new", Template: "New"}))
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/prompts/list_changed after a reload that changed the prompts")
	}
	res, err := cs.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range res.Prompts {
		names = append(names, p.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"greet", "new"}) {
		t.Fatalf("prompts after the reload: %v", names)
	}
	got, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"tone": "curt"}})
	if err != nil || len(got.Messages) == 0 || !strings.Contains(got.Messages[0].Content.(*mcp.TextContent).Text, "Hi curt") {
		t.Fatalf("greet after the reload: %v %+v", err, got)
	}
	if _, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "old"}); err == nil || !strings.Contains(err.Error(), `unknown prompt "old"`) {
		t.Errorf("a prompt the reload removed: %v", err)
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "tone", Value: "c"}})
	if err != nil || !slices.Equal(comp.Completion.Values, []string{"curt"}) {
		t.Errorf("completion after the reload: %v %+v", err, comp)
	}
}

// BenchmarkFollowMirror is what a reload costs a retired gateway with
// sessions when nothing changed: comparing the digest of each of the current
// gateway's tools with what its server shows (Kubernetes: 1,123 tools). The
// digests are computed once per gateway, before the loop here (the first
// mirror that reads them pays it).
//
//	go test ./gateway -run '^$' -bench FollowMirror -benchmem
func BenchmarkFollowMirror(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(corpusDir, "kubernetes-swagger-2.0.json"))
	if err != nil {
		b.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
	}
	build := func(prev *Gateway) *Gateway {
		cfg := &Config{Stateful: true, Upstreams: []Upstream{{OpenAPI: "k8s.json", Document: data, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
		g, err := New(context.Background(), cfg, &Options{Previous: prev})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { g.Close() })
		return g
	}
	g1 := build(nil)
	g2 := build(g1)
	g1.succ.Store(g2)
	g1.mirror()
	b.ReportAllocs()
	for b.Loop() {
		g1.follow.shown = nil // from its own tools again
		if added, changed, removed, _ := g1.mirror(); added+changed+removed != 0 {
			b.Fatalf("%d added, %d changed, %d removed between two loads of one document", added, changed, removed)
		}
	}
}
