package gateway

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// MCP tasks (protocol 2025-11-25, experimental in the spec) for playbook
// tools, over HTTP at /mcp.
//
// A playbook run is what tasks exist for: a client sends tools/call with
// params.task, gets a task at once, polls tasks/get and fetches the result
// with tasks/result. go-sdk v1.8.0 knows none of this (it drops params.task
// when it decodes tools/call), so the front door answers these requests
// itself (taskDoor.serve), before go-sdk sees them, and go-sdk's own answers
// to initialize and tools/list get the tasks capability and each playbook
// tool's execution.taskSupport added by a receiving middleware
// (taskDoor.middleware) — go-sdk's documented seam for changing a method's
// result; its ServerCapabilities and Tool have no field for either.
//
// A task id is self-describing and sealed (AES-256-GCM, key from
// TasksConfig.KeyEnv): it holds the upstream, the playbook, the engine's
// execution id, a hash of the caller and the task's creation time and ttl.
// So any replica of a stateless gateway that has the key can answer for any
// task, without shared state: tasks/get polls the engine once, tasks/result
// polls until the run ends, tasks/cancel calls the cancel route. An id
// that does not open under the key, that another caller presents, or whose
// ttl has passed is "not found" (-32602, as the spec says for an unknown
// task). The id holds a hash of the caller's identity, never a credential.
//
// What this does not do, and why:
//   - tasks/list lists the caller's tasks from the store of task records
//     (see tasklist.go): a replica lists what any replica sharing its store
//     made, so a fleet of replicas each with its own memory store lists
//     per replica; use state.backend redis.
//   - A task's state is the engine's. A cancelled task reads "cancelled"
//     because the engine then reports the run CANCELLED (or CANCELED) in
//     its status (at the terminal pointer, NoETL's "status"); an engine that
//     reports a cancelled run otherwise shows it "failed".
//   - notifications/tasks/status (optional in the spec) is sent on a
//     stateful session's stream when a task made on it ends (taskstatus.go);
//     a stateless POST has no stream to send it on.
//   - Over stdio and in 2026-07-28 requests there are no tasks (the
//     2026-07-28 tasks extension is another protocol).

// minTaskKeyBytes is the least key material TasksConfig.KeyEnv may hold.
const minTaskKeyBytes = 32

// taskSecret returns the text of the variable cfg.KeyEnv names: "" when it
// names none, an error when the variable is unset or too short. The task
// key seals task ids (taskKey) and keys the caller digests (shared.go's
// callerKey), each under a label of its own.
func taskSecret(cfg TasksConfig) (string, error) {
	if cfg.KeyEnv == "" {
		return "", nil
	}
	v := os.Getenv(cfg.KeyEnv)
	if len(v) < minTaskKeyBytes {
		what := "is not set"
		if v != "" {
			what = fmt.Sprintf("holds %d bytes", len(v))
		}
		return "", fmt.Errorf("tasks.key_env: $%s %s; a task key needs at least %d bytes (e.g. openssl rand -base64 32)", cfg.KeyEnv, what, minTaskKeyBytes)
	}
	return v, nil
}

// processTaskKey is the random key task ids are sealed with when no
// tasks.key_env names one: drawn once per process, so that a reload (a new
// Gateway beside the old) still opens the ids the old one made, as the
// caller digests' process key does (caller.ProcessKey).
var processTaskKey = sync.OnceValue(func() (k [32]byte) {
	rand.Read(k[:])
	return k
})

// taskKey returns the AEAD that seals task ids: from the variable
// cfg.KeyEnv names, or random per process (with a warning) when it names
// none.
func taskKey(cfg TasksConfig, logger *slog.Logger) (cipher.AEAD, error) {
	var key [32]byte
	v, err := taskSecret(cfg)
	switch {
	case err != nil:
		return nil, err
	case v == "":
		key = processTaskKey()
		logger.Warn("tasks: no tasks.key_env: task ids are sealed with a random key, so MCP tasks work only against this process (across its reloads) and not across a restart or between replicas")
	default:
		// Any text of enough entropy will do: SHA-256 makes it an AES-256
		// key, under a label of its own so the same secret used elsewhere
		// gives another key.
		key = sha256.Sum256([]byte("mcpgate task id key v1\x00" + v))
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// taskClaims are what a task id holds, sealed.
type taskClaims struct {
	Upstream  string `json:"u"`
	Path      string `json:"p"`           // the playbook
	Execution string `json:"x,omitempty"` // the engine's execution id; "" when the run never started
	Caller    []byte `json:"c"`           // callerHash of whoever created it
	Created   int64  `json:"t"`           // Unix milliseconds
	TTL       int64  `json:"l"`           // milliseconds
	// Error is why the run never started (invalid arguments, the engine
	// refused): the task is born failed, and this is its result's text.
	Error string `json:"e,omitempty"`
}

// taskIDLabel is the additional data of every sealed id: an id of another
// kind or version never opens as a task id.
var taskIDLabel = []byte("mcpgate/task/v1")

func sealTask(aead cipher.AEAD, c *taskClaims) (string, error) {
	plain, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, taskIDLabel)), nil
}

