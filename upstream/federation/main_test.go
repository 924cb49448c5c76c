package federation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// childEnvVar makes the test binary a stdio MCP server (TestMain) for the
// stdio tests, or a process that sleeps ("sleep"), standing for a helper
// that server forked.
const childEnvVar = "FEDERATION_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnvVar) {
	case "":
		os.Exit(m.Run())
	case "sleep":
		time.Sleep(time.Minute)
		os.Exit(0)
	default:
		runStdioChild()
		os.Exit(0)
	}
}

// runStdioChild serves tools over stdin/stdout: env (its environment),
// pid, crash (exits at once), spawn (forks a sleeping helper), subscribed
// (the resource URIs subscribed to) and touch (an update of each).
func runStdioChild() {
	var (
		mu   sync.Mutex
		subs []string
	)
	var s *mcp.Server
	s = mcp.NewServer(&mcp.Implementation{Name: "child", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			mu.Lock()
			defer mu.Unlock()
			subs = append(subs, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{Name: "kid", URI: "file:///kid"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "kid"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "subscribed", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(subs, " ")}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "touch", InputSchema: objectSchema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		touched := slices.Clone(subs)
		mu.Unlock()
		for _, uri := range touched {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{}, nil
	})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		env := os.Environ()
		slices.Sort(env)
		var c []mcp.Content
		for _, e := range env {
			c = append(c, &mcp.TextContent{Text: e})
		}
		return &mcp.CallToolResult{Content: c}, nil
	})
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "crash", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "spawn", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnvVar+"=sleep")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(cmd.Process.Pid)}}}, nil
	})
	fmt.Fprintln(os.Stderr, "child serving")
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

var objectSchema = map[string]any{"type": "object"}
