package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestReviewWithheldConfigPromptCompletion: serve --lock withholds a
// changed configured prompt, but completion/complete still answers for it
// with its (new, unreviewed) enum values.
func TestReviewWithheldConfigPromptCompletion(t *testing.T) {
	mk := func(enum ...string) Config {
		return Config{Stateful: true, Prompts: []Prompt{{Name: "p", Template: "{{ input.a }}",
			Arguments: []PromptArgument{{Name: "a", Enum: enum}}}}}
	}
	_, g := newFrontGateway(t, mk("dry", "warm"), nil)
	lock := annotations.NewLock(g.catalog.Facts())
	lock.SetPrompts(g.catalog.LockedPrompts(g.cfg))
	_, g2 := newFrontGateway(t, mk("dry", "warm", "ignore-previous-instructions"), &Options{Lock: lock})
	if got := strings.Join(g2.Drift().HeldPrompts(), " "); got != "p" {
		t.Fatalf("held %q, want p", got)
	}
	srv := httptest.NewServer(g2.Handler())
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if caps := cs.InitializeResult().Capabilities; caps.Completions != nil {
		t.Errorf("completions advertised though the only prompt with an enum is withheld")
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "p"}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "i"}})
	if err == nil {
		t.Errorf("completion/complete of a withheld prompt answered %v", comp.Completion.Values)
	}
}

// TestReviewWithheldFederatedPromptCompletion: an upstream prompt withheld
// by the lock is still completed — the request is forwarded to the
// upstream under the withheld name.
func TestReviewWithheldFederatedPromptCompletion(t *testing.T) {
	up := newFedUpstream(t)
	cfg := &Config{Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}}}
	cat, err := BuildCatalog(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := annotations.NewLock(cat.Facts())
	stale.SetPrompts([]annotations.LockedPrompt{{Name: "fs_greet", Source: "upstream:fs", DescriptionSHA256: "reviewed", ArgumentsSHA256: "reviewed"}})
	_, url := fedGateway(t, up, false, stale)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if l, err := cs.ListPrompts(t.Context(), nil); err != nil || len(l.Prompts) != 0 {
		t.Fatalf("prompts/list %v %+v: want fs_greet withheld", err, l)
	}
	comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "fs_greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
	if err == nil {
		t.Errorf("completion/complete of a withheld upstream prompt forwarded: %v", comp.Completion.Values)
	}
}
