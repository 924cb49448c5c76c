package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// The MCP tasks extension (io.modelcontextprotocol/tasks, the draft of
// modelcontextprotocol/experimental-ext-tasks, SEP-2663) for playbook tools,
// in 2026-07-28 requests over HTTP at /mcp, stateless and stateful alike.
//
// It is the same task as the 2025-11-25 tasks of tasks.go, spoken in the
// extension's words: the same sealed, caller-bound ids (any replica with the
// same tasks.key_env answers for any task), the same run on the engine, the
// same polls and cancel route. What differs:
//   - Negotiation is per request. server/discover advertises the extension
//     (capabilities.extensions); a tools/call whose
//     _meta["io.modelcontextprotocol/clientCapabilities"].extensions names
//     it, for a playbook tool, is answered at once with a CreateTaskResult
//     (resultType "task", ttlMs, pollIntervalMs: the playbook's
//     poll_interval). The client sends no task parameter, and tools/list
//     marks no tool: the draft removed execution.taskSupport, and the server
//     alone decides. A call from a client that did not declare it runs as
//     before, to its end, in one answer.
//   - tasks/get answers the DetailedTask, with the call's result inline once
//     the run is terminal. A failed playbook is "completed" with the
//     isError result the call would have answered (the draft keeps "failed"
//     for JSON-RPC errors, which a started run never is); a run that passed
//     its ceiling likewise; a cancelled one is "cancelled".
//   - tasks/cancel acknowledges with an empty result: it calls the engine's
//     cancel route while the run goes on, and does nothing for a task
//     already terminal (cancellation is cooperative in the draft). An
//     engine without a cancel route is an error (-32602), as at 2025-11-25:
//     acknowledging would say the run stops when it does not.
//   - tasks/update acknowledges for a known task and ignores its
//     inputResponses: a playbook run never asks for input (never
//     input_required), so no key is ever outstanding, and the draft says to
//     ignore responses for keys that are not.
//   - No tasks/result (the draft removed it), no tasks/list (nor in the
//     draft), no notifications/tasks (subscriptions/listen is go-sdk's, and
//     it knows no task ids).
//   - tasks/* must carry the task id in the Mcp-Name header (the draft's
//     routing header) and the method in Mcp-Method; a missing or different
//     one is refused with -32020 (header mismatch, HTTP 400), as go-sdk
//     refuses a tools/call whose Mcp-Name is not its tool's name. A tasks/*
//     request from a client that did not declare the extension is refused
//     with -32021 (missing required client capability) naming it.
//
// The front door answers these requests (frontDoor.taskExtension) before
// go-sdk, which knows none of them, keyed on the request's protocol version
// and not on the gateway's mode, so that a stateful gateway answers them as
// a stateless one does.

// taskExtension is the extension's identifier.
const taskExtension = "io.modelcontextprotocol/tasks"

// taskExtVersions are the protocol versions (the MCP-Protocol-Version
// header) the front door answers the extension in: those go-sdk v1.8.0
// serves that have it. A later version is go-sdk's to refuse.
var taskExtVersions = []string{"2026-07-28"}

// Codes of the 2026-07-28 spec (go-sdk's mcp.CodeHeaderMismatch,
// mcp.CodeMissingRequiredClientCapabilities).
const (
	codeHeaderMismatch        = mcp.CodeHeaderMismatch
	codeMissingClientCapacity = mcp.CodeMissingRequiredClientCapabilities
)

