package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// playbookGateway serves the example engine in-process (its document's
// x-mcp-playbook routes and catalog) behind a gateway, over HTTP.
func playbookGateway(t *testing.T, eopts *engine.Options, pb *Playbooks) (*Gateway, *engine.Engine, *httptest.Server) {
	t.Helper()
	e := engine.New(eopts)
	if pb == nil {
		pb = &Playbooks{}
	}
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: pb}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return g, e, srv
}

// TestPlaybookRunCapDefaults: max_runs is the runner's 256 (the
// max_runs_per_caller defaults are gateway/config's TestPlaybookRunCapDefaults).
func TestPlaybookRunCapDefaults(t *testing.T) {
	g, _, _ := playbookGateway(t, nil, nil)
	if got := g.runners["noetl"].Options().MaxRuns; got != playbook.DefaultMaxRuns {
		t.Errorf("max_runs %d, want %d", got, playbook.DefaultMaxRuns)
	}
}

func TestPlaybookTools(t *testing.T) {
	g, _, _ := playbookGateway(t, nil, &Playbooks{Items: []PlaybookItem{
		{Path: "demo/fail", Destructive: true},
		{Path: "demo/fast", Inputs: map[string]PlaybookInput{"name": {Description: "Whom to greet.", Enum: []any{"world", "Ada"}}}},
	}})
	byName := map[string]*Tool{}
	for _, tl := range g.Catalog().Tools {
		byName[tl.Tool.Name] = tl
	}
	for _, hidden := range []string{"internal_tool", "execute_playbook", "get_execution_status"} {
		if byName[hidden] != nil {
			t.Errorf("%s is a tool", hidden)
		}
	}
	for _, f := range g.Catalog().Facts() {
		if strings.Contains(f.OperationID, "internal/tool") {
			t.Errorf("the hidden playbook is in the audit: %+v", f)
		}
	}
	tests := []struct {
		name        string
		destructive bool
		provDestr   string
		schema      string
	}{
		{"demo_fast", false, "playbook", `{"type":"object","properties":{"name":{"type":"string","default":"world","description":"Whom to greet.","enum":["world","Ada"]}}}`},
		{"demo_slow", false, "playbook", `{"type":"object","properties":{"label":{"type":"string","default":"demo"},"note":{}}}`},
		{"demo_fail", true, "config", `{"type":"object","properties":{"reason":{"type":"string","default":"the demo fails on purpose"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := byName[tt.name]
			if tl == nil {
				t.Fatalf("no tool %s among %v", tt.name, keys(byName))
			}
			a := tl.Tool.Annotations
			if a.ReadOnlyHint || a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint == nil || *a.DestructiveHint != tt.destructive {
				t.Errorf("hints %+v", a)
			}
			if p := tl.Derived.Provenance; p.ReadOnly != "playbook" || p.Destructive != tt.provDestr || p.OpenWorld != "playbook" || p.Idempotent != "playbook" {
				t.Errorf("provenance %+v", p)
			}
			got, _ := json.Marshal(tl.Tool.InputSchema)
			var a1, a2 any
			json.Unmarshal(got, &a1)
			json.Unmarshal([]byte(tt.schema), &a2)
			g1, _ := json.Marshal(a1)
			g2, _ := json.Marshal(a2)
			if string(g1) != string(g2) {
				t.Errorf("input schema\n got %s\nwant %s", g1, g2)
			}
		})
	}
}

func keys(m map[string]*Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPlaybookCallOverMCP calls a slow playbook with a progressToken through
// the go-sdk client over Streamable HTTP (stateless, SSE answers).
func TestPlaybookCallOverMCP(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Step: 100 * time.Millisecond}, &Playbooks{PollInterval: 100 * time.Millisecond})
	// go-sdk's client handles notifications on their own goroutines, so
	// the last progress message may be handled after CallTool returns.
	var (
		mu       sync.Mutex
		progress []string
	)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "demo_slow", Arguments: map[string]any{"label": "x"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*mcp.TextContent).Text != "x: counted 5 steps" || res.Meta["noetl_execution_id"] == nil {
		t.Fatalf("result %+v", res)
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(progress)
	}
	for deadline := time.Now().Add(5 * time.Second); len(seen()) < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := seen(); len(got) < 3 || !strings.Contains(got[1], "step") {
		t.Errorf("progress %q", got)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo_fail", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "fails on purpose") {
		t.Errorf("fail: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo_fast", Arguments: map[string]any{"name": 3}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "name") {
		t.Errorf("invalid arguments: %v %+v", err, res)
	}
	if c := e.Counts(); c.Started != 2 {
		t.Errorf("engine started %d runs, want 2 (invalid arguments start none)", c.Started)
	}
}
