package federation

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBareSessions: an upstream offered sampling, elicitation and roots
// (a stateful gateway's) sees them declared only on the calls whose relay
// can answer all three; a call that can be asked nothing (no relay, a
// relay without them, Forward's) goes on a session that declares none —
// at initialize for a stateful upstream, in each request's _meta for a
// stateless one (2026-07-28) — and the two kinds of session are kept
// apart in the pool, each made once.
func TestBareSessions(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "caps", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := req.ClientCapabilities()
		if c == nil { // a stateless server's old-protocol request: none declared
			c = &mcp.ClientCapabilities{}
		}
		got := map[string]bool{"sampling": c.Sampling != nil, "elicitation": c.Elicitation != nil, "roots": c.RootsV2 != nil || c.Roots.ListChanged}
		b, _ := json.Marshal(got)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	full := &Relay{
		CreateMessage: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) { return nil, nil },
		Elicit:        func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error) { return nil, nil },
		ListRoots:     func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) { return nil, nil },
	}
	const all, none = `{"elicitation":true,"roots":true,"sampling":true}`, `{"elicitation":false,"roots":false,"sampling":false}`
	for _, mode := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{{"stateful upstream", nil}, {"stateless upstream", &mcp.StreamableHTTPOptions{Stateless: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, mode.opts))
			t.Cleanup(srv.Close)
			u, err := New(Config{URL: srv.URL}, &Options{Name: "up", Capabilities: &mcp.ClientCapabilities{
				Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}, RootsV2: &mcp.RootCapabilities{}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { u.Close() })
			text := func(res *mcp.CallToolResult, err error) string {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return res.Content[0].(*mcp.TextContent).Text
			}
			call := func(r *Relay) string {
				return text(u.CallTool(t.Context(), "Bearer a", &mcp.CallToolParams{Name: "caps", Arguments: map[string]any{}}, false, r))
			}
			for _, tc := range []struct {
				name  string
				relay *Relay
				want  string
			}{
				{"a relay that answers all three", full, all},
				{"no relay", nil, none},
				{"an empty relay", &Relay{}, none},
				{"a relay of sampling alone", &Relay{CreateMessage: full.CreateMessage}, none},
				{"all three again", full, all},
			} {
				if got := call(tc.relay); got != tc.want {
					t.Errorf("%s: the upstream read %s, want %s", tc.name, got, tc.want)
				}
			}
			if got := text(u.Forward(t.Context(), "Bearer a", "2025-06-18", &ForwardParams{Name: "caps", Arguments: json.RawMessage(`{}`)}, nil)); got != none {
				t.Errorf("Forward: the upstream read %s, want %s", got, none)
			}
			u.mu.Lock()
			n := u.pool.Len()
			u.mu.Unlock()
			if n != 3 { // the full session, the bare one, Forward's bare one of 2025-06-18
				t.Errorf("%d sessions in the pool, want 3: %v", n, u.pool.Keys())
			}
		})
	}
}