func openTask(aead cipher.AEAD, id string) (*taskClaims, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) < aead.NonceSize() {
		return nil, false
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], taskIDLabel)
	if err != nil {
		return nil, false
	}
	var c taskClaims
	if json.Unmarshal(plain, &c) != nil {
		return nil, false
	}
	return &c, true
}

// callerHash is the caller a task id seals (see package caller): the first
// 16 bytes of its digest, which holds no credential.
func (d *taskDoor) callerHash(r *http.Request) []byte {
	c := d.g.callers.Digest(caller.FromRequest(r))
	return c[:16]
}

// taskDoor answers the task requests at /mcp (see the notes at the top of
// this file). Safe for concurrent use.
type taskDoor struct {
	g      *Gateway
	aead   cipher.AEAD
	maxTTL time.Duration
	byName map[string]*Tool  // every tool served, by name
	byPath map[string]*Tool  // the playbook tools served, by playbook path
	names  map[string]string // the playbook tools' names, and their taskSupport
	// required are the playbook tools a client that can have a task must
	// call as one (Playbook.TaskRequired); empty for most gateways.
	required map[string]bool
	now      func() time.Time // tests
}

// newTaskDoor returns nil (no tasks) when no playbook tool is served.
func newTaskDoor(g *Gateway, served []*Tool) (*taskDoor, error) {
	d := &taskDoor{g: g, maxTTL: g.cfg.Tasks.TTL, byName: map[string]*Tool{}, byPath: map[string]*Tool{}, now: time.Now}
	for _, t := range served {
		d.byName[t.Tool.Name] = t
		if t.IsPlaybook() {
			d.byPath[t.Playbook.Path] = t
		}
	}
	if len(d.byPath) == 0 {
		return nil, nil
	}
	d.names = taskToolNames(served)
	for name, support := range d.names {
		if support == "required" {
			if d.required == nil {
				d.required = map[string]bool{}
			}
			d.required[name] = true
		}
	}
	if d.maxTTL <= 0 {
		d.maxTTL = DefaultTaskTTL
	}
	var err error
	if d.aead, err = taskKey(g.cfg.Tasks, g.logger); err != nil {
		return nil, err
	}
	return d, nil
}

// The wire shapes of 2025-11-25 tasks (schema.ts: Task, CreateTaskResult,
// ListTasksResult).
type taskWire struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"` // working | completed | failed | cancelled
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// Keys of _meta the tasks spec defines.
const (
	metaRelatedTask       = "io.modelcontextprotocol/related-task"
	metaImmediateResponse = "io.modelcontextprotocol/model-immediate-response"
)

