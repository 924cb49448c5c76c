package federation

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func stdioConfig() Config {
	return Config{Command: []string{os.Args[0]}, Env: map[string]string{childEnvVar: "1", "EXTRA": "x"}}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestStdioEnv: the child sees PATH, HOME and Env, nothing else of the
// gateway's environment; its stderr is logged at Debug.
func TestStdioEnv(t *testing.T) {
	t.Setenv("FEDERATION_SECRET", "s3cret")
	var logs syncBuffer
	u := newUpstream(t, stdioConfig(), &Options{Name: "kid", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	res, err := u.CallTool(t.Context(), "Bearer ignored", &mcp.CallToolParams{Name: "env"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range res.Content {
		names = append(names, strings.SplitN(c.(*mcp.TextContent).Text, "=", 2)[0])
	}
	want := []string{"EXTRA", childEnvVar}
	for _, k := range []string{"HOME", "PATH"} {
		if os.Getenv(k) != "" {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("child environment: %v, want %v", names, want)
	}
	eventually(t, "the child's stderr in the log", func() bool {
		return strings.Contains(logs.String(), `msg="upstream stderr" upstream=kid line="child serving"`)
	})
}

func pidOf(t *testing.T, u *Upstream) int {
	t.Helper()
	res, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "pid"}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(text(t, res))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestStdioCrash: a child that exits is started again after the backoff;
// the call it took down says it may have run.
func TestStdioCrash(t *testing.T) {
	u := newUpstream(t, stdioConfig(), nil)
	u.backoffMin = 20 * time.Millisecond
	pid := pidOf(t, u)
	_, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "crash"}, false, nil)
	if err == nil || !strings.Contains(err.Error(), "may have run") {
		t.Fatalf("error: %v", err)
	}
	pid2 := pidOf(t, u)
	if pid2 == pid {
		t.Fatal("same child after a crash")
	}
	// The second crash in a row waits twice as long.
	_, _ = u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "crash"}, false, nil)
	if pidOf(t, u) == pid2 {
		t.Fatal("same child after a crash")
	}
	s := u.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.backoff != 40*time.Millisecond {
		t.Errorf("backoff %v", s.backoff)
	}
}

// TestStdioCloseKillsGroup: Close kills what the child forked too.
func TestStdioCloseKillsGroup(t *testing.T) {
	u := newUpstream(t, stdioConfig(), nil)
	child := pidOf(t, u)
	res, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "spawn"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	helper, _ := strconv.Atoi(text(t, res))
	if !alive(helper) {
		t.Fatal("the helper is not running")
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child and its helper gone", func() bool { return !alive(child) && !alive(helper) })
	if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "pid"}, false, nil); err == nil {
		t.Error("a call after Close succeeded")
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
