package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// noetlCall posts one tools/call to the NoETL-compatible endpoint and
// returns the raw answer.
func noetlCall(t *testing.T, base, path, tool, args string) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	_, got := post(t, base+"/api/mcp/playbook/"+path+"/jsonrpc", body, http.Header{"Authorization": {"Bearer alice"}})
	return got
}

// TestPlaybookNumericIDs: an engine whose execution ids are integers above
// 2^53 (read as float64, every one of them names another run, which this
// engine answers 404) has its runs answered, polled and cancelled under
// exactly its ids, through the NoETL endpoint and through /mcp (tasks).
func TestPlaybookNumericIDs(t *testing.T) {
	e := engine.New(&engine.Options{NumericIDs: true, Step: time.Hour})
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{Timeout: 300 * time.Millisecond, PollInterval: 100 * time.Millisecond}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()

	got := noetlCall(t, srv.URL, "demo/fast", "demo_fast", `{"name":"Ada"}`)
	for _, want := range []string{`"noetl_execution_id":"619162855312458001"`, `"execution_id":619162855312458001`, `"isError":false`, `Hello, Ada!`} {
		if !strings.Contains(got, want) {
			t.Errorf("demo/fast: %s lacks %s", got, want)
		}
	}
	got = noetlCall(t, srv.URL, "demo/slow", "demo_slow", `{}`)
	var ans struct {
		Error struct {
			Code int
			Data struct {
				ExecutionID string `json:"execution_id"`
				Cancelled   bool
			}
		}
	}
	if err := json.Unmarshal([]byte(got), &ans); err != nil || ans.Error.Code != codeCeiling ||
		ans.Error.Data.ExecutionID != "619162855312458002" || !ans.Error.Data.Cancelled {
		t.Errorf("demo/slow past its ceiling: %s", got)
	}
	if ids := e.CancelledIDs(); !slices.Equal(ids, []string{"619162855312458002"}) {
		t.Errorf("the engine cancelled %v, want [619162855312458002]", ids)
	}

	te := taskGateway(t, time.Hour, time.Minute, TasksConfig{}, nil, false, e)
	id, task := te.create(t, "Bearer bob", "demo_slow", `{"label":"task"}`)
	if task["status"] != "working" {
		t.Fatalf("created %v", task)
	}
	if task := te.must(t, "Bearer bob", "tasks/get", taskIDParams(id)); task["status"] != "working" {
		t.Errorf("tasks/get %v: the poll did not reach run 619162855312458003", task)
	}
	if task := te.must(t, "Bearer bob", "tasks/cancel", taskIDParams(id)); task["status"] != "cancelled" {
		t.Fatalf("tasks/cancel %v", task)
	}
	ids := e.CancelledIDs()
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"619162855312458002", "619162855312458003"}) {
		t.Errorf("the engine cancelled %v, want ...002 and ...003", ids)
	}
}

// TestPlaybookRunCaps: a call that would start a run over max_runs is
// refused before anything reaches the engine: isError on /mcp, a JSON-RPC
// error naming the bound on the NoETL endpoint.
func TestPlaybookRunCaps(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Step: time.Hour}, &Playbooks{MaxRuns: 1, Timeout: time.Minute})
	conn := rawPOST(t, srv.URL+"/mcp", call(1, "demo_slow", `{"label":"first"}`), http.Header{"Authorization": {"Bearer alice"}}, false)
	defer conn.Close() // the run is left, and cancelled after the linger
	waitFor(t, "the first run to start", func() bool { return e.Counts().Started == 1 })

	got := noetlCall(t, srv.URL, "demo/slow", "demo_slow", `{"label":"second"}`)
	want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"playbook demo/slow was not started: the engine is busy: the gateway already has 1 runs in flight on this engine (max_runs is 1); nothing was sent to the engine, try again when a run ends","data":{"cap":"max_runs","limit":1}}}`
	if got != want {
		t.Errorf("NoETL endpoint over the cap:\n got %s\nwant %s", got, want)
	}
	_, got = post(t, srv.URL+"/mcp", call(2, "demo_fast", `{}`), http.Header{"Authorization": {"Bearer bob"}})
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "the engine is busy") {
		t.Errorf("/mcp over the cap: %s", got)
	}
	if c := e.Counts(); c.Started != 1 {
		t.Errorf("the engine started %d runs, want 1", c.Started)
	}
}

// TestPlaybookDedupCallers: two same calls at once are one run when they
// carry the same credential, and two runs when they carry none: callers the
// gateway cannot tell apart are never merged.
func TestPlaybookDedupCallers(t *testing.T) {
	for _, tt := range []struct {
		name          string
		authorization string
		runs          int
	}{
		{"same credential: one run", "Bearer alice", 1},
		{"no credential: a run each", "", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, e, srv := playbookGateway(t, &engine.Options{Step: 50 * time.Millisecond}, &Playbooks{PollInterval: 100 * time.Millisecond})
			h := http.Header{}
			if tt.authorization != "" {
				h.Set("Authorization", tt.authorization)
			}
			first := rawPOST(t, srv.URL+"/mcp", call(1, "demo_slow", `{"label":"same"}`), h, false)
			defer first.Close()
			waitFor(t, "the first run to start", func() bool { return e.Counts().Started == 1 })
			_, got := post(t, srv.URL+"/mcp", call(2, "demo_slow", `{"label":"same"}`), h)
			if !strings.Contains(got, "same: counted 5 steps") {
				t.Errorf("second call: %s", got)
			}
			if ans := readAnswer(t, first); !strings.Contains(ans, "same: counted 5 steps") {
				t.Errorf("first call: %s", ans)
			}
			if c := e.Counts(); c.Started != tt.runs {
				t.Errorf("the engine started %d runs, want %d", c.Started, tt.runs)
			}
		})
	}
}