// taskParams is every params field the task requests read.
type taskParams struct {
	Meta      map[string]any  `json:"_meta"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      *struct {
		TTL *float64 `json:"ttl"`
	} `json:"task"`
	TaskID string `json:"taskId"`
	Cursor string `json:"cursor"` // tasks/list
}

// serve answers r when it is a task request: a tools/call with params.task,
// tasks/get, tasks/result, tasks/cancel or tasks/list. It reports whether it
// did; when it returns false it has written nothing and r goes on to go-sdk.
// body is r's body, already checked to be one JSON object.
func (d *taskDoor) serve(w http.ResponseWriter, r *http.Request, body []byte, msgOf func() *message) bool {
	if d == nil {
		return false
	}
	// Only a body that names a task is a task request, but with a tool
	// whose task is required a plain tools/call may be one to refuse.
	named := bytes.Contains(body, []byte(`"task`))
	if (!named && len(d.required) == 0) || !d.accepts(r) {
		return false
	}
	// The message as go-sdk and the step-up check (peekCall) read it: its
	// decoder, case-sensitive keys. A decoder that folded case or let a
	// later "Method" win would see a tools/call the step-up check saw as a
	// ping.
	msg := msgOf()
	if !msg.ok || msg.badMethod || msg.VersionTag != "2.0" {
		return false
	}
	method := msg.method
	if !named && method != "tools/call" {
		return false
	}
	id, ok := sdkwire.EchoID(msg.ID)
	if !ok {
		return false // a notification, or an id go-sdk would answer in its own way
	}
	var p taskParams
	if len(msg.Params) > 0 && !bytes.Equal(msg.Params, []byte("null")) && !sdkwire.Parse(msg.Params, &p) {
		return false // go-sdk says what is wrong with them
	}
	if _, ok := p.Meta[mcp.MetaKeyProtocolVersion]; ok {
		return false // a 2026-07-28 request: not these tasks
	}
	var (
		result any
		rerr   *jsonrpc.Error
	)
	switch method {
	case "tools/call":
		if p.Task == nil && (!d.required[p.Name] || r.Header.Get("Mcp-Protocol-Version") < "2025-11-25") {
			return false // a plain call (a required tool's too, at a version without tasks)
		}
		if p.Task == nil {
			// The spec (2025-11-25): a tool whose taskSupport is
			// "required" called without params.task gets -32601.
			rerr = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("tool %q requires task-augmented execution (execution.taskSupport is required): call it with params.task", p.Name)}
			break
		}
		// The run's end is told to the session (notifications/tasks/status)
		// only once this answer, which names the task, is on its way.
		answered := make(chan struct{})
		defer func() {
			http.NewResponseController(w).Flush()
			close(answered)
		}()
		result, rerr = d.create(r, &p, answered)
	case "tasks/get":
		result, rerr = d.get(r, p.TaskID)
	case "tasks/result":
		result, rerr = d.result(r, p.TaskID)
	case "tasks/cancel":
		result, rerr = d.cancel(r, p.TaskID)
	case "tasks/list":
		result, rerr = d.list(r, p.Cursor)
	default:
		return false
	}
	d.g.metrics.rpcMethod(method)
	d.record(r, method, result, rerr)
	if rerr != nil {
		sdkwire.WriteError(w, id, rerr.Code, rerr.Message)
		return true
	}
	data, err := sdkwire.Marshal(result)
	if err != nil {
		sdkwire.WriteError(w, id, jsonrpc.CodeInternalError, fmt.Sprintf("marshaling the result: %v", err))
		return true
	}
	sdkwire.WriteResult(w, id, data)
	return true
}

// accepts applies the checks go-sdk's handler applies to any POST (see
// sdkwire.WouldRead): DNS-rebinding protection, a protocol version the
// tasks exist in (or none), and an Accept that allows the SSE answer. A
// request that fails one goes to go-sdk, which refuses it in its words.
func (d *taskDoor) accepts(r *http.Request) bool {
	if sdkwire.LocalLoopback(r) && !sdkwire.IsLoopback(r.Host) {
		return false
	}
	if !slices.Contains(fastVersions, r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	jsonOK, streamOK := sdkwire.Accepts(r.Header.Values("Accept"))
	return jsonOK && streamOK && len(r.Header.Values("Last-Event-ID")) == 0
}

// notFound is the spec's error for an unknown task: the same for an id
// that does not open, another caller's task and a tool no longer served,
// so that holding an id reveals nothing.
var errTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "failed to retrieve task: task not found"}

// callRequest is what go-sdk would hand a tool handler for this POST: the
// credentials and the log line need it.
func callRequest(r *http.Request, name string, args json.RawMessage) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{
		Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args},
		Extra:  &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
}

