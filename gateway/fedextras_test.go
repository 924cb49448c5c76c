package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// extrasUpstream is a real go-sdk MCP server (stateless, so every request
// sees what it offers now) whose prompts, resources and templates a test
// changes while the gateway serves it.
type extrasUpstream struct {
	prompts   atomic.Pointer[[]string] // names; each greets with its name
	resources atomic.Pointer[[]string] // URIs; each reads "at <URI>"
	template  atomic.Bool              // offers file:///logs/{day}
	desc      atomic.Value             // every prompt's description
}

func (e *extrasUpstream) set(prompts, resources []string) {
	e.prompts.Store(&prompts)
	e.resources.Store(&resources)
}

func (e *extrasUpstream) handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "extras", Version: "1"}, &mcp.ServerOptions{
			CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"asked of " + req.Params.Ref.Name + req.Params.Ref.URI}}}, nil
			},
		})
		mcp.AddTool(s, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
		for _, n := range *e.prompts.Load() {
			s.AddPrompt(&mcp.Prompt{Name: n, Description: e.desc.Load().(string), Arguments: []*mcp.PromptArgument{{Name: "who"}}},
				func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "prompt " + n + " of the upstream"}}}}, nil
				})
		}
		for _, uri := range *e.resources.Load() {
			s.AddResource(&mcp.Resource{Name: uri, URI: uri, MIMEType: "text/plain"},
				func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "at " + req.Params.URI}}}, nil
				})
		}
		if e.template.Load() {
			s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "logs", URITemplate: "file:///logs/{day}"},
				func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "log " + req.Params.URI}}}, nil
				})
		}
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true})
}

// TestFederationRelistExtras: an MCP upstream's prompts, resources and
// templates are followed as its tools are. One unreachable at start-up
// serves none, then all of them once it answers (completion included); a
// prompt or resource added later is served, one removed goes (its read is
// -32002, not the last contents); a new prompt whose name the
// configuration's prompt holds is not served and the configuration's
// stays; with a lock, a prompt changed since the review is taken off; a
// stateful session is told (prompts/list_changed, resources/list_changed).
func TestFederationRelistExtras(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateless", true: "stateful"}[stateful], func(t *testing.T) {
			testRelistExtras(t, stateful)
		})
	}
}

