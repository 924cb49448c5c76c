package gateway

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestConfigPrompts serves the configuration's prompts to go-sdk's client,
// stateless and stateful: listed with their arguments, rendered, refused
// with -32602 naming the argument, enum arguments completed.
func TestConfigPrompts(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateless", true: "stateful"}[stateful], func(t *testing.T) {
			_, g := newFrontGateway(t, Config{Stateful: stateful, Prompts: []Prompt{{
				Name: "summarize", Description: "Summarize a text",
				Arguments: []PromptArgument{{Name: "text", Required: true}, {Name: "tone", Enum: []string{"dry", "warm"}}},
				Template:  "Summarize ({{ input.tone }}):\n{{ input.text }}",
			}}}, nil)
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			if caps := cs.InitializeResult().Capabilities; caps.Prompts == nil || caps.Completions == nil {
				t.Errorf("capabilities %+v: want prompts and completions", caps)
			}
			l, err := cs.ListPrompts(t.Context(), nil)
			if err != nil || len(l.Prompts) != 1 || l.Prompts[0].Name != "summarize" || len(l.Prompts[0].Arguments) != 2 {
				t.Fatalf("prompts/list: %v %+v", err, l)
			}
			got, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "summarize", Arguments: map[string]string{"text": "A long text.", "tone": "dry"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 1 || got.Messages[0].Role != "user" || got.Messages[0].Content.(*mcp.TextContent).Text != "Summarize (dry):\nA long text." {
				t.Errorf("prompts/get: %+v", got)
			}
			for args, want := range map[string]string{
				"":           `argument "text" is required`,
				"tone=loud":  `argument "tone" is "loud", not one of dry, warm`,
				"style=long": `takes no argument "style"`,
			} {
				a := map[string]string{"text": "x"}
				if args == "" {
					a = nil
				} else {
					k, v, _ := strings.Cut(args, "=")
					a[k] = v
				}
				_, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "summarize", Arguments: a})
				var je *jsonrpc.Error
				switch {
				case err == nil || !strings.Contains(err.Error(), want):
					t.Errorf("prompts/get %s: %v; want an error saying %q", args, err, want)
				case stateful && (!errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams):
					// (Stateless, go-sdk's 2026-07-28 handler answers a
					// -32602 with HTTP 400, which its client reports as a
					// transport error carrying the message.)
					t.Errorf("prompts/get %s: %v; want -32602", args, err)
				}
			}
			comp, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "summarize"}, Argument: mcp.CompleteParamsArgument{Name: "tone", Value: "w"}})
			if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "warm" {
				t.Errorf("completion/complete: %v %+v", err, comp)
			}
		})
	}
}

// TestConfigPromptCollision: a configured prompt and an MCP upstream's on
// one name are a start-up error naming both.
func TestConfigPromptCollision(t *testing.T) {
	up := newFedUpstream(t)
	cfg := &Config{
		Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}}},
		Prompts:   []Prompt{{Name: "fs_greet", Template: "Hello {{ input.who }}"}},
	}
	g, err := New(context.Background(), cfg, nil)
	if err == nil {
		g.Close()
		t.Fatal("a configured prompt and an upstream's of one name: no error")
	}
	if !strings.Contains(err.Error(), `prompt "fs_greet" is served by the configuration (prompts:) and by upstream fs (greet)`) {
		t.Errorf("error: %v", err)
	}
}
