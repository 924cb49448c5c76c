package federation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
// pid, crash (exits at once) and spawn (forks a sleeping helper).
func runStdioChild() {
	s := mcp.NewServer(&mcp.Implementation{Name: "child", Version: "1"}, nil)
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
