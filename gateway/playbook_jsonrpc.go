package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/gorilla/mux"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// NoETL's JSON-RPC error codes, kept on the NoETL-compatible endpoint only:
// from protocol 2026-07-28 on, −32020…−32099 are reserved by the MCP spec.
const (
	codeCeiling      = -32011 // the run reached its ceiling
	codeAccessDenied = -32020 // the engine refused the caller, or the playbook is not exposed
)

// codeBusy answers a call that would start a run over playbooks.max_runs or
// max_runs_per_caller: JSON-RPC's generic server error (NoETL has none of
// its own), with data naming the bound.
const codeBusy = -32000

// defaultNoETLProtocol is what initialize answers a client that names no
// protocol version (NoETL's).
const defaultNoETLProtocol = "2024-11-05"

// servePlaybookRPC is POST /api/mcp/playbook/{path}/jsonrpc: NoETL's
// playbook-as-MCP endpoint, one playbook = one tool, plain JSON-RPC over
// HTTP (no sessions, no SSE). Protocol outcomes are HTTP 200 with a JSON-RPC
// body; a notification is 202 with no body. It fixes NoETL's known defects:
// notifications get no body, tool names keep to ^[a-zA-Z0-9_-]{1,64}$, a run
// past its ceiling is cancelled upstream, null defaults are unconstrained
// and secrets are never shown. A playbook that is hidden (exposes_as_mcp
// false) is answered exactly as one that does not exist, so the endpoint
// does not reveal it.
// noetlDoor is the NoETL-compatible endpoint's front door: the checks /mcp
// makes before anything runs, which a playbook run needs as much as a tool
// call.
//
//   - Cross-site requests: a browser sends text/plain, form or multipart
//     POSTs to any origin without a preflight, so a web page could start runs
//     on a local gateway. Browsers always say where such a request comes
//     from (Origin); a request with an Origin must come from the gateway's
//     own (the Origin's host is the Host) and be JSON. Scripts and NoETL
//     clients send no Origin and are not held to a Content-Type (curl -d
//     sends a form type), as NoETL's own endpoint does not.
//   - DNS rebinding: on a loopback listener, only a loopback Host, as go-sdk
//     refuses it on /mcp.
//   - The body is read once under max_body_bytes and body_timeout, so a
//     trickling body cannot hold a connection forever.
type noetlDoor struct {
	fd   *frontDoor
	next http.Handler
}

func (d *noetlDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sdkwire.LocalLoopback(r) && !sdkwire.IsLoopback(r.Host) {
		writeRPCError(w, http.StatusForbidden, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "forbidden: a gateway listening on loopback answers only a loopback Host (DNS rebinding protection)"})
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			writeRPCError(w, http.StatusForbidden, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: "forbidden: a cross-origin request (its Origin is not this gateway)"})
			return
		}
		if !sdkwire.IsJSON(r.Header.Get("Content-Type")) {
			writeRPCError(w, http.StatusUnsupportedMediaType, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: "unsupported media type: POST a JSON-RPC message as application/json"})
			return
		}
	}
	// As on /mcp: a client's value never names the POST in the log. (A
	// client that stops reading its answer is cut off: Gateway.Handler.)
	stampRequestID(w, r)
	body, ok := d.fd.readBody(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if d.fd.tracer != nil {
		// The same span as /mcp's (traceRequest); the method is read
		// again by servePlaybookRPC, so it is named by the route.
		ctx, span := startRequestSpan(r.Context(), d.fd.tracer, r.Header, "tools/call", "")
		defer span.End()
		r = r.WithContext(ctx)
	}
	d.next.ServeHTTP(w, r)
}

