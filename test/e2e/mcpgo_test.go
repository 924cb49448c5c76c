package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestMCPGoClient drives the gateway with a second client implementation,
// mark3labs/mcp-go with its default options, over Streamable HTTP: a
// federated MCP server (the official server-everything, a stdio child)
// beside the demo's REST API, both in one catalog. mcp-go speaks 2026-07-28
// when server/discover offers it, which the gateway does in both modes: a
// --stateful gateway answers a 2026-07-28 request as the stateless one does
// (it carries no session).
func TestMCPGoClient(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"stateless", nil},
		{"stateful", []string{"--stateful"}},
	} {
		t.Run(mode.name, func(t *testing.T) { testMCPGoClient(t, mode.flags) })
	}
}

func testMCPGoClient(t *testing.T, flags []string) {
	b := setup(t)
	everything, err := filepath.Abs("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(everything); err != nil {
		t.Fatalf("%v: run npm ci in test/e2e", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "mcpgate.yaml")
	if err := os.WriteFile(cfg, []byte(`upstreams:
  - name: ev
    mcp: {command: [`+node+`, `+everything+`, stdio]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startGateway(t, b.mcpgate, append([]string{"serve", "--addr", "127.0.0.1:0", "--config", cfg}, flags...))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "ev_echo") {
		t.Fatalf("tools %v: no ev_echo", names)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "ev_echo"
	req.Params.Arguments = map[string]any{"message": "from mcp-go"}
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("ev_echo: %v %+v", err, res)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "from mcp-go") {
		t.Errorf("ev_echo answered %q", text)
	}
	req.Params.Arguments = map[string]any{"message": 42}
	res, err = c.CallTool(ctx, req)
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(mcp.TextContent).Text, "invalid arguments") {
		t.Errorf("bad arguments: %v %+v", err, res)
	}
}