// create starts a playbook run for a task-augmented tools/call and answers
// the CreateTaskResult. A call that cannot start (invalid arguments, no
// credential, the engine refused) is a task born failed whose result says
// why, as the call's isError result would have.
func (d *taskDoor) create(r *http.Request, p *taskParams, answered <-chan struct{}) (any, *jsonrpc.Error) {
	t, ok := d.byName[p.Name]
	if !ok && d.g.search != nil && d.g.search.meta[p.Name] != nil {
		// A search meta-tool has no execution.taskSupport; the playbook
		// it would run does, by its own name.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("tool %q does not support task-augmented calls; call it without params.task, or call the tool it names by its own name with params.task", p.Name)}
	}
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)}
	}
	if !t.IsPlaybook() {
		// The spec: a tool whose taskSupport is forbidden (absent) SHOULD
		// get -32601 when called as a task.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("tool %q does not support task-augmented calls (no execution.taskSupport); call it without params.task", p.Name)}
	}
	// A task made on a session is told of its end on the session's
	// stream (taskstatus.go); the session stage has checked it is the
	// caller's.
	var session string
	if d.g.streams != nil {
		session = r.Header.Get(sessionIDHeader)
	}
	id, c, rerr := d.start(r, t, p.Arguments, p.Task.TTL, session, answered)
	if rerr != nil {
		return nil, rerr
	}
	runner := d.g.runners[t.Upstream]
	var task taskWire
	if c.Error != "" {
		task = d.wire(id, c, runner, playbook.Failed, c.Error)
	} else {
		task = d.wire(id, c, runner, "", "")
	}
	return map[string]any{"task": task, "_meta": map[string]any{
		metaImmediateResponse: fmt.Sprintf("Playbook %s is running as an MCP task (execution %s); its result comes with tasks/result.", c.Path, c.Execution),
	}}, nil
}

// start starts playbook tool t's run for a task (of either protocol: the
// 2025-11-25 tasks here, the tasks extension in tasksext.go) and seals its
// id. asked is the ttl the client asked for (nil: none). A call that cannot
// start (invalid arguments, no credential, the engine refused) is a task
// born failed: c.Error says why. A task made on session ("" for none) sends
// it notifications/tasks/status when its run ends (notifyEnded), not before
// answered is closed (the answer that names the task has been written).
func (d *taskDoor) start(r *http.Request, t *Tool, args json.RawMessage, asked *float64, session string, answered <-chan struct{}) (string, *taskClaims, *jsonrpc.Error) {
	runner := d.g.runners[t.Upstream]
	now := d.now()
	c := &taskClaims{Upstream: t.Upstream, Path: t.Playbook.Path, Caller: d.callerHash(r), Created: now.UnixMilli(), // the run's start, once known
		TTL: d.grantTTL(asked, runner.Options().Timeout).Milliseconds()}
	var sealedID string // the task's id once sealed, for the run's Ended ("" until then, or when sealing failed)
	req := callRequest(r, t.Tool.Name, args)
	ctx := d.g.callTrace(r.Context(), t, r.Header)
	var out *playbook.Outcome
	if args, cred, err := d.g.startPlaybookCall(ctx, t, req, args); err != nil {
		c.Error = cutText(err.Error())
	} else {
		run := playbook.Request{Tool: t.Tool.Name, Path: t.Playbook.Path, Workload: t.Playbook.Workload(args), Cred: cred, Caller: d.g.callerID(req)}
		if session != "" {
			sealed := make(chan string, 1)
			defer func() { sealed <- sealedID }()
			run.Ended = d.notifyEnded(session, c, runner, sealed, answered)
		}
		var begun time.Time
		c.Execution, begun, out = runner.Start(ctx, run)
		if !begun.IsZero() {
			// The task is the run: created when it began (earlier, when
			// the call joined a run already going), so that the task's
			// ceiling is the run's own.
			c.Created = begun.UnixMilli()
		}
		if out != nil {
			c.Error = statusText(out.Result)
			d.g.logRun(ctx, t, out)
		}
	}
	id, err := sealTask(d.aead, c)
	if err != nil {
		return "", nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("sealing the task id: %v", err)}
	}
	sealedID = id
	d.g.logger.LogAttrs(ctx, slog.LevelInfo, "playbook task",
		slog.String("action", "create"), slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.String("execution_id", c.Execution), slog.Bool("failed", c.Error != ""))
	return id, c, nil
}

// grantTTL is the task's ttl: the client's, within [timeout, maxTTL].
func (d *taskDoor) grantTTL(asked *float64, timeout time.Duration) time.Duration {
	ttl := d.maxTTL
	if asked != nil && *asked > 0 {
		if a := time.Duration(*asked * float64(time.Millisecond)); a < ttl {
			ttl = max(a, timeout)
		}
	}
	return ttl
}

