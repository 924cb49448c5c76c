package federation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRestart: an upstream that forgot its sessions (a restart) costs one
// new handshake; the call that hit it is sent again, having never run.
func TestRestart(t *testing.T) {
	for _, how := range []string{"swap", "same address"} {
		t.Run(how, func(t *testing.T) {
			ts := newTestServer(t, serverOpts{})
			u := newUpstream(t, Config{URL: ts.URL}, nil)
			ctx := t.Context()
			call := func() {
				t.Helper()
				res, err := u.CallTool(ctx, "Bearer x", &mcp.CallToolParams{Name: "echo"}, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError {
					t.Fatal(text(t, res))
				}
			}
			call()
			call()
			if got := ts.inits.Load(); got != 2 { // discover, then initialize
				t.Fatalf("handshakes before the restart: %d", got)
			}
			if how == "swap" {
				ts.swap(serverOpts{})
			} else { // a new process: new address binding, no sessions
				ts.stop()
				ts.swap(serverOpts{})
				ts.restart()
			}
			calls := ts.calls.Load()
			call()
			call()
			if got := ts.inits.Load(); got != 4 {
				t.Errorf("handshakes after the restart: %d, want 4 (one new session)", got)
			}
			if got := ts.calls.Load() - calls; got > 3 {
				t.Errorf("%d tools/call requests for 2 calls", got)
			}
		})
	}
}

// downText is a down upstream's error, up to its date.
var downText = regexp.MustCompile(`upstream "fs" is down \((\d+) pings failed; last answered 20`)

// TestDown: three failed pings make calls fail at once, with nothing
// sent; a ping that succeeds again ends that.
func TestDown(t *testing.T) {
	ts := newTestServer(t, serverOpts{stateless: true})
	u := newUpstream(t, Config{URL: ts.URL, Refresh: -1}, &Options{Name: "fs"})
	u.pingEvery = 20 * time.Millisecond
	u.Start(t.Context())
	eventually(t, "up", func() bool { return u.Status().Up })
	ts.stop()
	eventually(t, "down", func() bool { return !u.Status().Up })
	calls := ts.calls.Load()
	start := time.Now()
	_, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "echo"}, false, nil)
	if !errors.Is(err, ErrDown) {
		t.Fatalf("error: %v", err)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("failing took %v", took)
	}
	// The pings go on while the upstream is down (every 20 ms here), so
	// the count the error names is the failures so far: downAfter (3) or
	// more, by the time the call is made.
	if m := downText.FindStringSubmatch(err.Error()); m == nil {
		t.Errorf("error text: %v", err)
	} else if n, _ := strconv.Atoi(m[1]); n < u.downAfter {
		t.Errorf("error text: %v; want at least %d pings failed", err, u.downAfter)
	}
	if st := u.Status(); st.LastError == "" || st.LastAnswered.IsZero() {
		t.Errorf("status: %+v", st)
	}
	if ts.calls.Load() != calls {
		t.Error("a call reached the upstream while it was down")
	}
	ts.restart()
	eventually(t, "up again", func() bool { return u.Status().Up })
	if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "echo"}, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestStartUnreachable: an upstream down at start is tried again, not
// fatal.
func TestStartUnreachable(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	ts.stop()
	u := newUpstream(t, Config{URL: ts.URL, Refresh: -1}, nil)
	u.pingEvery = 20 * time.Millisecond
	u.Start(t.Context())
	eventually(t, "down", func() bool { return u.downErr() != nil })
	ts.restart()
	eventually(t, "up", func() bool { return u.Status().Up })
}

// hostileServer answers initialize properly and tools/list with page(n),
// for the n-th tools/list request.
func hostileServer(t *testing.T, page func(n int, cursor string) string) string {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"0"}}`
		case "tools/list":
			n++
			result = page(n, req.Params.Cursor)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, req.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHostileLists: every answer is hostile until shown otherwise.
func TestHostileLists(t *testing.T) {
	tool := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, name)
	}
	for _, tc := range []struct {
		name string
		page func(n int, cursor string) string
		want string
	}{
		{"endless pages", func(n int, _ string) string {
			return fmt.Sprintf(`{"tools":[%s],"nextCursor":"c%d"}`, tool(fmt.Sprint("t", n)), n)
		}, "tools/list: more than 100 pages"},
		{"looping cursor", func(int, string) string { return `{"tools":[],"nextCursor":"same"}` }, "tools/list: the cursor of page 2 was seen before"},
		{"too many items", func(n int, _ string) string {
			items := make([]string, 600)
			for i := range items {
				items[i] = tool(fmt.Sprintf("t%d_%d", n, i))
			}
			return fmt.Sprintf(`{"tools":[%s],"nextCursor":"c%d"}`, strings.Join(items, ","), n)
		}, "tools/list: more than 10000 items"},
		{"null item", func(int, string) string { return `{"tools":[null]}` }, ""}, // go-sdk drops it
		{"not an object", func(int, string) string { return `[1,2]` }, "tools/list"},
		{"tools not a list", func(int, string) string { return `{"tools":"x"}` }, "tools/list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := hostileServer(t, tc.page)
			u := newUpstream(t, Config{URL: url}, nil)
			l, err := u.List(t.Context())
			if tc.want == "" {
				if err != nil || len(l.Tools) != 0 {
					t.Errorf("listing: %v, %+v", err, l)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error: %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestSessionPool: sessions beyond MaxSessions, or idle past IdleTimeout,
// are closed; the next call with that credential starts another.
func TestSessionPool(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, &Options{MaxSessions: 2, IdleTimeout: time.Hour})
	ctx := t.Context()
	call := func(cred Credential) {
		t.Helper()
		if _, err := u.CallTool(ctx, cred, &mcp.CallToolParams{Name: "echo"}, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	call("Bearer a")
	call("Bearer b")
	call("Bearer a")
	call("Bearer c") // evicts b, the least recently used
	if got := ts.inits.Load(); got != 6 {
		t.Fatalf("handshakes: %d, want 6", got)
	}
	call("Bearer a")
	if got := ts.inits.Load(); got != 6 {
		t.Fatalf("a was evicted: %d handshakes", got)
	}
	call("Bearer b")
	if got := ts.inits.Load(); got != 8 {
		t.Fatalf("b was kept: %d handshakes", got)
	}
	u.sweep(time.Now().Add(2 * time.Hour))
	u.mu.Lock()
	n := u.pool.Len()
	u.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sessions left after an idle sweep", n)
	}
	eventually(t, "sessions closed", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return len(u.bySession) == 0
	})
}
