package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// openStream opens session id's standalone SSE stream (GET) and returns the
// JSON-RPC messages it carries, as they come.
func openStream(t *testing.T, url, id, authorization string) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range sessionHeader(id, authorization) {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan map[string]any, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				if event != "message" || json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) != nil {
					m = map[string]any{"malformed": line, "event": event}
				}
				out <- m
			}
		}
	}()
	return out
}

// nextMessage returns the next message on a stream, failing after d.
func nextMessage(t *testing.T, stream <-chan map[string]any, d time.Duration) map[string]any {
	t.Helper()
	select {
	case m, ok := <-stream:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(d):
		t.Fatalf("no message on the stream within %s", d)
		return nil
	}
}

// TestTaskStatusNotification: a task made on a stateful session sends
// notifications/tasks/status on the session's stream when its run ends —
// completed, or cancelled — with the Task tasks/get gives; another session
// of the same caller, and a session with no stream open, get nothing, and
// the session's stream still carries go-sdk's own messages.
func TestTaskStatusNotification(t *testing.T) {
	te := taskGateway(t, 20*time.Millisecond, time.Minute, TasksConfig{}, nil, true)
	const carol = "Bearer carol"
	sid, other := openSession(t, te.url, carol), openSession(t, te.url, carol)
	stream, otherStream := openStream(t, te.url, sid, carol), openStream(t, te.url, other, carol)
	waitFor(t, "both streams registered", func() bool {
		te.g.streams.mu.Lock()
		defer te.g.streams.mu.Unlock()
		return te.g.streams.m[sid] != nil && te.g.streams.m[other] != nil
	})
	h := sessionHeader(sid, carol)

	res, e := te.send(t, carol, "tools/call", `{"name":"demo_slow","arguments":{"label":"told"},"task":{}}`, h)
	if e != nil {
		t.Fatal(e)
	}
	id := res["task"].(map[string]any)["taskId"].(string)
	n := nextMessage(t, stream, 30*time.Second)
	if n["jsonrpc"] != "2.0" || n["method"] != "notifications/tasks/status" || n["id"] != nil {
		t.Fatalf("notification %v", n)
	}
	p := n["params"].(map[string]any)
	got, _ := te.send(t, carol, "tasks/get", taskIDParams(id), h)
	if p["taskId"] != id || p["status"] != "completed" || got["status"] != "completed" {
		t.Fatalf("notified %v; tasks/get %v", p, got)
	}
	for _, k := range []string{"createdAt", "ttl", "pollInterval", "statusMessage"} {
		if p[k] != got[k] {
			t.Errorf("%s: notified %v, tasks/get %v", k, p[k], got[k])
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, p["lastUpdatedAt"].(string)); err != nil {
		t.Errorf("lastUpdatedAt %v: %v", p["lastUpdatedAt"], err)
	}

	// A cancelled one: cancelled.
	cancelled := te.e.Counts().Cancelled
	res, e = te.send(t, carol, "tools/call", `{"name":"demo_slow","arguments":{"label":"stopped"},"task":{}}`, h)
	if e != nil {
		t.Fatal(e)
	}
	id = res["task"].(map[string]any)["taskId"].(string)
	if _, e := te.send(t, carol, "tasks/cancel", taskIDParams(id), h); e != nil {
		t.Fatal(e)
	}
	n = nextMessage(t, stream, 30*time.Second)
	if p := n["params"].(map[string]any); n["method"] != "notifications/tasks/status" || p["taskId"] != id || p["status"] != "cancelled" {
		t.Fatalf("after tasks/cancel: %v", n)
	}
	if c := te.e.Counts().Cancelled; c != cancelled+1 {
		t.Errorf("the engine cancelled %d runs, want %d", c, cancelled+1)
	}

	// Each notification was one well-formed event (openStream parses
	// them), and no other session was told.
	select {
	case m := <-stream:
		t.Errorf("unexpected message on the stream: %v", m)
	case m := <-otherStream:
		t.Errorf("the other session was told: %v", m)
	default:
	}

	// A session with no stream open: the task completes, nothing is sent
	// and nothing breaks.
	quiet := openSession(t, te.url, carol)
	qh := sessionHeader(quiet, carol)
	res, e = te.send(t, carol, "tools/call", `{"name":"demo_slow","arguments":{},"task":{}}`, qh)
	if e != nil {
		t.Fatal(e)
	}
	id = res["task"].(map[string]any)["taskId"].(string)
	if res, e := te.send(t, carol, "tasks/result", taskIDParams(id), qh); e != nil || text0(res) != "demo: counted 5 steps" {
		t.Errorf("result on a session without a stream: %v %v", res, e)
	}
}

// TestTaskStatusAfterAnswer: a run that ends before the answer creating its
// task has been written is told to the session only once it has: a client
// is never told of a task it has not been given.
func TestTaskStatusAfterAnswer(t *testing.T) {
	te := taskGateway(t, 20*time.Millisecond, time.Minute, TasksConfig{}, nil, true)
	d := te.g.tasks
	var tool *Tool
	for _, tl := range d.byPath {
		tool = tl
	}
	runner := te.g.runners[tool.Upstream]
	synctest.Test(t, func(t *testing.T) {
		streams := newSessionStreams()
		rec := httptest.NewRecorder()
		sw, unwatch := streams.watch(rec, "s1")
		defer unwatch()
		sw.Header().Set("Content-Type", "text/event-stream")
		sw.WriteHeader(http.StatusOK)
		te.g.streams = streams
		sealed := make(chan string, 1)
		sealed <- "task-1"
		answered := make(chan struct{})
		c := &taskClaims{Upstream: tool.Upstream, Path: tool.Playbook.Path, Created: time.Now().UnixMilli(), TTL: time.Minute.Milliseconds()}
		go d.notifyEnded("s1", c, runner, sealed, answered)(&playbook.Outcome{State: playbook.Succeeded})
		synctest.Wait()
		if rec.Body.Len() != 0 {
			t.Fatalf("told before the answer naming the task was written: %s", rec.Body)
		}
		close(answered)
		synctest.Wait()
		if !strings.Contains(rec.Body.String(), `"method":"notifications/tasks/status"`) || !strings.Contains(rec.Body.String(), `"task-1"`) {
			t.Fatalf("not told once the answer was written: %q", rec.Body)
		}
	})
}
