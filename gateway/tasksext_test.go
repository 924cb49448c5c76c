package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// extReq is one 2026-07-28 request as a client of the tasks extension sends
// it: the _meta fields, the headers that repeat the body.
type extReq struct {
	auth, method, params string      // params without _meta: its fields, e.g. `"taskId":"x"`
	undeclared           bool        // the client capabilities do not name the extension
	header               http.Header // overrides (a nil value deletes)
}

// ext sends r and returns its HTTP status and its one JSON-RPC message.
func (te *taskEnv) ext(t *testing.T, r extReq) (int, map[string]any) {
	t.Helper()
	caps := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	if r.undeclared {
		caps = `{}`
	}
	meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}`, caps)
	params := "{" + meta + "}"
	if r.params != "" {
		params = "{" + r.params + "," + meta + "}"
	}
	var head struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
	}
	json.Unmarshal([]byte(params), &head)
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {r.method}}
	if n := head.Name + head.TaskID; n != "" {
		h.Set("Mcp-Name", n)
	}
	if r.auth != "" {
		h.Set("Authorization", r.auth)
	}
	for k, v := range r.header {
		h[k] = v
	}
	a := sendRaw(t, te.url, rpc("9", r.method, params), h)
	if len(a.Messages) != 1 {
		t.Fatalf("%s: HTTP %d %s %q", r.method, a.Status, a.Type, a.Text)
	}
	return a.Status, a.Messages[0].(map[string]any)
}

// extOK sends r and returns its result.
func (te *taskEnv) extOK(t *testing.T, r extReq) map[string]any {
	t.Helper()
	status, m := te.ext(t, r)
	res, ok := m["result"].(map[string]any)
	if status != http.StatusOK || !ok {
		t.Fatalf("%s %s: HTTP %d %v", r.method, r.params, status, m)
	}
	return res
}

func taskIDField(id string) string { return fmt.Sprintf(`"taskId":%q`, id) }

// extPoll polls tasks/get until the task is no longer working.
func (te *taskEnv) extPoll(t *testing.T, auth, id string) (map[string]any, int) {
	t.Helper()
	for i := 1; i <= 500; i++ {
		task := te.extOK(t, extReq{auth: auth, method: "tasks/get", params: taskIDField(id)})
		if task["resultType"] != "complete" {
			t.Fatalf("tasks/get resultType %v, want complete", task["resultType"])
		}
		if task["status"] != "working" {
			return task, i
		}
		time.Sleep(10 * time.Millisecond) // the poll's interval, not a wait for a condition
	}
	t.Fatal("the task is still working after 500 polls")
	return nil, 0
}

func TestTaskExtDiscover(t *testing.T) {
	te := taskGateway(t, 10*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	res := te.extOK(t, extReq{method: "server/discover"})
	caps, _ := res["capabilities"].(map[string]any)
	if got := caps["extensions"]; !reflect.DeepEqual(got, map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}) {
		t.Errorf("server/discover capabilities.extensions = %v", got)
	}
	if caps["tools"] == nil {
		t.Errorf("the other capabilities are gone: %v", caps)
	}
	// The draft removed execution.taskSupport: no tool is marked.
	list := te.extOK(t, extReq{method: "tools/list"})
	for _, raw := range list["tools"].([]any) {
		if tool := raw.(map[string]any); tool["execution"] != nil {
			t.Errorf("2026-07-28 tools/list: tool %s declares execution %v", tool["name"], tool["execution"])
		}
	}
	// The extension is not advertised at 2025-11-25, which has tasks of its own.
	init := te.must(t, "", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if ext := init["capabilities"].(map[string]any)["extensions"]; ext != nil {
		t.Errorf("2025-11-25 initialize advertises extensions %v", ext)
	}
}

func TestTaskExtLifecycle(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		te := taskGateway(t, 40*time.Millisecond, time.Minute, TasksConfig{}, nil, stateful)
		const alice = "Bearer alice"
		for _, tt := range []struct {
			name, tool, args string
			created          string // the CreateTaskResult's status
			isError          bool
			text             string
		}{
			{"slow run completes", "demo_slow", `{"label":"t1"}`, "working", false, "t1: counted 5 steps"},
			{"fast run completes", "demo_fast", `{"name":"Ada"}`, "working", false, "Hello, Ada!"},
			{"failed run: completed with isError", "demo_fail", `{}`, "working", true, "fails on purpose"},
			{"invalid arguments: completed at once", "demo_fast", `{"name":5}`, "completed", true, "name"},
		} {
			t.Run(fmt.Sprintf("stateful=%v/%s", stateful, tt.name), func(t *testing.T) {
				created := te.extOK(t, extReq{auth: alice, method: "tools/call", params: fmt.Sprintf(`"name":%q,"arguments":%s`, tt.tool, tt.args)})
				if created["resultType"] != "task" || created["status"] != tt.created || created["ttlMs"] != 3600000.0 ||
					created["pollIntervalMs"] != 100.0 || created["createdAt"] == "" || created["lastUpdatedAt"] == "" {
					t.Fatalf("created %v, want a task %s with ttlMs 3600000 and pollIntervalMs 100", created, tt.created)
				}
				id := created["taskId"].(string)
				final, polls := te.extPoll(t, alice, id)
				if tt.tool == "demo_slow" && polls < 3 {
					t.Errorf("the slow run completed after %d polls: it was not polled", polls)
				}
				res, _ := final["result"].(map[string]any)
				if final["status"] != "completed" || final["taskId"] != id || res == nil {
					t.Fatalf("final task %v, want completed with a result", final)
				}
				if got := res["isError"] == true; got != tt.isError || !strings.Contains(text0(res), tt.text) || res["resultType"] != "complete" {
					t.Errorf("result %v, want resultType complete, isError %v and text %q", res, tt.isError, tt.text)
				}
			})
		}
	}
}

func TestTaskExtPlainCalls(t *testing.T) {
	te := taskGateway(t, 10*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	for _, tt := range []struct {
		name string
		r    extReq
		text string
	}{
		{"a playbook tool, extension not declared", extReq{method: "tools/call", params: `"name":"demo_fast","arguments":{}`, undeclared: true}, "Hello, world!"},
		{"a REST tool, extension declared", extReq{method: "tools/call", params: `"name":"list_things","arguments":{}`}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := te.extOK(t, tt.r)
			if res["resultType"] == "task" || res["taskId"] != nil || !strings.Contains(text0(res), tt.text) {
				t.Errorf("result %v, want the call's own result", res)
			}
		})
	}
}

func TestTaskExtCancel(t *testing.T) {
	te := taskGateway(t, time.Second, time.Minute, TasksConfig{}, nil, false)
	const bob = "Bearer bob"
	created := te.extOK(t, extReq{auth: bob, method: "tools/call", params: `"name":"demo_slow","arguments":{"label":"cancel-me"}`})
	id := created["taskId"].(string)
	ack := te.extOK(t, extReq{auth: bob, method: "tasks/cancel", params: taskIDField(id)})
	if !reflect.DeepEqual(ack, map[string]any{"resultType": "complete"}) {
		t.Errorf("cancel answered %v, want the empty acknowledgement", ack)
	}
	if c := te.e.Counts(); c.Cancelled != 1 {
		t.Errorf("the engine cancelled %d runs, want 1", c.Cancelled)
	}
	task := te.extOK(t, extReq{auth: bob, method: "tasks/get", params: taskIDField(id)})
	if task["status"] != "cancelled" || task["result"] != nil {
		t.Errorf("after cancel, tasks/get = %v, want cancelled", task)
	}
	// Cooperative: a task already terminal is acknowledged, the engine not called.
	te.extOK(t, extReq{auth: bob, method: "tasks/cancel", params: taskIDField(id)})
	if c := te.e.Counts(); c.Cancelled != 1 {
		t.Errorf("a second cancel reached the engine: %d cancels", c.Cancelled)
	}
}

// TestTaskExtCeiling: a run past its timeout is a completed task whose
// result says so (isError), not a failed one: the call would have answered
// that result.
func TestTaskExtCeiling(t *testing.T) {
	te := taskGateway(t, time.Second, 300*time.Millisecond, TasksConfig{}, nil, false)
	created := te.extOK(t, extReq{method: "tools/call", params: `"name":"demo_slow","arguments":{}`})
	final, _ := te.extPoll(t, "", created["taskId"].(string))
	res, _ := final["result"].(map[string]any)
	if final["status"] != "completed" || res["isError"] != true || !strings.Contains(text0(res), "did not finish within 300ms") {
		t.Errorf("past its ceiling: %v, want completed with an isError result saying so", final)
	}
	waitFor(t, "the engine to see the cancel", func() bool { return te.e.Counts().Cancelled == 1 })
}

func TestTaskExtRefusals(t *testing.T) {
	t.Setenv("MCPGATE_TEST_TASK_KEY", strings.Repeat("k", 32))
	shared := TasksConfig{KeyEnv: "MCPGATE_TEST_TASK_KEY"}
	te := taskGateway(t, 50*time.Millisecond, time.Minute, shared, nil, false)
	replica := taskGateway(t, 50*time.Millisecond, time.Minute, shared, nil, true, te.e) // stateful, same key
	const alice = "Bearer alice"
	id := te.extOK(t, extReq{auth: alice, method: "tools/call", params: `"name":"demo_fast","arguments":{}`})["taskId"].(string)
	get := func(mod func(*extReq)) extReq {
		r := extReq{auth: alice, method: "tasks/get", params: taskIDField(id)}
		if mod != nil {
			mod(&r)
		}
		return r
	}
	for _, tt := range []struct {
		name   string
		te     *taskEnv
		r      extReq
		status int
		code   float64 // 0: a result
		want   string
	}{
		{"the caller", te, get(nil), 200, 0, ""},
		{"a replica with the same key, stateful", replica, get(nil), 200, 0, ""},
		{"update, acknowledged", te, get(func(r *extReq) {
			r.method, r.params = "tasks/update", taskIDField(id)+`,"inputResponses":{"k":{"action":"accept"}}`
		}), 200, 0, ""},
		{"extension not declared", te, get(func(r *extReq) { r.undeclared = true }), 400, -32021, "missing required client capability: tasks/get is a method of the tasks extension; declare the io.modelcontextprotocol/tasks extension"},
		{"cancel, extension not declared", te, get(func(r *extReq) { r.method, r.undeclared = "tasks/cancel", true }), 400, -32021, "tasks/cancel is a method of the tasks extension"},
		{"no Mcp-Name", te, get(func(r *extReq) { r.header = http.Header{"Mcp-Name": nil} }), 400, -32020, `missing required Mcp-Name header for method "tasks/get"`},
		{"another Mcp-Name", te, get(func(r *extReq) { r.header = http.Header{"Mcp-Name": {"other"}} }), 400, -32020, "the Mcp-Name header does not match params.taskId"},
		{"another Mcp-Method", te, get(func(r *extReq) { r.header = http.Header{"Mcp-Method": {"tasks/cancel"}} }), 400, -32020, "Mcp-Method header value"},
		{"no Mcp-Method", te, get(func(r *extReq) { r.header = http.Header{"Mcp-Method": nil} }), 400, -32020, "missing required Mcp-Method header"},
		{"no taskId", te, get(func(r *extReq) { r.params = `"x":1` }), 400, -32602, "params.taskId is required"},
		{"update without inputResponses", te, get(func(r *extReq) { r.method = "tasks/update" }), 400, -32602, "params.inputResponses must be an object"},
		{"another caller", te, get(func(r *extReq) { r.auth = "Bearer mallory" }), 400, -32602, "task not found"},
		{"not an id", te, get(func(r *extReq) { r.params = taskIDField("786512e2-9e0d-44bd-8f29-789f320fe840") }), 400, -32602, "task not found"},
		{"update of an unknown task", te, get(func(r *extReq) { r.method, r.params = "tasks/update", taskIDField("nope")+`,"inputResponses":{}` }), 400, -32602, "task not found"},
		{"tasks/result is not in the extension", te, get(func(r *extReq) { r.method = "tasks/result" }), 404, -32601, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, m := tt.te.ext(t, tt.r)
			e, _ := m["error"].(map[string]any)
			switch {
			case status != tt.status:
				t.Errorf("HTTP %d %v, want %d", status, m, tt.status)
			case tt.code == 0 && e != nil:
				t.Errorf("error %v", e)
			case tt.code != 0 && (e == nil || e["code"] != tt.code || !strings.Contains(e["message"].(string), tt.want)):
				t.Errorf("answer %v, want %v %q", m, tt.code, tt.want)
			case tt.code == -32021 && !reflect.DeepEqual(e["data"], map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}):
				t.Errorf("-32021 data %v does not name the extension", e["data"])
			}
			if e != nil && strings.Contains(fmt.Sprint(e), id) {
				t.Error("the error echoes the task id")
			}
		})
	}
}

// TestTaskRequired: a playbook whose task is "required" is declared so at
// 2025-11-25 and refused as a plain call there (-32601) and from a
// 2026-07-28 client that did not declare the extension (-32021, naming the
// tool); a version without tasks still runs it as a plain call.
func TestTaskRequired(t *testing.T) {
	e := engine.New(&engine.Options{Step: 10 * time.Millisecond})
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Items: []PlaybookItem{{Path: "demo/slow", Task: "required"}}}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	te := &taskEnv{g: g, e: e, url: srv.URL + "/mcp"}

	supports := map[string]any{}
	for _, raw := range te.must(t, "", "tools/list", `{}`)["tools"].([]any) {
		tool := raw.(map[string]any)
		supports[tool["name"].(string)] = tool["execution"]
	}
	if got := supports["demo_slow"]; !reflect.DeepEqual(got, map[string]any{"taskSupport": "required"}) {
		t.Errorf("demo_slow declares %v, want taskSupport required", got)
	}
	if got := supports["demo_fast"]; !reflect.DeepEqual(got, map[string]any{"taskSupport": "optional"}) {
		t.Errorf("demo_fast declares %v, want taskSupport optional", got)
	}

	for _, tt := range []struct {
		name    string
		version string // the MCP-Protocol-Version of a 2025 request; "2026-07-28": te.ext
		params  string
		code    float64 // 0: a result
		want    string  // in the error's message, or the result's text
	}{
		{"2025-11-25, plain call of a required tool", "2025-11-25", `{"name":"demo_slow","arguments":{"label":"r"}}`, -32601, `tool "demo_slow" requires task-augmented execution`},
		{"2025-11-25, plain call of an optional tool", "2025-11-25", `{"name":"demo_fast","arguments":{}}`, 0, "Hello, world!"},
		{"2025-06-18 has no tasks: a plain call runs", "2025-06-18", `{"name":"demo_slow","arguments":{"label":"old"}}`, 0, "old: counted 5 steps"},
		{"2026-07-28, extension not declared", "2026-07-28", `"name":"demo_slow","arguments":{"label":"r"}`, -32021, `tool "demo_slow" runs only as a task`},
		{"2026-07-28, extension not declared, optional tool", "2026-07-28", `"name":"demo_fast","arguments":{}`, 0, "Hello, world!"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res, e map[string]any
			if tt.version == "2026-07-28" {
				status, m := te.ext(t, extReq{method: "tools/call", params: tt.params, undeclared: true})
				res, _ = m["result"].(map[string]any)
				e, _ = m["error"].(map[string]any)
				if wantStatus := map[bool]int{true: 400, false: 200}[tt.code != 0]; status != wantStatus {
					t.Errorf("HTTP %d, want %d", status, wantStatus)
				}
				if e != nil && !reflect.DeepEqual(e["data"], map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}) {
					t.Errorf("-32021 data %v", e["data"])
				}
			} else {
				res, e = te.send(t, "", "tools/call", tt.params, http.Header{"Mcp-Protocol-Version": {tt.version}})
			}
			switch {
			case tt.code == 0 && (e != nil || !strings.Contains(text0(res), tt.want)):
				t.Errorf("result %v, error %v, want text %q", res, e, tt.want)
			case tt.code != 0 && (e == nil || e["code"] != tt.code || !strings.Contains(e["message"].(string), tt.want)):
				t.Errorf("result %v, error %v, want %v %q", res, e, tt.code, tt.want)
			}
		})
	}
	// As a task it runs, in either protocol.
	te.create(t, "", "demo_slow", `{"label":"t"}`)
	if created := te.extOK(t, extReq{method: "tools/call", params: `"name":"demo_slow","arguments":{"label":"x"}`}); created["resultType"] != "task" {
		t.Errorf("2026-07-28 with the extension: %v, want a task", created)
	}
	if n := e.Counts().Started; n != 5 {
		t.Errorf("the engine started %d runs, want 5: three plain calls and two tasks (the refused calls start none)", n)
	}
}

// BenchmarkTaskExtensionPass is what the extension's stage costs a request
// it does not answer, on a gateway that serves playbook tools (with none,
// the stage is one nil check): a 2025-11-25 tools/call, and a 2026-07-28 one
// from a client that did not declare the extension.
func BenchmarkTaskExtensionPass(b *testing.B) {
	d := &taskDoor{}
	msg := func() *message { b.Fatal("the message was decoded"); return nil }
	for _, bc := range []struct{ name, version, body string }{
		{"2025-11-25", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_things","arguments":{}}}`},
		{"2026-07-28 undeclared", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_things","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Mcp-Protocol-Version", bc.version)
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if d.serveExt(nil, r, body, msg) {
					b.Fatal("answered")
				}
			}
		})
	}
}
