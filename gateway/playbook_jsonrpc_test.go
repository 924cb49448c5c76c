package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPlaybookJSONRPC sends raw JSON-RPC to the NoETL-compatible endpoint
// and checks the HTTP status and the fields of the answer that matter,
// including DESIGN.md's NoETL behaviours: dispatch and poll, the ceiling
// (−32011 with data.execution_id, cancelled upstream), a failed run
// (isError), access denied (−32020 with data.http_status), a hidden
// playbook, and the workload's input schema.
func TestPlaybookJSONRPC(t *testing.T) {
	// demo/slow's steps take an hour: its run is the ceiling's (250 ms),
	// and the engine counts a cancel only of a run still going (with
	// 100 ms steps it ended on its own 500 ms after it started, and a
	// loaded machine could be slower than that to cancel it).
	_, e, srv := playbookGateway(t, &engine.Options{Token: "tok", Step: time.Hour},
		// The engine wants a token for its catalog too, which the gateway
		// reads without one at start-up: the items are listed here.
		&Playbooks{PollInterval: 100 * time.Millisecond, Timeout: 250 * time.Millisecond, Items: []PlaybookItem{
			{Path: "demo/fast", Workload: map[string]any{"name": "world"}},
			{Path: "demo/slow", Workload: map[string]any{"label": "demo", "note": nil}},
			{Path: "demo/fail", Workload: map[string]any{}},
			{Path: "internal/tool", ExposesAsMCP: new(false)},
		}})
	tests := []struct {
		name   string
		path   string
		token  string // default "tok"
		body   string
		status int
		want   map[string]any // JSON pointer → value; "*" means present
		empty  bool
	}{
		{name: "initialize echoes the client's version", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			status: 200, want: map[string]any{"/id": 1.0, "/result/protocolVersion": "2025-06-18", "/result/capabilities/tools": "*", "/result/serverInfo/name": "mcpgate"}},
		{name: "initialize without a version answers 2024-11-05", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":"a","method":"initialize"}`,
			status: 200, want: map[string]any{"/id": "a", "/result/protocolVersion": "2024-11-05"}},
		{name: "ping", path: "demo/fast", body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
			status: 200, want: map[string]any{"/result": map[string]any{}}},
		{name: "a notification gets 202 and no body", path: "demo/fast", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			status: 202, empty: true},
		{name: "malformed body", path: "demo/fast", body: `{"jsonrpc":"2.0",`,
			status: 200, want: map[string]any{"/id": nil, "/error/code": -32700.0}},
		{name: "batch refused", path: "demo/fast", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
			status: 200, want: map[string]any{"/error/code": -32600.0}},
		{name: "unknown method", path: "demo/fast", body: `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`,
			status: 200, want: map[string]any{"/id": 3.0, "/error/code": -32601.0}},
		{name: "tools/list: one playbook, one tool, schema from the workload", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
			status: 200, want: map[string]any{"/result/tools/0/name": "demo_fast", "/result/tools/1": nil,
				"/result/tools/0/inputSchema/type": "object", "/result/tools/0/inputSchema/properties/name/default": "world",
				"/result/tools/0/annotations/readOnlyHint": false, "/result/tools/0/annotations/openWorldHint": false,
				"/result/tools/0/annotations/destructiveHint": false, "/result/tools/0/annotations/idempotentHint": false}},
		{name: "tools/list: a null default is unconstrained", path: "demo/slow",
			body:   `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
			status: 200, want: map[string]any{"/result/tools/0/inputSchema/properties/note": map[string]any{}}},
		{name: "tools/call with another tool's name", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo_slow","arguments":{}}}`,
			status: 200, want: map[string]any{"/error/code": -32602.0}},
		{name: "tools/call: dispatch, poll, result with _meta", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":"Ada"}}}`,
			status: 200, want: map[string]any{"/result/content/0/text": "Hello, Ada!", "/result/isError": false,
				"/result/_meta/noetl_execution_id": "*", "/result/_meta/noetl_path": "demo/fast",
				"/result/structuredContent/result/greeting": "Hello, Ada!"}},
		{name: "tools/call: a failed run is isError", path: "demo/fail",
			body:   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo_fail","arguments":{}}}`,
			status: 200, want: map[string]any{"/result/isError": true, "/result/_meta/noetl_execution_id": "*", "/result/_meta/noetl_path": "demo/fail"}},
		{name: "tools/call: invalid arguments are isError naming the field", path: "demo/fast",
			body:   `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":7}}}`,
			status: 200, want: map[string]any{"/result/isError": true}},
		{name: "tools/call: the ceiling is -32011 with the execution and last status", path: "demo/slow",
			body:   `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo_slow","arguments":{}}}`,
			status: 200, want: map[string]any{"/error/code": -32011.0, "/error/data/execution_id": "*",
				"/error/data/status/completed": false, "/error/data/cancelled": true}},
		{name: "tools/call: access denied is -32020 with the http status", path: "demo/fast", token: "wrong",
			body:   `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"demo_fast","arguments":{}}}`,
			status: 200, want: map[string]any{"/error/code": -32020.0, "/error/data/http_status": 401.0}},
		{name: "a hidden playbook is answered as an unknown one", path: "internal/tool",
			body:   `{"jsonrpc":"2.0","id":11,"method":"tools/list"}`,
			status: 200, want: map[string]any{"/error/code": -32020.0, "/error/data/http_status": 404.0, "/error/message": `no playbook "internal/tool" is exposed over MCP`}},
		{name: "an unknown playbook", path: "no/such/book",
			body:   `{"jsonrpc":"2.0","id":12,"method":"initialize"}`,
			status: 200, want: map[string]any{"/error/code": -32020.0, "/error/data/http_status": 404.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/api/mcp/playbook/"+tt.path+"/jsonrpc", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			tok := "tok"
			if tt.token != "" {
				tok = tt.token
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set(requestIDHeader, "forged-id") // never the id of the call's log line
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if id := resp.Header.Get(requestIDHeader); id == "" || id == "forged-id" {
				t.Errorf("answer's %s = %q, want the gateway's own id", requestIDHeader, id)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if tt.empty {
				if len(raw) != 0 {
					t.Errorf("body %q, want none", raw)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("not JSON: %s", raw)
			}
			for ptr, want := range tt.want {
				v, ok := jsonPointer(got, ptr)
				switch {
				case want == "*" && !ok:
					t.Errorf("%s missing in %s", ptr, raw)
				case want == nil && ok && v != nil:
					t.Errorf("%s = %v, want absent, in %s", ptr, v, raw)
				case want != "*" && want != nil:
					g, _ := json.Marshal(v)
					w, _ := json.Marshal(want)
					if string(g) != string(w) {
						t.Errorf("%s = %s, want %s, in %s", ptr, g, w, raw)
					}
				}
			}
		})
	}
	// Only the ceiling's run was cancelled, and the endpoint started no run
	// for the refused, invalid or misnamed calls.
	if c := e.Counts(); c.Cancelled != 1 || c.Started != 3 {
		t.Errorf("engine %+v, want 3 started, 1 cancelled", c)
	}
	// The call refused for its arguments is counted, as on /mcp.
	mfs, _ := scrape(t, srv.URL+"/metrics")
	if got := value(mfs, "mcpgate_tool_calls_total", map[string]string{"tool": "demo_fast", "upstream": "noetl", "outcome": "invalid_arguments"}); got != 1 {
		t.Errorf("invalid_arguments calls of demo_fast counted: %v, want 1", got)
	}
}

func jsonPointer(v any, p string) (any, bool) {
	for _, tok := range strings.Split(p[1:], "/") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i := 0
			for _, c := range tok {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestNoETLResultIsError: a result always spells isError, false included,
// and stays valid JSON, empty or not.
func TestNoETLResultIsError(t *testing.T) {
	for _, res := range []*mcp.CallToolResult{
		{},
		{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}, StructuredContent: json.RawMessage(`{"a":1}`)},
		{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed"}}},
	} {
		raw, err := json.Marshal(noetlResult{res})
		var m map[string]any
		if err != nil || json.Unmarshal(raw, &m) != nil || m["isError"] != res.IsError {
			t.Errorf("%s (%v): isError %v, want %v", raw, err, m["isError"], res.IsError)
		}
	}
}