// extParams is every params field the extension's requests read, as
// go-sdk's decoder reads them.
type extParams struct {
	Meta struct {
		Version string `json:"io.modelcontextprotocol/protocolVersion"`
		Caps    *struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	TaskID         *string         `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

// declared reports whether the request's client capabilities name the
// extension, with an object (its settings; none are defined yet).
func (p *extParams) declared() bool {
	if p.Meta.Caps == nil {
		return false
	}
	raw := bytes.TrimSpace(p.Meta.Caps.Extensions[taskExtension])
	return len(raw) > 0 && raw[0] == '{'
}

// extTask is the extension's Task (CreateTaskResult with resultType "task",
// GetTaskResult with "complete" and, once terminal, the result).
type extTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"` // working | completed | cancelled
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// emptyAck is the answer of tasks/cancel and tasks/update.
var emptyAck = json.RawMessage(`{"resultType":"complete"}`)

// taskExtension answers the extension's requests (see serveExt), in either
// mode. With no playbook tool it does nothing, and for a request of another
// protocol version it reads one header.
func (f *frontDoor) taskExtension(x *exchange) bool {
	if !x.rpc {
		return true
	}
	d, done := f.taskDoor()
	defer done()
	return !(d != nil && d.serveExt(x.w, x.r, x.body, x.msg))
}

// serveExt answers r when it is a request of the tasks extension: a
// tools/call of a playbook tool from a client that declared the extension,
// or tasks/get, tasks/cancel or tasks/update. It reports whether it did;
// when it returns false it has written nothing and r goes on to go-sdk,
// which refuses what is malformed in its own words.
func (d *taskDoor) serveExt(w http.ResponseWriter, r *http.Request, body []byte, msgOf func() *message) bool {
	if !slices.Contains(taskExtVersions, r.Header.Get("Mcp-Protocol-Version")) ||
		(len(d.required) == 0 && !bytes.Contains(body, []byte("tasks"))) || !sdkwire.WouldRead(r, taskExtVersions) {
		return false
	}
	msg := msgOf()
	if !msg.ok || msg.badMethod || msg.VersionTag != "2.0" {
		return false
	}
	method := msg.method
	var isTasks bool
	switch method {
	case "tools/call":
	case "tasks/get", "tasks/cancel", "tasks/update":
		isTasks = true
	default:
		return false
	}
	id, ok := sdkwire.EchoID(msg.ID)
	if !ok {
		return false // a notification, or an id go-sdk answers in its own way
	}
	var p extParams
	parsed := len(msg.Params) > 0 && sdkwire.Parse(msg.Params, &p)
	if !isTasks {
		// A tools/call is a task only when everything go-sdk checks of it
		// holds; otherwise go-sdk answers it (a plain call, or its refusal).
		t := d.byName[p.Name]
		if !parsed || p.Meta.Caps == nil || t == nil || !t.IsPlaybook() || p.Meta.Version != r.Header.Get("Mcp-Protocol-Version") ||
			r.Header.Get("Mcp-Method") != method || r.Header.Get("Mcp-Name") != p.Name {
			return false
		}
		if !p.declared() {
			if !d.required[p.Name] {
				return false // a plain call
			}
			d.g.metrics.rpcMethod(method)
			writeExt(w, id, nil, missingTaskExtension(fmt.Sprintf("tool %q runs only as a task", p.Name)))
			return true
		}
		d.g.metrics.rpcMethod(method)
		result, rerr := d.createExt(r, t, p.Arguments)
		writeExt(w, id, result, rerr)
		return true
	}
	d.g.metrics.rpcMethod(method)
	if rerr := d.checkExt(r, method, parsed, &p); rerr != nil {
		writeExt(w, id, nil, rerr)
		return true
	}
	var (
		result any
		rerr   *jsonrpc.Error
	)
	switch method {
	case "tasks/get":
		result, rerr = d.getExt(r, *p.TaskID)
	case "tasks/cancel":
		result, rerr = d.cancelExt(r, *p.TaskID)
	case "tasks/update":
		result, rerr = d.updateExt(r, *p.TaskID, p.InputResponses)
	}
	writeExt(w, id, result, rerr)
	return true
}

// checkExt applies to a tasks/* request what go-sdk applies to any
// 2026-07-28 request (the _meta fields, and the headers that must repeat
// the body), and what the extension asks: the client declared it, and
// Mcp-Name carries the task id.
func (d *taskDoor) checkExt(r *http.Request, method string, parsed bool, p *extParams) *jsonrpc.Error {
	switch {
	case !parsed:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params must be an object with the task's taskId"}
	case p.Meta.Version == "":
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("missing or invalid _meta field %q", mcp.MetaKeyProtocolVersion)}
	case p.Meta.Version != r.Header.Get("Mcp-Protocol-Version"):
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("Mcp-Protocol-Version header %q does not match request %s %q",
			r.Header.Get("Mcp-Protocol-Version"), mcp.MetaKeyProtocolVersion, p.Meta.Version)}
	case p.Meta.Caps == nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("missing or invalid _meta field %q", mcp.MetaKeyClientCapabilities)}
	case r.Header.Get("Mcp-Method") == "":
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: "missing required Mcp-Method header"}
	case r.Header.Get("Mcp-Method") != method:
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("header mismatch: Mcp-Method header value %q does not match body value %q", r.Header.Get("Mcp-Method"), method)}
	case !p.declared():
		return missingTaskExtension(method + " is a method of the tasks extension")
	case p.TaskID == nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params.taskId is required"}
	case r.Header.Get("Mcp-Name") == "":
		// The id itself is never echoed: it is the caller's handle on the task.
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("missing required Mcp-Name header for method %q: it carries params.taskId", method)}
	case r.Header.Get("Mcp-Name") != *p.TaskID:
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("header mismatch: the Mcp-Name header does not match params.taskId of %s", method)}
	}
	return nil
}

// missingTaskExtension is the -32021 of a request that needs the extension
// declared: the spec's data names it, and the message says why.
func missingTaskExtension(why string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: codeMissingClientCapacity,
		Message: fmt.Sprintf("missing required client capability: %s; declare the %s extension in _meta[%q].extensions", why, taskExtension, mcp.MetaKeyClientCapabilities),
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + taskExtension + `":{}}}}`)}
}