func (g *Gateway) servePlaybookRPC(w http.ResponseWriter, r *http.Request) {
	path := mux.Vars(r)["path"]
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRPC(w, nil, nil, &noetlError{Code: -32600, Message: fmt.Sprintf("request body over %d bytes", g.cfg.MaxBodyBytes)})
			return
		}
		return // the client went away
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		writeRPC(w, nil, nil, &noetlError{Code: -32600, Message: "batches are not supported: send one JSON-RPC request per POST"})
		return
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	// Member names are case-sensitive (JSON-RPC 2.0; go-sdk reads them so
	// on /mcp): encoding/json would take "ID" or "jsonrpC" for the real
	// ones. sdkwire.Parse reads one value and ignores what follows: Valid first.
	if !json.Valid(body) || !sdkwire.Parse(body, &msg) {
		writeRPC(w, nil, nil, &noetlError{Code: -32700, Message: "parse error: the body is not a JSON-RPC object"})
		return
	}
	// What is not a request nor a notification is answered -32600 with the
	// id when it is one (JSON-RPC 2.0 §5: null when it cannot be read): a
	// body that is no object, "jsonrpc" or "method" missing, an id that is
	// neither a string nor a number (MCP: never null).
	if body[0] != '{' {
		writeRPC(w, nil, nil, &noetlError{Code: -32600, Message: "invalid request: a JSON-RPC message must be a JSON object"})
		return
	}
	if msg.JSONRPC != "2.0" || msg.Method == "" {
		writeRPC(w, noetlID(msg.ID), nil, &noetlError{Code: -32600, Message: `invalid request: "jsonrpc" must be "2.0" and "method" is required`})
		return
	}
	if msg.ID == nil {
		// A notification: nothing to answer (JSON-RPC 2.0 §4.1).
		if msg.Method == "notifications/cancelled" {
			g.noetlCancel(r, path, msg.Params)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if noetlID(msg.ID) == nil {
		writeRPC(w, nil, nil, &noetlError{Code: -32600, Message: `invalid request: "id" must be a string or a number`})
		return
	}
	t := g.catalog.Playbook(path)
	if t == nil || g.drift.Drifted(t.Tool.Name) {
		writeRPC(w, msg.ID, nil, &noetlError{Code: codeAccessDenied, Message: fmt.Sprintf("no playbook %q is exposed over MCP", path),
			Data: map[string]any{"http_status": http.StatusNotFound}})
		return
	}
	switch msg.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		sdkwire.Parse(msg.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = defaultNoETLProtocol
		}
		writeRPC(w, msg.ID, map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": "mcpgate", "version": Version},
		}, nil)
	case "ping":
		writeRPC(w, msg.ID, map[string]any{}, nil)
	case "tools/list":
		// Under auth.list: callable, as on /mcp: a caller whose verified
		// scopes would not let it call the playbook is listed nothing.
		tools := []*mcp.Tool{t.Tool}
		if g.listCallable() && !g.mayList(sdkauth.TokenInfoFromContext(r.Context()))(t.Tool.Name) {
			tools = []*mcp.Tool{}
		}
		writeRPC(w, msg.ID, map[string]any{"tools": tools}, nil)
	case "tools/call":
		g.playbookRPCCall(w, r, msg.ID, msg.Params, t)
	default:
		writeRPC(w, msg.ID, nil, &noetlError{Code: -32601, Message: fmt.Sprintf("method %q not found: this endpoint serves initialize, ping, tools/list and tools/call", msg.Method)})
	}
}

// noetlID returns id when it is a JSON string or number, the ids a
// JSON-RPC answer may echo (MCP forbids null), else nil. id is valid JSON.
func noetlID(id json.RawMessage) json.RawMessage {
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || '0' <= id[0] && id[0] <= '9') {
		return id
	}
	return nil
}

func (g *Gateway) playbookRPCCall(w http.ResponseWriter, r *http.Request, id, raw json.RawMessage, t *Tool) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if !sdkwire.Parse(raw, &p) {
		writeRPC(w, id, nil, &noetlError{Code: -32602, Message: "invalid params: tools/call needs {\"name\", \"arguments\"}"})
		return
	}
	if p.Name != t.Tool.Name {
		writeRPC(w, id, nil, &noetlError{Code: -32602, Message: fmt.Sprintf("unknown tool %q: this endpoint serves %q", p.Name, t.Tool.Name)})
		return
	}
	if g.verifier != nil {
		// The same step-up as on /mcp, in this endpoint's words: access
		// denied with the HTTP status /mcp would have answered.
		if status, challenge, ok := g.authorizeCall(r, "tools/call", t.Tool.Name); !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			writeRPC(w, id, nil, &noetlError{Code: codeAccessDenied, Message: "access denied: the token lacks a scope this playbook needs",
				Data: map[string]any{"http_status": status}})
			return
		}
	}
	// The engine is shown what its upstream's auth mode says, exactly as
	// for a call through /mcp, never simply the inbound token.
	callReq := callRequest(r, p.Name, p.Arguments)
	r = r.WithContext(g.callTrace(r.Context(), t, r.Header))
	args, cred, err := g.startPlaybookCall(r.Context(), t, callReq, p.Arguments)
	if err != nil {
		// As on /mcp: the model can read which field to correct.
		res := &mcp.CallToolResult{}
		res.SetError(err)
		writeRPC(w, id, noetlResult{res}, nil)
		return
	}
	pb := t.Playbook
	// r.Context ends when the client hangs up: the run is then left, and
	// cancelled upstream after the runner's linger; or when the caller
	// sends notifications/cancelled naming this call: cancelled at once.
	ctx, untrack := g.noetlTrack(r, mux.Vars(r)["path"], id)
	defer untrack()
	r = r.WithContext(ctx)
	out := g.runners[t.Upstream].Run(r.Context(), playbook.Request{Tool: t.Tool.Name, Path: pb.Path, Workload: pb.Workload(args), Cred: cred, Caller: g.callerID(callReq), Cancelled: cancelledOf(r.Context())})
	g.logRun(r.Context(), t, out)
	switch out.State {
	case playbook.TimedOut:
		writeRPC(w, id, nil, &noetlError{Code: codeCeiling, Message: resultText(out.Result),
			Data: map[string]any{"execution_id": out.ExecutionID, "status": out.Status, "cancelled": out.CancelSent}})
	case playbook.Busy:
		writeRPC(w, id, nil, &noetlError{Code: codeBusy, Message: resultText(out.Result),
			Data: map[string]any{"cap": out.Cap, "limit": out.Limit}})
	case playbook.NotStarted:
		if out.HTTPStatus == http.StatusUnauthorized || out.HTTPStatus == http.StatusForbidden {
			writeRPC(w, id, nil, &noetlError{Code: codeAccessDenied, Message: "access denied: " + resultText(out.Result),
				Data: map[string]any{"http_status": out.HTTPStatus}})
			return
		}
		data := map[string]any{}
		if out.HTTPStatus != 0 {
			data["http_status"] = out.HTTPStatus
		}
		writeRPC(w, id, nil, &noetlError{Code: -32603, Message: resultText(out.Result), Data: data})
	default:
		writeRPC(w, id, noetlResult{out.Result}, nil)
	}
}

