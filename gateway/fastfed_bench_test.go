package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// BenchmarkFederatedToolsCall measures one stateless federated tools/call
// on the fast path (fastPath.serveFederated, Upstream.Forward), from the
// POST's body to the answer, to a stateless JSON go-sdk server over
// loopback: the gateway's share of a forwarded call, for a CPU profile
// (-cpuprofile) of what the mcpgate-bench federated rows spend.
//
//	go test ./gateway -run '^$' -bench FederatedToolsCall -benchmem
func BenchmarkFederatedToolsCall(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	b.Cleanup(up.Close)
	g, err := New(context.Background(), &Config{Upstreams: []Upstream{{Name: "up", MCP: &federation.Config{URL: up.URL}}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	h := g.Handler()
	body := rpc("7", "tools/call", `{"name":"up_echo","arguments":{"q":"hello"}}`)
	once := func() {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		w := &benchWriter{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || !strings.HasPrefix(string(w.head), `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"{\"q\":\"hello\"}"}]`) {
			b.Fatalf("answer %d: %.300s", w.code, w.head)
		}
	}
	once() // the upstream session, outside the timing
	b.ReportAllocs()
	for b.Loop() {
		once()
	}
}