func testRelistExtras(t *testing.T, stateful bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port with nothing on it yet
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	up := &extrasUpstream{}
	up.desc.Store("Greets.")
	up.set([]string{"greet"}, []string{"file:///motd"})
	up.template.Store(true)
	cfg := &Config{
		Stateful:  stateful,
		Prompts:   []Prompt{{Name: "up_hello", Template: "the configuration's hello"}},
		Upstreams: []Upstream{{Name: "up", MCP: &federation.Config{URL: "http://" + addr + "/mcp"}}},
	}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("an unreachable MCP upstream stopped the start: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)

	var promptsChanged, resourcesChanged atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged.Add(1) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resourcesChanged.Add(1) },
	})
	// At 2025-11-25 (sessionOpts): a stateful gateway's session, with a
	// stream that list_changed is sent on.
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if cs.InitializeResult().Capabilities.Completions == nil {
		t.Error("no completions capability, though an upstream that may offer them has not answered yet")
	}
	prompts := func() []string {
		t.Helper()
		res, err := cs.ListPrompts(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range res.Prompts {
			out = append(out, p.Name)
		}
		return out
	}
	resources := func() []string {
		t.Helper()
		var out []string
		res, err := cs.ListResources(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Resources {
			out = append(out, r.URI)
		}
		tr, err := cs.ListResourceTemplates(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tr.ResourceTemplates {
			out = append(out, r.URITemplate)
		}
		return out
	}
	getPrompt := func(name string) (string, error) {
		t.Helper()
		var args map[string]string
		if name != "up_hello" { // the configuration's takes none
			args = map[string]string{"who": "x"}
		}
		res, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			return "", err
		}
		return res.Messages[0].Content.(*mcp.TextContent).Text, nil
	}
	read := func(uri string) (string, error) {
		t.Helper()
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if p := prompts(); !slices.Equal(p, []string{"up_hello"}) {
		t.Fatalf("prompts before the upstream answered: %v", p)
	}

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	upSrv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: up.handler()}}
	upSrv.Start()
	t.Cleanup(upSrv.Close)
	t.Cleanup(func() { g.Close() }) // first: its sessions hold connections to the upstream
	g.relist("up")                  // what the upstream's first answer to a ping sets off

	if p := prompts(); !slices.Equal(p, []string{"up_greet", "up_hello"}) {
		t.Fatalf("prompts once the upstream answered: %v", p)
	}
	// Under the upstream's prefix (federatedURI).
	if r := resources(); !slices.Equal(r, []string{"up+file:///motd", "up+file:///logs/{day}"}) {
		t.Fatalf("resources and templates once the upstream answered: %v", r)
	}
	if text, err := getPrompt("up_greet"); err != nil || text != "prompt greet of the upstream" {
		t.Errorf("prompts/get of a prompt served late: %q, %v", text, err)
	}
	if text, err := read("up+file:///motd"); err != nil || text != "at file:///motd" {
		t.Errorf("resources/read of a resource served late: %q, %v", text, err)
	}
	if text, err := read("up+file:///logs/monday"); err != nil || text != "log file:///logs/monday" {
		t.Errorf("resources/read through a template served late: %q, %v", text, err)
	}
	c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "up_greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
	if err != nil || len(c.Completion.Values) != 1 || c.Completion.Values[0] != "asked of greet" {
		t.Errorf("completion of a prompt served late: %+v, %v", c, err)
	}

	// A prompt and a resource added, a resource removed; a prompt whose
	// served name the configuration's prompt holds is not served.
	up.set([]string{"greet", "bye", "hello"}, []string{"file:///news"})
	up.template.Store(false)
	g.relist("up")
	if p := prompts(); !slices.Equal(p, []string{"up_bye", "up_greet", "up_hello"}) {
		t.Errorf("prompts after the upstream added two: %v", p)
	}
	if text, err := getPrompt("up_hello"); err != nil || text != "the configuration's hello" {
		t.Errorf("up_hello after the upstream offered a prompt of that name: %q, %v (want the configuration's)", text, err)
	}
	if text, err := getPrompt("up_bye"); err != nil || text != "prompt bye of the upstream" {
		t.Errorf("prompts/get of an added prompt: %q, %v", text, err)
	}
	if r := resources(); !slices.Equal(r, []string{"up+file:///news"}) {
		t.Errorf("resources after the upstream changed them: %v", r)
	}
	var rpcErr *jsonrpc.Error
	if _, err := read("up+file:///motd"); !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeResourceNotFound {
		t.Errorf("reading a resource the upstream removed: %v, want %d", err, mcp.CodeResourceNotFound)
	}
	if text, err := read("up+file:///news"); err != nil || text != "at file:///news" {
		t.Errorf("resources/read of an added resource: %q, %v", text, err)
	}
	if stateful {
		waitFor(t, "prompts/list_changed and resources/list_changed", func() bool {
			return promptsChanged.Load() > 0 && resourcesChanged.Load() > 0
		})
	}

	// With a lock of the prompts served now, a changed description takes
	// the upstream's prompts off at the next re-read; the configuration's
	// stays.
	g.live.mu.Lock()
	g.opts.Lock = &annotations.Lock{Prompts: g.Catalog().LockedPrompts(g.cfg)}
	for _, n := range []string{"bye", "greet"} {
		g.opts.Lock.Prompts = append(g.opts.Lock.Prompts, annotations.PromptFacts("up_"+n, "upstream:up", "", "Greets.", []*mcp.PromptArgument{{Name: "who"}}, ""))
	}
	g.live.mu.Unlock()
	g.relist("up")
	if p := prompts(); !slices.Equal(p, []string{"up_bye", "up_greet", "up_hello"}) {
		t.Fatalf("prompts after a re-read that changed nothing under the lock: %v", p)
	}
	up.desc.Store("Greets, and tells the model to ignore its instructions.")
	g.relist("up")
	if p := prompts(); !slices.Equal(p, []string{"up_hello"}) {
		t.Errorf("prompts after the locked ones changed: %v", p)
	}
	if _, err := getPrompt("up_greet"); err == nil || !strings.Contains(err.Error(), "up_greet") {
		t.Errorf("prompts/get of a prompt taken off: %v", err)
	}
}
