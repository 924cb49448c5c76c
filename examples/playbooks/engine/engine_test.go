package engine

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func do(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	return doWith(t, srv.Client(), srv.URL, method, path, token, body)
}

// inProcess serves requests with h in the caller's goroutine: no network,
// so that a test can run the engine in a synctest bubble.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func doWith(t *testing.T, c *http.Client, base, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, raw)
	}
	return resp.StatusCode, m
}

// TestEngineRuns runs the engine in a synctest bubble: demo/slow's steps
// are measured on a clock that moves only when the test sleeps, so "step 1
// of 5" right after the start and "completed" after the steps hold
// however loaded the machine is.
func TestEngineRuns(t *testing.T) {
	tests := []struct {
		name, path, workload string
		wait                 time.Duration
		want                 map[string]any
	}{
		{"fast completes at once", "demo/fast", `{"name":"Ada"}`, 0,
			map[string]any{"completed": true, "failed": false, "summary": "Hello, Ada!", "status": "COMPLETED"}},
		{"fast takes its default", "demo/fast", `{}`, 0,
			map[string]any{"summary": "Hello, world!"}},
		{"slow is running with progress", "demo/slow", `{}`, 0,
			map[string]any{"completed": false, "failed": false, "progress": 0.0, "message": "step 1 of 5"}},
		{"slow is still running just before its last step ends", "demo/slow", `{"label":"x"}`, 100*time.Millisecond - time.Nanosecond,
			map[string]any{"completed": false, "failed": false}},
		{"slow completes after its steps", "demo/slow", `{"label":"x"}`, 100 * time.Millisecond,
			map[string]any{"completed": true, "failed": false, "summary": "x: counted 5 steps"}},
		{"fail fails", "demo/fail", `{}`, 0,
			map[string]any{"completed": true, "failed": true, "status": "FAILED", "error": "step check failed: the demo fails on purpose"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := New(&Options{Token: "tok", Step: 20 * time.Millisecond})
				c := &http.Client{Transport: inProcess{e.Handler()}}
				code, m := doWith(t, c, "http://engine", "POST", "/api/execute", "tok", `{"path":"`+tt.path+`","workload":`+tt.workload+`}`)
				if code != 200 || m["execution_id"] == "" {
					t.Fatalf("execute %s: %d %v", tt.path, code, m)
				}
				id := m["execution_id"].(string)
				time.Sleep(tt.wait)
				code, m = doWith(t, c, "http://engine", "GET", "/api/executions/"+id+"/status", "tok", "")
				if code != 200 {
					t.Fatalf("status: %d %v", code, m)
				}
				for k, v := range tt.want {
					if m[k] != v {
						t.Errorf("%s = %v, want %v (status %v)", k, m[k], v, m)
					}
				}
			})
		})
	}
}

func TestEngineCancelAndErrors(t *testing.T) {
	e := New(&Options{Token: "tok", Step: time.Hour})
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	_, m := do(t, srv, "POST", "/api/execute", "tok", `{"path":"demo/slow"}`)
	id := m["execution_id"].(string)
	if code, _ := do(t, srv, "POST", "/api/executions/"+id+"/cancel", "tok", ""); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	_, st := do(t, srv, "GET", "/api/executions/"+id+"/status", "tok", "")
	if st["status"] != "CANCELLED" || st["completed"] != true || st["failed"] != true {
		t.Errorf("after cancel: %v", st)
	}
	if _, l := do(t, srv, "GET", "/api/executions", "tok", ""); len(l["executions"].([]any)) != 1 || l["executions"].([]any)[0].(map[string]any)["cancelled"] != true {
		t.Errorf("executions: %v", l)
	}
	if c := e.Counts(); c.Started != 1 || c.Cancelled != 1 {
		t.Errorf("counts = %+v", c)
	}
	for _, tt := range []struct {
		name, method, path, token, body string
		code                            int
	}{
		{"no token", "POST", "/api/execute", "", `{"path":"demo/fast"}`, 401},
		{"wrong token", "GET", "/api/catalog", "nope", "", 401},
		{"unknown playbook", "POST", "/api/execute", "tok", `{"path":"nope"}`, 404},
		{"bad body", "POST", "/api/execute", "tok", `[`, 400},
		{"unknown execution", "GET", "/api/executions/zz/status", "tok", "", 404},
		{"document is open", "GET", "/openapi.json", "", "", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if code, m := do(t, srv, tt.method, tt.path, tt.token, tt.body); code != tt.code {
				t.Errorf("%d %v, want %d", code, m, tt.code)
			}
		})
	}
}

func TestCatalogAndDocument(t *testing.T) {
	srv := httptest.NewServer(New(nil).Handler())
	defer srv.Close()
	_, m := do(t, srv, "GET", "/api/catalog", "", "")
	list := m["playbooks"].([]any)
	hidden := 0
	for _, p := range list {
		if md := p.(map[string]any)["metadata"].(map[string]any); md["exposes_as_mcp"] == false {
			hidden++
		}
	}
	if len(list) != 4 || hidden != 1 {
		t.Errorf("catalog: %d playbooks, %d hidden; want 4, 1", len(list), hidden)
	}
	_, doc := do(t, srv, "GET", "/openapi.json", "", "")
	roles := map[string]bool{}
	for _, item := range doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			if r, ok := op.(map[string]any)["x-mcp-playbook"].(string); ok {
				roles[r] = true
			}
		}
	}
	for _, r := range []string{"execute", "status", "cancel", "catalog"} {
		if !roles[r] {
			t.Errorf("no operation marked x-mcp-playbook: %s", r)
		}
	}
}
