package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// rpcErrors turns the plain-text errors go-sdk's StreamableHTTPHandler writes
// for a POSTed message (http.Error: an unknown method, an Accept or
// Content-Type it refuses, an unsupported protocol version, an unknown
// session) into JSON-RPC error bodies with the same HTTP status, as the
// Streamable HTTP transport allows ("the HTTP response body MAY comprise a
// JSON-RPC error response"): a client's JSON-RPC layer can then read what
// went wrong instead of failing to parse text. An unknown method is -32601;
// every other refusal -32600, go-sdk's words as the message. The id is the
// message's when it has one, else null.
//
// Everything else (answers, SSE streams, 2xx) passes through untouched: the
// wrapper only holds back a response whose status is 400 or more and whose
// Content-Type is text/plain.
type rpcErrors struct {
	http.ResponseWriter
	body []byte          // the POSTed body
	msg  func() *message // body as a message, for its id

	status int          // held back: the status go-sdk chose
	text   bytes.Buffer // held back: go-sdk's message
}

const maxHeldError = 4 << 10

func (w *rpcErrors) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = code
		return
	}
	w.status = -1 // passing through
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcErrors) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status > 0 {
		if room := maxHeldError - w.text.Len(); room > 0 {
			w.text.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *rpcErrors) Flush() {
	if w.status <= 0 {
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

func (w *rpcErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the held-back error, if any, as JSON-RPC.
func (w *rpcErrors) finish() {
	if w.status <= 0 {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	code := jsonrpc.CodeInvalidRequest
	if strings.HasPrefix(msg, "JSON RPC not handled:") || strings.Contains(msg, "method not found") {
		code = jsonrpc.CodeMethodNotFound
	}
	// The id as go-sdk reads it (its decoder, case-sensitive keys), and
	// only one the fast path would echo; else null. Null too when the body
	// is not one JSON value (go-sdk's stream decoder reads the value before
	// trailing bytes), as JSON-RPC wants for a body it cannot parse: a
	// refusal here can come before the front door checked the body (a
	// Content-Type go-sdk refuses, a bad Host).
	id := json.RawMessage("null")
	if m := w.msg(); m.ok && json.Valid(w.body) {
		if e, ok := sdkwire.EchoID(m.ID); ok {
			id = e
		}
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: int64(code), Message: msg}})
	h := w.ResponseWriter.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.status)
	w.ResponseWriter.Write(out)
}
