package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	mcpgateauth "github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/internal/caller"
)

// taskEnv is a gateway (at url) in front of an engine.
type taskEnv struct {
	g   *Gateway
	e   *engine.Engine
	url string
}

// taskGateway serves the example engine in-process (or the shared one), with
// a REST upstream beside it (fastAPI), behind a gateway over HTTP. The
// engine's demo/slow takes 5 steps of step.
func taskGateway(t *testing.T, step, timeout time.Duration, tasks TasksConfig, opts *Options, stateful bool, shared ...*engine.Engine) *taskEnv {
	t.Helper()
	e := engine.New(&engine.Options{Step: step})
	if len(shared) > 0 {
		e = shared[0] // replicas in front of one engine
	}
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	t.Cleanup(api.Close)
	cfg := &Config{Stateful: stateful, Tasks: tasks, Upstreams: []Upstream{
		{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
			Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: timeout}},
		{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api.URL},
	}}
	g, err := New(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &taskEnv{g: g, e: e, url: srv.URL + "/mcp"}
}

// send posts one JSON-RPC request as the TS SDK does (protocol 2025-11-25)
// and returns its result or its error.
func (te *taskEnv) send(t *testing.T, authorization, method, params string, extra http.Header) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	h := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
	if authorization != "" {
		h.Set("Authorization", authorization)
	}
	for k, v := range extra {
		h[k] = v
	}
	a := sendRaw(t, te.url, rpc("7", method, params), h)
	if a.Status != http.StatusOK || len(a.Messages) != 1 {
		t.Fatalf("%s: HTTP %d %s %v %q", method, a.Status, a.Type, a.Messages, a.Text)
	}
	m := a.Messages[0].(map[string]any)
	if e, ok := m["error"].(map[string]any); ok {
		return nil, e
	}
	return m["result"].(map[string]any), nil
}

func (te *taskEnv) must(t *testing.T, authorization, method, params string) map[string]any {
	t.Helper()
	res, e := te.send(t, authorization, method, params, nil)
	if e != nil {
		t.Fatalf("%s %s: error %v", method, params, e)
	}
	return res
}