// noetlCallKey names a call in flight on the NoETL-compatible endpoint:
// its caller, and the playbook's path with the request id as go-sdk reads
// ids (sdkwire.IDKey), so that a cancellation names a call on its own
// endpoint only. ok is false for an id that names nothing.
func noetlCallKey(r *http.Request, path string, id any) (inflightKey, bool) {
	k, ok := sdkwire.IDKey(id)
	if !ok {
		return inflightKey{}, false
	}
	return inflightKey{caller: caller.FromRequest(r), id: path + "\x00" + k}, true
}

// noetlTrack registers a tools/call on the NoETL-compatible endpoint, id
// its raw JSON-RPC id, so that the caller's notifications/cancelled can
// reach it (noetlCancel). It returns the call's context and the function
// that forgets it.
func (g *Gateway) noetlTrack(r *http.Request, path string, id json.RawMessage) (context.Context, func()) {
	var v any
	if !sdkwire.Parse(id, &v) {
		return r.Context(), func() {}
	}
	key, ok := noetlCallKey(r, path, v)
	if !ok {
		return r.Context(), func() {}
	}
	return g.noetlCalls.trackKey(r.Context(), key)
}

// noetlCancel answers a notifications/cancelled POSTed to the endpoint of
// path: the same caller's call of that endpoint under params.requestId, if
// one is in flight, is cancelled, and its run cancelled upstream at once
// (the cause wraps playbook.ErrCallCancelled). Another caller's
// cancellation, or one naming no call, does nothing; either way the
// notification is answered 202 and says nothing.
func (g *Gateway) noetlCancel(r *http.Request, path string, params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if len(params) == 0 || !sdkwire.Parse(params, &p) {
		return
	}
	if key, ok := noetlCallKey(r, path, p.RequestID); ok {
		g.noetlCalls.cancelKey(key)
	}
}

// noetlResult is a tools/call result as NoETL's endpoint writes it: with
// "isError" always there, false included (go-sdk's CallToolResult leaves
// false out), as NoETL's own wire examples show it.
type noetlResult struct{ *mcp.CallToolResult }

func (r noetlResult) MarshalJSON() ([]byte, error) {
	raw, err := json.Marshal(r.CallToolResult)
	if err != nil || r.IsError || len(raw) < 2 || raw[len(raw)-1] != '}' {
		return raw, err
	}
	// Append the member rather than decode and encode the result again (a
	// run's status may be 256 KiB): the object is go-sdk's, without it.
	sep := ","
	if len(raw) == 2 { // {}
		sep = ""
	}
	return append(raw[:len(raw)-1], sep+`"isError":false}`...), nil
}

func resultText(res *mcp.CallToolResult) string {
	if res != nil && len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// noetlError is a JSON-RPC error object.
type noetlError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// writeRPC writes a JSON-RPC response, HTTP 200: the endpoint's protocol
// outcomes are all in the body, as NoETL's clients expect.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, e *noetlError) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *noetlError     `json:"error,omitempty"`
	}{"2.0", id, result, e}
	raw, err := json.Marshal(resp)
	if err != nil {
		raw = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"the gateway could not encode its answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(raw)
}
