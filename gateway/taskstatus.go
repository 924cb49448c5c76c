package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"sync"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// notifications/tasks/status (MCP 2025-11-25) for stateful sessions.
//
// The spec lets a server tell the requestor of a task that its status
// changed; the requestor must not rely on it (tasks/get stays the source of
// truth). go-sdk v1.8.0 sends no notification it does not know (its sending
// handler refuses an unknown method), so the gateway writes this one itself,
// as one SSE event on the session's standalone stream (the GET go-sdk serves
// for it): the front door wraps that GET's writer (streamWriter), which
// takes each of go-sdk's writes whole — go-sdk writes an event in one Write
// (v1.8.0 writeEvent) — so an event of the gateway's never lands inside one
// of go-sdk's.
//
// What is sent, and when: a task made on a session (a task-augmented
// tools/call of a playbook tool) gets one notification when its run ends in
// this process (completed, failed or cancelled, with the statusMessage and
// lastUpdatedAt tasks/get would give). "working" is what the
// CreateTaskResult already said, so no notification says it again. Nothing
// is sent, and nothing is kept, when the session has no stream open then (the
// client polls, as it must anyway); nor for a run another replica drives (a
// re-sent call that joined it: it ends there); nor over stdio or to a
// stateless gateway, which have no stream to send it on.

// sessionStreams are the standalone SSE streams being served on a stateful
// gateway, by session id. Safe for concurrent use.
type sessionStreams struct {
	mu sync.Mutex
	m  map[string]*streamWriter
}

func newSessionStreams() *sessionStreams {
	return &sessionStreams{m: map[string]*streamWriter{}}
}

// watch wraps w, the writer of session id's GET, so that once go-sdk opens
// it as an event stream, send can write to it. Call the returned function
// when the GET's handler has returned: nothing is written after.
func (s *sessionStreams) watch(w http.ResponseWriter, id string) (*streamWriter, func()) {
	sw := &streamWriter{ResponseWriter: w, streams: s, id: id}
	return sw, func() {
		sw.mu.Lock()
		sw.done = true
		sw.mu.Unlock()
		s.mu.Lock()
		if s.m[id] == sw {
			delete(s.m, id)
		}
		s.mu.Unlock()
	}
}

// send writes one JSON-RPC message as an SSE event on session id's stream,
// and reports whether there was a stream to write it on and the write
// worked.
func (s *sessionStreams) send(id string, msg []byte) bool {
	s.mu.Lock()
	sw := s.m[id]
	s.mu.Unlock()
	if sw == nil {
		return false
	}
	var b bytes.Buffer
	b.Grow(len("event: message\ndata: \n\n") + len(msg))
	b.WriteString("event: message\ndata: ")
	b.Write(msg)
	b.WriteString("\n\n")
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.done {
		return false
	}
	if _, err := sw.ResponseWriter.Write(b.Bytes()); err != nil {
		return false
	}
	return http.NewResponseController(sw.ResponseWriter).Flush() == nil
}

// streamWriter is the writer of a session's GET: go-sdk's writes, and the
// gateway's events, one at a time.
type streamWriter struct {
	http.ResponseWriter
	streams *sessionStreams
	id      string

	mu     sync.Mutex
	opened bool // go-sdk answered 200 text/event-stream: registered
	done   bool // the handler has returned
}

func (w *streamWriter) WriteHeader(status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ResponseWriter.WriteHeader(status)
	if !w.opened && status == http.StatusOK && isEventStream(w.Header().Get("Content-Type")) {
		w.opened = true
		w.streams.mu.Lock()
		w.streams.m[w.id] = w // the newest stream of the session (go-sdk allows one)
		w.streams.mu.Unlock()
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

// Flush lets go-sdk's events through.
func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// taskStatusNotification is notifications/tasks/status: its params are the
// Task (schema.ts, 2025-11-25: TaskStatusNotificationParams).
type taskStatusNotification struct {
	JSONRPC string   `json:"jsonrpc"`
	Method  string   `json:"method"`
	Params  taskWire `json:"params"`
}

// notifyEnded returns the Request.Ended of a task made on session: it sends
// the session notifications/tasks/status once the run has ended, the
// task's id is known (id delivers it, "" when the task could not be made)
// and the answer naming it has been written (answered is closed, nil: no
// wait): a client is not told of a task it has not yet been given.
func (d *taskDoor) notifyEnded(session string, c *taskClaims, runner *playbook.Runner, id <-chan string, answered <-chan struct{}) func(*playbook.Outcome) {
	return func(out *playbook.Outcome) {
		taskID := <-id
		if taskID == "" {
			return
		}
		if answered != nil {
			<-answered
		}
		var msg string
		if out.Result != nil {
			msg = statusText(out.Result)
		}
		n := taskStatusNotification{JSONRPC: "2.0", Method: "notifications/tasks/status", Params: d.wire(taskID, c, runner, out.State, msg)}
		data, err := json.Marshal(n)
		if err != nil {
			return
		}
		sent := d.g.streams.send(session, data)
		d.g.logger.LogAttrs(context.Background(), slog.LevelDebug, "playbook task",
			slog.String("action", "status notification"), slog.String("status", n.Params.Status),
			slog.String("execution_id", c.Execution), slog.Bool("sent", sent))
	}
}