// createExt starts the run and answers the CreateTaskResult. The ttl is
// tasks.ttl (the client asks for none in the extension).
func (d *taskDoor) createExt(r *http.Request, t *Tool, args json.RawMessage) (any, *jsonrpc.Error) {
	id, c, rerr := d.start(r, t, args, nil, "", nil) // sessionless: no stream to notify
	if rerr != nil {
		return nil, rerr
	}
	runner := d.g.runners[t.Upstream]
	if c.Error != "" {
		// Born ended: the call's isError result, at once.
		return d.extWire("task", id, c, runner, taskState{playbook.Failed, c.Error, bornFailed(c)})
	}
	return d.extWire("task", id, c, runner, taskState{msg: fmt.Sprintf("playbook %s is running (execution %s)", c.Path, c.Execution)})
}

func (d *taskDoor) getExt(r *http.Request, id string) (any, *jsonrpc.Error) {
	c, t, rerr := d.open(r, id)
	if rerr != nil {
		return nil, rerr
	}
	st, rerr := d.status(r, c, t)
	if rerr != nil {
		return nil, rerr
	}
	return d.extWire("complete", id, c, d.g.runners[t.Upstream], st)
}

// cancelExt calls the engine's cancel route for a run going on; a task
// already terminal is acknowledged as it is.
func (d *taskDoor) cancelExt(r *http.Request, id string) (any, *jsonrpc.Error) {
	c, t, rerr := d.open(r, id)
	if rerr != nil {
		return nil, rerr
	}
	s, rerr := d.check(r, c, t)
	if rerr != nil {
		return nil, rerr
	}
	if s.State == "" {
		if rerr := d.cancelRun(r, c, t); rerr != nil {
			return nil, rerr
		}
	}
	return emptyAck, nil
}

// updateExt acknowledges a known task's inputResponses, which it ignores:
// a playbook run never has an input request outstanding.
func (d *taskDoor) updateExt(r *http.Request, id string, responses json.RawMessage) (any, *jsonrpc.Error) {
	if raw := bytes.TrimSpace(responses); len(raw) == 0 || raw[0] != '{' {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tasks/update: params.inputResponses must be an object (of responses by inputRequests key)"}
	}
	if _, _, rerr := d.open(r, id); rerr != nil {
		return nil, rerr
	}
	return emptyAck, nil
}

// extWire is the task as the extension shapes it (see the notes at the top
// of this file for the status mapping).
func (d *taskDoor) extWire(resultType, id string, c *taskClaims, runner *playbook.Runner, st taskState) (any, *jsonrpc.Error) {
	w := d.wire(id, c, runner, st.state, st.msg)
	out := extTask{ResultType: resultType, TaskID: id, Status: "working", StatusMessage: w.StatusMessage,
		CreatedAt: w.CreatedAt, LastUpdatedAt: w.LastUpdatedAt, TTLMs: w.TTL, PollIntervalMs: w.PollInterval}
	switch {
	case st.state == playbook.Cancelled:
		out.Status = "cancelled"
	case st.state != "":
		out.Status = "completed"
		res := *st.result
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		raw, err := completeResult(&res)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("marshaling the call's result: %v", err)}
		}
		out.Result = raw
	}
	return out, nil
}

// completeResult is res as a 2026-07-28 tools/call answers it: with
// resultType "complete", which every 2026-07-28 result carries (go-sdk
// stamps its own answers; a result inlined in a task is the gateway's to
// stamp), and which the ext-tasks client requires of the inline result.
func completeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	raw, err := res.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	top["resultType"] = json.RawMessage(`"complete"`)
	return sdkwire.Marshal(top)
}

// writeExt answers a 2026-07-28 request as go-sdk does: a result as JSON;
// an error with the HTTP status the 2026-07-28 transport gives its code
// (go-sdk's extractErrorStatus: 404 for -32601; 400 for -32602, -32020,
// -32021, -32022), and its data.
func writeExt(w http.ResponseWriter, id []byte, result any, rerr *jsonrpc.Error) {
	if rerr == nil {
		data, err := sdkwire.Marshal(result)
		if err == nil {
			sdkwire.WriteResult(w, id, data)
			return
		}
		rerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("marshaling the result: %v", err)}
	}
	status := http.StatusOK
	switch rerr.Code {
	case jsonrpc.CodeMethodNotFound:
		status = http.StatusNotFound
	case jsonrpc.CodeInvalidParams, codeHeaderMismatch, codeMissingClientCapacity, mcp.CodeUnsupportedProtocolVersion:
		status = http.StatusBadRequest
	}
	body, _ := sdkwire.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, rerr})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// discoverResult adds the extension to go-sdk's server/discover answer.
// go-sdk builds the capabilities afresh for each answer, so they are this
// answer's own to change.
func discoverResult(x *mcp.DiscoverResult) *mcp.DiscoverResult {
	if x.Capabilities == nil {
		x.Capabilities = &mcp.ServerCapabilities{}
	}
	x.Capabilities.AddExtension(taskExtension, map[string]any{})
	return x
}
