package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestFederationSessionlessCallerCapabilities: on a stateful gateway, a
// 2026-07-28 caller (no session, so nothing can be asked of it) calls an
// upstream tool that needs sampling, as the alpha conformance suite's
// test_missing_capability does. The upstream must be told that this
// caller cannot sample, and so refuse with -32021, which the caller gets
// with HTTP 400 — before, the gateway's client declared sampling for
// every caller and the tool ran. A caller with a session, which declared
// sampling, still has the tool run and its sampling request relayed.
// Both kinds of upstream: a stateful go-sdk server (capabilities declared
// once per session, at initialize: 2025-11-25) and a stateless one
// (capabilities in each request's _meta: 2026-07-28).
func TestFederationSessionlessCallerCapabilities(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "needs_sampling"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		caps := req.ClientCapabilities()
		if caps == nil || caps.Sampling == nil {
			return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling capability required but not declared by client",
				Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		}
		if req.Session.ID() == "" { // stateless: declared, but nothing can be sent back
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "declared"}}}, nil, nil
		}
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 8,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "q"}}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled: " + res.Content.(*mcp.TextContent).Text}}}, nil, nil
	})
	for _, up := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{{"stateful upstream", nil}, {"stateless upstream", &mcp.StreamableHTTPOptions{Stateless: true}}} {
		t.Run(up.name, func(t *testing.T) {
			upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, up.opts))
			t.Cleanup(upSrv.Close)
			_, url := serveGateway(t, &Config{Stateful: true, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: upSrv.URL}}}}, nil)

			// A 2026-07-28 caller that declared nothing: -32021, HTTP 400.
			for _, declared := range []string{`{}`, `{"sampling":{}}`} {
				meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
					`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + declared + `}`
				h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"fs_needs_sampling"}}
				a := sendRaw(t, url, rpc("1", "tools/call", `{"name":"fs_needs_sampling","arguments":{},`+meta+`}`), h)
				if len(a.Messages) != 1 {
					t.Fatalf("declared %s: %d %s: %+v", declared, a.Status, a.Type, a)
				}
				msg, _ := json.Marshal(a.Messages[0])
				// A caller that declared sampling cannot be asked either: the
				// gateway has no session to ask it on, so the upstream is not
				// told it can (docs/federation.md, "Capabilities").
				want := `{"error":{"code":-32021,"data":{"requiredCapabilities":{"sampling":{}}},"message":"sampling capability required but not declared by client"},"id":1,"jsonrpc":"2.0"}`
				if a.Status != http.StatusBadRequest || string(msg) != want {
					t.Errorf("declared %s: HTTP %d %s, want HTTP 400 and %s", declared, a.Status, msg, want)
				}
			}

			// A caller with a session that declared sampling: the tool runs,
			// its sampling request relayed to the caller.
			c := mcp.NewClient(&mcp.Implementation{Name: "sampler", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "a"}}, nil
				},
			})
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fs_needs_sampling", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			want := "sampled: a"
			if up.opts != nil {
				want = "declared" // a stateless upstream cannot ask back
			}
			if got := capsResultText(res); res.IsError || got != want {
				t.Errorf("a session caller that declared sampling got %q (isError %v), want %q", got, res.IsError, want)
			}
		})
	}
}

func capsResultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		} else {
			fmt.Fprintf(&b, "%T", c)
		}
	}
	return b.String()
}