// open finds the task an id names, for this caller.
func (d *taskDoor) open(r *http.Request, id string) (*taskClaims, *Tool, *jsonrpc.Error) {
	c, ok := openTask(d.aead, id)
	if !ok || subtle.ConstantTimeCompare(c.Caller, d.callerHash(r)) != 1 {
		return nil, nil, errTaskNotFound
	}
	t := d.byPath[c.Path]
	if t == nil || t.Upstream != c.Upstream {
		return nil, nil, errTaskNotFound
	}
	if d.now().After(time.UnixMilli(c.Created + c.TTL)) {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("failed to retrieve task: task has expired (its ttl of %s has passed)", time.Duration(c.TTL)*time.Millisecond)}
	}
	return c, t, nil
}

// deadline is a task's run's ceiling: its creation plus the runner's
// timeout (the runner that drives it cancels it then).
func deadline(c *taskClaims, runner *playbook.Runner) time.Time {
	return time.UnixMilli(c.Created).Add(runner.Options().Timeout)
}

// credential is what the engine is shown for this request.
func (d *taskDoor) credential(r *http.Request, t *Tool) (upstream.Credentials, *jsonrpc.Error) {
	cred, err := d.g.credentials(r.Context(), t, callRequest(r, t.Tool.Name, nil))
	if err != nil {
		return cred, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the gateway could not obtain a credential for upstream %s", t.Upstream)}
	}
	return cred, nil
}

// check polls the task's run once.
func (d *taskDoor) check(r *http.Request, c *taskClaims, t *Tool) (*playbook.Snapshot, *jsonrpc.Error) {
	if c.Error != "" {
		return &playbook.Snapshot{State: playbook.Failed}, nil
	}
	cred, rerr := d.credential(r, t)
	if rerr != nil {
		return nil, rerr
	}
	s, err := d.g.runners[t.Upstream].Check(r.Context(), c.Execution, c.Path, cred)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("the status of playbook %s (execution %s) could not be read: %v", c.Path, c.Execution, err)}
	}
	return s, nil
}

func (d *taskDoor) get(r *http.Request, id string) (any, *jsonrpc.Error) {
	c, t, rerr := d.open(r, id)
	if rerr != nil {
		return nil, rerr
	}
	st, rerr := d.status(r, c, t)
	if rerr != nil {
		return nil, rerr
	}
	return d.wire(id, c, d.g.runners[t.Upstream], st.state, st.msg), nil
}

// taskState is where a task's run stands, as either protocol's tasks/get
// reports it.
type taskState struct {
	state playbook.State // "" while the run goes on
	msg   string         // the statusMessage
	// result is the call's result once the run is terminal, as the call
	// would have answered it (IsError unless it succeeded); nil while it
	// goes on.
	result *mcp.CallToolResult
}

// status polls the task's run once and says where it stands.
func (d *taskDoor) status(r *http.Request, c *taskClaims, t *Tool) (taskState, *jsonrpc.Error) {
	s, rerr := d.check(r, c, t)
	if rerr != nil {
		return taskState{}, rerr
	}
	runner := d.g.runners[t.Upstream]
	switch {
	case c.Error != "":
		return taskState{playbook.Failed, c.Error, bornFailed(c)}, nil
	case s.State == "" && d.now().After(deadline(c, runner)):
		// Past its ceiling: the runner that drives it cancels it (if the
		// engine can); tasks/result says so too.
		msg := runner.CeilingText(c.Path, c.Execution)
		return taskState{playbook.TimedOut, msg, ceilingResult(c, msg)}, nil
	case s.State == playbook.Cancelled && !d.now().Before(deadline(c, runner)):
		// Cancelled by the runner at the ceiling, not by request.
		msg := runner.CeilingText(c.Path, c.Execution) + "; it was cancelled upstream"
		return taskState{playbook.TimedOut, msg, ceilingResult(c, msg)}, nil
	case s.State == "":
		return taskState{msg: runningMessage(c.Path, s.Progress)}, nil
	}
	return taskState{s.State, statusText(s.Result), s.Result}, nil
}

// bornFailed is the result of a task whose run never started: why, as the
// call's isError result would have said it.
func bornFailed(c *taskClaims) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: c.Error}},
		Meta: mcp.Meta{playbook.MetaPath: c.Path}}
}

// ceilingResult is the result of a task whose run passed its ceiling.
func ceilingResult(c *taskClaims, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}},
		Meta: mcp.Meta{playbook.MetaPath: c.Path, playbook.MetaExecutionID: c.Execution}}
}