// create starts a task and returns its id.
func (te *taskEnv) create(t *testing.T, authorization, tool, args string) (string, map[string]any) {
	t.Helper()
	res := te.must(t, authorization, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s,"task":{"ttl":60000}}`, tool, args))
	task := res["task"].(map[string]any)
	return task["taskId"].(string), task
}

func taskIDParams(id string) string { return fmt.Sprintf(`{"taskId":%q}`, id) }

// poll calls tasks/get until the task is terminal.
func (te *taskEnv) poll(t *testing.T, authorization, id string) (map[string]any, int) {
	t.Helper()
	for i := 1; i <= 500; i++ {
		task := te.must(t, authorization, "tasks/get", taskIDParams(id))
		if task["status"] != "working" {
			return task, i
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the task is still working after 500 polls")
	return nil, 0
}

func text0(res map[string]any) string {
	c, _ := res["content"].([]any)
	if len(c) == 0 {
		return ""
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

func TestTasksAdvertised(t *testing.T) {
	fast := taskGateway(t, 10*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	sdk := taskGateway(t, 10*time.Millisecond, time.Minute, TasksConfig{}, &Options{DisableFastPath: true}, false)
	for _, tt := range []struct {
		version string
		want    any
	}{
		{"2025-11-25", map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}},
		{"2025-06-18", nil}, // tasks came with 2025-11-25
	} {
		t.Run("initialize "+tt.version, func(t *testing.T) {
			res := fast.must(t, "", "initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, tt.version))
			caps := res["capabilities"].(map[string]any)
			if got := caps["tasks"]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("capabilities.tasks = %v, want %v", got, tt.want)
			}
			if caps["tools"] == nil {
				t.Errorf("the other capabilities are gone: %v", caps)
			}
		})
	}
	lists := map[string]map[string]any{}
	for name, te := range map[string]*taskEnv{"fast path": fast, "go-sdk": sdk} {
		res := te.must(t, "", "tools/list", `{}`)
		lists[name] = res
		for _, raw := range res["tools"].([]any) {
			tool := raw.(map[string]any)
			name, exec := tool["name"].(string), tool["execution"]
			playbook := strings.HasPrefix(name, "demo_")
			if want := map[string]any{"taskSupport": "optional"}; playbook && !reflect.DeepEqual(exec, want) {
				t.Errorf("%s: tool %s: execution = %v, want %v", name, tool["name"], exec, want)
			}
			if !playbook && exec != nil {
				t.Errorf("%s: REST tool %s declares execution %v", name, tool["name"], exec)
			}
		}
	}
	if !reflect.DeepEqual(lists["fast path"], lists["go-sdk"]) {
		t.Errorf("the fast path's tools/list differs from go-sdk's:\n%v\n%v", lists["fast path"], lists["go-sdk"])
	}
}

func TestTaskLifecycle(t *testing.T) {
	te := taskGateway(t, 40*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	const alice = "Bearer alice"
	tests := []struct {
		name, tool, args string
		status           string // terminal
		isError          bool
		text             string
	}{
		{"slow run completes", "demo_slow", `{"label":"t1"}`, "completed", false, "t1: counted 5 steps"},
		{"fast run completes", "demo_fast", `{"name":"Ada"}`, "completed", false, "Hello, Ada!"},
		{"failed run", "demo_fail", `{}`, "failed", true, "fails on purpose"},
		{"invalid arguments: born failed", "demo_fast", `{"name":5}`, "failed", true, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, task := te.create(t, alice, tt.tool, tt.args)
			if tt.args != `{"name":5}` && task["status"] != "working" {
				t.Errorf("created %v, want working", task)
			}
			if task["ttl"] != 60000.0 || task["pollInterval"] != 100.0 || task["createdAt"] == "" || task["lastUpdatedAt"] == "" {
				t.Errorf("created task %v", task)
			}
			if strings.Contains(id, "alice") {
				t.Error("the task id holds the credential")
			}
			final, polls := te.poll(t, alice, id)
			if final["status"] != tt.status || final["taskId"] != id {
				t.Fatalf("final task %v, want %s", final, tt.status)
			}
			if tt.tool == "demo_slow" && polls < 3 {
				t.Errorf("the slow run completed after %d polls: it was not polled", polls)
			}
			res := te.must(t, alice, "tasks/result", taskIDParams(id))
			if got := res["isError"] == true; got != tt.isError || !strings.Contains(text0(res), tt.text) {
				t.Errorf("result %v, want isError %v and text %q", res, tt.isError, tt.text)
			}
			meta := res["_meta"].(map[string]any)
			if rt := meta["io.modelcontextprotocol/related-task"]; !reflect.DeepEqual(rt, map[string]any{"taskId": id}) {
				t.Errorf("related-task = %v", rt)
			}
		})
	}
	t.Run("result waits for the run", func(t *testing.T) {
		id, _ := te.create(t, alice, "demo_slow", `{"label":"t2"}`)
		res := te.must(t, alice, "tasks/result", taskIDParams(id))
		if text0(res) != "t2: counted 5 steps" {
			t.Errorf("result %v", res)
		}
	})
	t.Run("a REST tool is not a task", func(t *testing.T) {
		_, e := te.send(t, alice, "tools/call", `{"name":"list_things","arguments":{},"task":{}}`, nil)
		if e == nil || e["code"] != -32601.0 || !strings.Contains(e["message"].(string), "does not support task-augmented calls") {
			t.Errorf("error %v, want -32601", e)
		}
	})
	t.Run("a plain call of a playbook tool is not a task", func(t *testing.T) {
		res := te.must(t, alice, "tools/call", `{"name":"demo_fast","arguments":{}}`)
		if res["task"] != nil || text0(res) != "Hello, world!" {
			t.Errorf("result %v", res)
		}
	})
	if n := te.e.Counts().Started; n != 5 {
		t.Errorf("the engine started %d runs, want 5 (the invalid call starts none)", n)
	}
}

func TestTaskCancel(t *testing.T) {
	te := taskGateway(t, time.Second, time.Minute, TasksConfig{}, nil, false)
	const bob = "Bearer bob"
	id, _ := te.create(t, bob, "demo_slow", `{"label":"cancel-me"}`)
	task := te.must(t, bob, "tasks/cancel", taskIDParams(id))
	if task["status"] != "cancelled" || task["taskId"] != id {
		t.Fatalf("cancel answered %v", task)
	}
	if c := te.e.Counts(); c.Cancelled != 1 {
		t.Errorf("the engine cancelled %d runs, want 1", c.Cancelled)
	}
	if task := te.must(t, bob, "tasks/get", taskIDParams(id)); task["status"] != "cancelled" {
		t.Errorf("after cancel, tasks/get = %v", task)
	}
	res := te.must(t, bob, "tasks/result", taskIDParams(id))
	if res["isError"] != true || !strings.Contains(text0(res), "cancelled") {
		t.Errorf("result of a cancelled task: %v", res)
	}
	_, e := te.send(t, bob, "tasks/cancel", taskIDParams(id), nil)
	if e == nil || e["code"] != -32602.0 || !strings.Contains(e["message"].(string), "already cancelled") {
		t.Errorf("cancel twice: %v, want -32602 already cancelled", e)
	}
}

func TestTaskCeiling(t *testing.T) {
	te := taskGateway(t, time.Second, 300*time.Millisecond, TasksConfig{}, nil, false)
	id, _ := te.create(t, "", "demo_slow", `{}`)
	start := time.Now()
	res := te.must(t, "", "tasks/result", taskIDParams(id))
	if res["isError"] != true || !strings.Contains(text0(res), "did not finish within 300ms") {
		t.Errorf("result %v", res)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("tasks/result took %s: not bounded by the 300ms ceiling", d)
	}
	waitFor(t, "the engine to see the cancel", func() bool { return te.e.Counts().Cancelled == 1 })
	if task, _ := te.poll(t, "", id); task["status"] != "failed" || !strings.Contains(task["statusMessage"].(string), "did not finish within 300ms") {
		t.Errorf("after the ceiling: %v, want failed past its ceiling", task)
	}
}

func TestTaskNotFound(t *testing.T) {
	t.Setenv("MCPGATE_TEST_TASK_KEY", strings.Repeat("k", 32))
	shared := TasksConfig{KeyEnv: "MCPGATE_TEST_TASK_KEY"}
	a := taskGateway(t, 50*time.Millisecond, time.Minute, shared, nil, false)
	replica := taskGateway(t, 50*time.Millisecond, time.Minute, shared, nil, false, a.e)
	other := taskGateway(t, 50*time.Millisecond, time.Minute, TasksConfig{}, nil, false) // its own random key
	const alice = "Bearer alice"
	id, _ := a.create(t, alice, "demo_fast", `{}`)
	tampered := []byte(id)
	tampered[len(tampered)/2] ^= 1
	tests := []struct {
		name          string
		te            *taskEnv
		authorization string
		id            string
		now           time.Time
		want          string // "" : found
	}{
		{"the caller", a, alice, id, time.Time{}, ""},
		{"a replica with the same key", replica, alice, id, time.Time{}, ""},
		{"another caller", a, "Bearer mallory", id, time.Time{}, "task not found"},
		{"no credential", a, "", id, time.Time{}, "task not found"},
		{"a tampered id", a, alice, string(tampered), time.Time{}, "task not found"},
		{"not an id", a, alice, "786512e2-9e0d-44bd-8f29-789f320fe840", time.Time{}, "task not found"},
		{"a gateway with another key", other, alice, id, time.Time{}, "task not found"},
		{"expired", a, alice, id, time.Now().Add(61 * time.Second), "task has expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.now.IsZero() {
				tt.te.g.tasks.now = func() time.Time { return tt.now }
				defer func() { tt.te.g.tasks.now = time.Now }()
			}
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				res, e := tt.te.send(t, tt.authorization, method, taskIDParams(tt.id), nil)
				switch {
				case tt.want == "" && method == "tasks/cancel":
					// found, and already completed: cancel is refused as such
					if e == nil || !strings.Contains(e["message"].(string), "already completed") {
						t.Errorf("%s: %v %v", method, res, e)
					}
				case tt.want == "" && e != nil:
					t.Errorf("%s: error %v", method, e)
				case tt.want != "" && (e == nil || e["code"] != -32602.0 || !strings.Contains(e["message"].(string), tt.want)):
					t.Errorf("%s: %v %v, want -32602 %q", method, res, e, tt.want)
				}
			}
		})
	}
}

func TestTaskStateful(t *testing.T) {
	te := taskGateway(t, 20*time.Millisecond, time.Minute, TasksConfig{}, nil, true)
	const carol = "Bearer carol"
	sid := openSession(t, te.url, carol)
	h := sessionHeader(sid, carol)
	res, e := te.send(t, carol, "tools/call", `{"name":"demo_slow","arguments":{},"task":{}}`, h)
	if e != nil {
		t.Fatal(e)
	}
	id := res["task"].(map[string]any)["taskId"].(string)
	res, e = te.send(t, carol, "tasks/result", taskIDParams(id), h)
	if e != nil || text0(res) != "demo: counted 5 steps" {
		t.Errorf("result %v %v", res, e)
	}
}

func TestTaskKeyConfig(t *testing.T) {
	t.Setenv("MCPGATE_TEST_SHORT_KEY", "short")
	for _, tt := range []struct {
		cfg  TasksConfig
		want string
	}{
		{TasksConfig{KeyEnv: "MCPGATE_TEST_UNSET_KEY"}, "tasks.key_env: $MCPGATE_TEST_UNSET_KEY is not set; a task key needs at least 32 bytes"},
		{TasksConfig{KeyEnv: "MCPGATE_TEST_SHORT_KEY"}, "$MCPGATE_TEST_SHORT_KEY holds 5 bytes; a task key needs at least 32 bytes"},
		{TasksConfig{KeyEnv: "not a name"}, `tasks.key_env: "not a name" is not an environment variable name`},
		{TasksConfig{TTL: -time.Second}, "tasks.ttl: -1s must not be negative"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			e := engine.New(nil)
			cfg := &Config{Tasks: tt.cfg, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}}}
			_, err := New(t.Context(), cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestTaskSealing(t *testing.T) {
	aead, err := taskKey(TasksConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := &taskClaims{Upstream: "u", Path: "demo/slow", Execution: "x1", Caller: []byte("0123456789abcdef"), Created: 1, TTL: 2}
	id, err := sealTask(aead, c)
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := sealTask(aead, c)
	if id == id2 {
		t.Error("two seals of the same claims are the same id: the nonce is not random")
	}
	got, ok := openTask(aead, id)
	if !ok || !reflect.DeepEqual(got, c) {
		t.Errorf("open = %+v %v", got, ok)
	}
	raw, _ := json.Marshal(c)
	if strings.Contains(id, string(raw[:10])) {
		t.Error("the id is not sealed")
	}
}

// TestPrincipal: a verified user and a verified client (a token without sub,
// whose client_id is the same string) are different callers, and so is an
// unverified request carrying either header.
func TestPrincipal(t *testing.T) {
	future := time.Now().Add(time.Hour)
	var got [][32]byte
	for _, ti := range []*sdkauth.TokenInfo{
		{UserID: "x", Expiration: future},
		{UserID: "x", Expiration: future, Extra: map[string]any{mcpgateauth.ClientSubject: true}},
		{UserID: "x", Expiration: future, Scopes: []string{"more"}}, // the same user, another token
	} {
		verify := func(context.Context, string, *http.Request) (*sdkauth.TokenInfo, error) { return ti, nil }
		h := sdkauth.RequireBearerToken(verify, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = append(got, caller.ProcessKey().Digest(caller.FromRequest(r)))
		}))
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+fmt.Sprint(len(got)))
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	unverified := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	unverified.Header.Set("Authorization", "Bearer 0")
	if u := caller.ProcessKey().Digest(caller.FromRequest(unverified)); len(got) != 3 || got[0] == got[1] || got[0] != got[2] || u == got[0] {
		t.Errorf("principals: user %x, client %x, user again %x, unverified %x", got[0][:4], got[1][:4], got[2][:4], u[:4])
	}
}

// TestTaskKeyAcrossReload: without tasks.key_env, task ids are sealed with a
// key drawn once per process, so the gateway a reload builds (a new one
// beside the old, in front of the same engine) opens the ids the old one
// made, for their caller only.
func TestTaskKeyAcrossReload(t *testing.T) {
	old := taskGateway(t, 50*time.Millisecond, time.Minute, TasksConfig{}, nil, false)
	reloaded := taskGateway(t, 50*time.Millisecond, time.Minute, TasksConfig{}, nil, false, old.e)
	const alice = "Bearer alice"
	id, _ := old.create(t, alice, "demo_fast", `{}`)
	if task, _ := reloaded.poll(t, alice, id); task["status"] != "completed" {
		t.Fatalf("the reloaded gateway reads the task as %v", task)
	}
	if _, e := reloaded.send(t, "Bearer mallory", "tasks/get", taskIDParams(id), nil); e == nil || !strings.Contains(e["message"].(string), "task not found") {
		t.Errorf("another caller on the reloaded gateway: %v", e)
	}
}
