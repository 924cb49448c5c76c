package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// The variants a FuzzPlaybookJSONRPC input picks from: index = byte % len.
var (
	fuzzPlaybookPaths = []string{"demo/fast", "demo/slow", "demo/fail", "internal/tool", "no/such/book", "demo/fast/jsonrpc", "demo"}
	fuzzPlaybookAuth  = []string{"Bearer tok", "Bearer wrong", ""}
)

// FuzzPlaybookJSONRPC posts arbitrary bodies to the NoETL-compatible
// endpoint, POST /api/mcp/playbook/{path}/jsonrpc, of a gateway over the
// example engine (in-process), with the playbook path and the caller's token
// picked from the input. Whatever comes in: no panic, an answer within the
// limit, HTTP 200 with one valid JSON-RPC response (see checkResponse: the
// request's id, or null) or HTTP 202 with no body — and 202 only for a
// notification (see isNotification). The engine's steps and the gateway's
// ceiling are milliseconds, so that every path (a run done at once, failed,
// past its ceiling, refused) costs little.
func FuzzPlaybookJSONRPC(f *testing.F) {
	e := engine.New(&engine.Options{Token: "tok", Step: time.Millisecond})
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond, Items: []PlaybookItem{
			{Path: "demo/fast", Workload: map[string]any{"name": "world"}},
			{Path: "demo/slow", Workload: map[string]any{"label": "demo", "note": nil}},
			{Path: "demo/fail", Workload: map[string]any{}},
			{Path: "internal/tool", ExposesAsMCP: new(false)},
		}}}}}
	g, err := New(f.Context(), cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	h := g.Handler()
	f.Fuzz(func(t *testing.T, body []byte, path, token uint8) {
		r := httptest.NewRequest(http.MethodPost, "/api/mcp/playbook/"+fuzzPlaybookPaths[int(path)%len(fuzzPlaybookPaths)]+"/jsonrpc", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if a := fuzzPlaybookAuth[int(token)%len(fuzzPlaybookAuth)]; a != "" {
			r.Header.Set("Authorization", a)
		}
		w := fuzzServe(t, h, r)
		if err := checkPlaybookAnswer(body, w); err != nil {
			t.Fatalf("%.500v\nanswer: HTTP %d %q\n%.500s", err, w.Code, w.Header().Get("Content-Type"), w.Body.Bytes())
		}
	})
}

// checkPlaybookAnswer checks one answer of the NoETL-compatible endpoint to
// the POST of body.
func checkPlaybookAnswer(body []byte, w *httptest.ResponseRecorder) error {
	switch w.Code {
	case http.StatusAccepted:
		if w.Body.Len() != 0 {
			return errors.New("HTTP 202 with a body")
		}
		if !isNotification(body) {
			return errors.New("HTTP 202 (no answer) for a message that is not a notification")
		}
		return nil
	case http.StatusOK:
	default:
		return errors.New("HTTP status is neither 200 nor 202")
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		return errors.New("HTTP 200 is not application/json")
	}
	id, isRequest := requestID(body)
	return checkResponse(w.Body.Bytes(), id, isRequest)
}

// isNotification reports whether body is a JSON-RPC 2.0 notification (§4.1):
// an object with "jsonrpc" "2.0", a string "method" and no "id". Anything
// else is a request to answer, or an invalid one, which JSON-RPC answers
// with an error (§5: id null when it cannot be read).
func isNotification(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return false
	}
	var method string
	_, hasID := m["id"]
	return !hasID && string(m["jsonrpc"]) == `"2.0"` && json.Unmarshal(m["method"], &method) == nil && m["method"][0] == '"'
}