// result waits for the run to end (at most until its ceiling) and answers
// its CallToolResult, as the call would have, with the task named in _meta.
func (d *taskDoor) result(r *http.Request, id string) (any, *jsonrpc.Error) {
	c, t, rerr := d.open(r, id)
	if rerr != nil {
		return nil, rerr
	}
	var res *mcp.CallToolResult
	if c.Error != "" {
		res = bornFailed(c)
	} else {
		cred, rerr := d.credential(r, t)
		if rerr != nil {
			return nil, rerr
		}
		runner := d.g.runners[t.Upstream]
		out, err := runner.Await(r.Context(), c.Execution, c.Path, cred, deadline(c, runner))
		if err != nil {
			// The client went away: nobody reads this.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request ended before the task did"}
		}
		d.g.logRun(r.Context(), t, out)
		res = out.Result
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[metaRelatedTask] = map[string]string{"taskId": id}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	data, err := res.MarshalJSON()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("marshaling call result: %v", err)}
	}
	return json.RawMessage(data), nil
}

// cancel cancels the run through the engine's cancel route. A task
// already terminal cannot be (the spec: -32602), nor can one whose engine
// has no cancel route.
func (d *taskDoor) cancel(r *http.Request, id string) (any, *jsonrpc.Error) {
	c, t, rerr := d.open(r, id)
	if rerr != nil {
		return nil, rerr
	}
	s, rerr := d.check(r, c, t)
	if rerr != nil {
		return nil, rerr
	}
	if s.State != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("cannot cancel task: it is already %s", taskStatus(s.State))}
	}
	if rerr := d.cancelRun(r, c, t); rerr != nil {
		return nil, rerr
	}
	return d.wire(id, c, d.g.runners[t.Upstream], playbook.Cancelled,
		fmt.Sprintf("cancelled by request; the engine cancelled execution %s", c.Execution)), nil
}

// cancelRun cancels a task's run, still going on, through the engine's
// cancel route. An engine without one is an error: the run goes on.
func (d *taskDoor) cancelRun(r *http.Request, c *taskClaims, t *Tool) *jsonrpc.Error {
	runner := d.g.runners[t.Upstream]
	cred, rerr := d.credential(r, t)
	if rerr != nil {
		return rerr
	}
	err := runner.Cancel(r.Context(), c.Execution, cred)
	d.g.logger.LogAttrs(r.Context(), slog.LevelInfo, "playbook task",
		slog.String("action", "cancel"), slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.String("execution_id", c.Execution), slog.Bool("cancelled", err == nil))
	switch {
	case errors.Is(err, playbook.ErrNoCancelRoute):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("cannot cancel task: the engine of playbook %s has no cancel route, so its run goes on", c.Path)}
	case err != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("cancelling playbook %s (execution %s) failed: %v", c.Path, c.Execution, err)}
	}
	return nil
}

// wire is the task as the spec shapes it. state "" is a run going on.
func (d *taskDoor) wire(id string, c *taskClaims, runner *playbook.Runner, state playbook.State, msg string) taskWire {
	created := time.UnixMilli(c.Created).UTC()
	updated := created // a working task has been working since it was made
	if state != "" {
		updated = d.now().UTC() // when the gateway saw it end: it keeps no record of when that was
	}
	return taskWire{
		TaskID:        id,
		Status:        taskStatus(state),
		StatusMessage: msg,
		CreatedAt:     created.Format(time.RFC3339Nano),
		LastUpdatedAt: updated.Format(time.RFC3339Nano),
		TTL:           c.TTL,
		PollInterval:  runner.Options().PollInterval.Milliseconds(),
	}
}

// taskStatus maps a run's state to a task's status.
func taskStatus(s playbook.State) string {
	switch s {
	case "":
		return "working"
	case playbook.Succeeded:
		return "completed"
	case playbook.Cancelled:
		return "cancelled"
	}
	return "failed"
}

// runningMessage is a working task's statusMessage.
func runningMessage(path string, p playbook.Progress) string {
	return "playbook " + path + " is running" + progressDetail(p)
}

// maxStatusMessage bounds a statusMessage taken from a result's text.
const maxStatusMessage = 500

// statusText is a result's text, cut for a statusMessage (and for the
// error a task id holds, which keeps ids short).
func statusText(res *mcp.CallToolResult) string {
	return cutText(resultText(res))
}

