package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestFederationMissingCapability: an upstream that refuses a call with
// -32021 (MissingRequiredClientCapabilities: the tool needs sampling, the
// caller declared none) is answered to a 2026-07-28 caller with that
// error, its data and HTTP 400, as 2026-07-28 asks of a server (the alpha
// conformance suite's server-stateless checks it); an older caller, whose
// version has no such code, still gets the error's text as a tool error.
// Before, both got the tool error.
func TestFederationMissingCapability(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "needs_sampling"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "sampling capability required",
			Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)) // stateful: 2025-11-25
	t.Cleanup(up.Close)
	_, url := serveGateway(t, &Config{Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: up.URL}}}}, nil)

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct {
		version, params string
		status          int
		want            string
	}{
		{"2026-07-28", `{"name":"fs_needs_sampling","arguments":{},` + meta + `}`, http.StatusBadRequest,
			`{"error":{"code":-32021,"data":{"requiredCapabilities":{"sampling":{}}},"message":"sampling capability required"},"id":1,"jsonrpc":"2.0"}`},
		{"2025-11-25", `{"name":"fs_needs_sampling","arguments":{}}`, http.StatusOK, `"isError":true`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			h := http.Header{"Mcp-Protocol-Version": {tc.version}}
			if tc.version >= "2026-07-28" {
				h["Mcp-Method"], h["Mcp-Name"] = []string{"tools/call"}, []string{"fs_needs_sampling"}
			}
			a := sendRaw(t, url, rpc("1", "tools/call", tc.params), h)
			if len(a.Messages) != 1 {
				t.Fatalf("%d %s: %+v", a.Status, a.Type, a)
			}
			msg, _ := json.Marshal(a.Messages[0])
			if a.Status != tc.status || !strings.Contains(string(msg), tc.want) {
				t.Errorf("HTTP %d %s, want HTTP %d and %s", a.Status, msg, tc.status, tc.want)
			}
		})
	}
}