func cutText(s string) string {
	if len(s) > maxStatusMessage {
		s = strings.ToValidUTF8(s[:maxStatusMessage], "") + "…"
	}
	return s
}

// middleware adds what go-sdk cannot say to its answers of requests that
// came through the front door (not stdio, which has no tasks): the tasks
// capability in initialize (protocol 2025-11-25, where these tasks are),
// and execution.taskSupport on the playbook tools in tools/list (not in
// 2026-07-28 requests, whose results go-sdk stamps itself).
func (d *taskDoor) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || req == nil || req.GetExtra() == nil || req.GetExtra().Header.Get(requestIDHeader) == "" {
			return res, err
		}
		switch x := res.(type) {
		case *mcp.DiscoverResult:
			return discoverResult(x), nil // the tasks extension (tasksext.go)
		case *mcp.InitializeResult:
			if x.ProtocolVersion >= "2025-11-25" && x.ProtocolVersion < "2026-07-28" {
				return taskInitResult{x}, nil
			}
		case *mcp.ListToolsResult:
			if p := req.GetParams(); p != nil {
				if _, v2026 := p.GetMeta()[mcp.MetaKeyProtocolVersion]; v2026 {
					return res, nil
				}
			}
			names := d.names
			if s := d.g.succ.Load(); s != nil && s.tasks != nil {
				names = s.tasks.names // a retired gateway's session (follow.go)
			}
			return taskListResult{x, names}, nil
		}
		return res, err
	}
}

// taskCapability is the server's tasks capability (2025-11-25): tools/call
// may be task-augmented, tasks/list and tasks/cancel are served.
var taskCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskInitResult is go-sdk's initialize result with capabilities.tasks.
type taskInitResult struct{ *mcp.InitializeResult }

func (x taskInitResult) MarshalJSON() ([]byte, error) {
	b, err := sdkwire.Marshal(x.InitializeResult)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(top["capabilities"], &caps); err != nil || caps == nil {
		caps = map[string]json.RawMessage{}
	}
	caps["tasks"] = taskCapability
	if top["capabilities"], err = sdkwire.Marshal(caps); err != nil {
		return nil, err
	}
	return sdkwire.Marshal(top)
}

// taskListResult is go-sdk's tools/list result with execution.taskSupport
// on the playbook tools.
type taskListResult struct {
	*mcp.ListToolsResult
	names map[string]string // the tools that declare it, and what
}

func (x taskListResult) MarshalJSON() ([]byte, error) {
	b, err := sdkwire.Marshal(x.ListToolsResult)
	if err != nil {
		return nil, err
	}
	return withTaskSupport(b, x.names)
}

// taskToolNames are the names of the tools that may be called as tasks,
// the playbook tools among tools, and their execution.taskSupport:
// "optional" (a task or a plain call), or "required" (Playbook.TaskRequired).
func taskToolNames(tools []*Tool) map[string]string {
	out := map[string]string{}
	for _, t := range tools {
		switch {
		case t.IsPlaybook() && t.Playbook.TaskRequired:
			out[t.Tool.Name] = "required"
		case t.IsPlaybook():
			out[t.Tool.Name] = "optional"
		}
	}
	return out
}

// withTaskSupport adds execution.taskSupport to the tools named in names of
// a marshaled tools/list result. The fast path's prebuilt pages and
// go-sdk's answers both go through it, so they stay alike.
func withTaskSupport(list []byte, names map[string]string) ([]byte, error) {
	if len(names) == 0 {
		return list, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(list, &top); err != nil {
		return nil, err
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(top["tools"], &tools); err != nil {
		return nil, err
	}
	changed := false
	for i, raw := range tools {
		var head struct {
			Name string `json:"name"`
		}
		raw = bytes.TrimSpace(raw)
		if json.Unmarshal(raw, &head) != nil || names[head.Name] == "" || len(raw) < 2 {
			continue
		}
		tools[i] = append(raw[:len(raw)-1:len(raw)-1], `,"execution":{"taskSupport":"`+names[head.Name]+`"}}`...)
		changed = true
	}
	if !changed {
		return list, nil
	}
	var err error
	if top["tools"], err = sdkwire.Marshal(tools); err != nil {
		return nil, err
	}
	return sdkwire.Marshal(top)
}
