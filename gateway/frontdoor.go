package gateway

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/httpbound"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// frontDoor is the gateway's HTTP layer at /mcp, ahead of go-sdk's
// StreamableHTTPHandler. It reads each request body once, under a size cap and
// a read deadline, refuses what go-sdk would mishandle (JSON-RPC batches,
// which go-sdk runs all at once for protocol 2025-03-26; malformed JSON, which
// it answers as text/plain; number ids it would answer as another id, see
// checkID), ties every tool call to the lifetime of the POST
// that carried it, and in stateful mode bounds and guards the sessions. It
// then hands the request, body restored, to go-sdk unchanged.
//
// For a stateless gateway it answers the hot methods (tools/list,
// tools/call) itself, without a go-sdk session, where it can answer exactly
// as go-sdk would (see fastPath); for a stateful one, a tools/call on a
// live session (sessionFastPath).
//
// What ties a call to its POST, mode by mode (go-sdk v1.8.0):
//   - go-sdk derives a tool handler's context from its connection's context
//     wrapped so that it is never done (jsonrpc2's notDone): a client that
//     hangs up does not cancel the handler. In stateless mode the connection
//     is the POST's; in stateful mode it is the initialize POST's.
//   - StreamableHTTPOptions.PropagateRequestCancellation fixes that for
//     2026-07-28 requests (stateless) only.
//   - What does work in every mode is the header: RequestExtra.Header is the
//     header of the very POST that carried the call. So the front door puts
//     its own id (newRequestID) in [requestIDHeader] and keeps the POST's context
//     under it while the POST is served; the tool handler joins the two
//     contexts (see callContexts.join), and the upstream request, built with
//     http.NewRequestWithContext, is cancelled when the client hangs up.
//   - notifications/cancelled works in stateful mode through go-sdk, and in
//     stateless mode through the front door's registry of the calls in
//     flight (see cancel.go).
//   - stdio has no POST: calls there end with the session or a
//     notifications/cancelled.
type frontDoor struct {
	gw   *Gateway     // whose door it is: a retired one's stages follow the current gateway (follow.go)
	next http.Handler // go-sdk's StreamableHTTPHandler
	// sessionless, in stateful mode, is go-sdk's stateless handler on the
	// same server: it serves the requests of protocol 2026-07-28 and later
	// (see routeVersion), which have no session. nil when stateless.
	sessionless http.Handler
	maxBody     int64
	bodyTimeout time.Duration
	calls       *callContexts
	sessions    *sessionBook    // nil when stateless
	streams     *sessionStreams // stateful: the sessions' GET streams (taskstatus.go)
	metrics     *metrics        // nil when metrics are off
	fast        *fastPath       // nil: turned off (stateful: calls on sessions only, sessionFastPath)
	tasks       *taskDoor       // nil: no playbook tools (see tasks.go)
	inflight    *inflight       // the calls notifications/cancelled can reach (see cancel.go)
	// authorize, when set, is the step-up seam (see gateway/auth.go): it is
	// called for every POSTed message after the body is parsed and before
	// anything is dispatched; when it says no, the front door answers with
	// status and the WWW-Authenticate challenge, and go-sdk sees nothing.
	authorize func(r *http.Request, method, tool string) (status int, challenge string, ok bool)
	// metaCalls: the gateway is in search mode, and a call_tool or
	// call_read_only_tool is authorized as the tool it names.
	metaCalls bool
	// tracer makes a span per POSTed message (traceRequest); nil when
	// tracing is off.
	tracer trace.Tracer
}

// message is a POSTed body as go-sdk reads it (sdkwire.Parse into sdkwire.Message:
// its decoder, case-sensitive keys), decoded once by the front door for every
// check that needs it, so that none of them can read a different message
// than the one go-sdk dispatches. ok is false when the body does not decode
// that way (go-sdk answers it in its own words); badMethod when its method
// is not a string.
type message struct {
	sdkwire.Message
	ok        bool
	method    string
	badMethod bool
}

func readMessage(body []byte) *message {
	m := &message{}
	if !sdkwire.Parse(body, &m.Message) {
		return m
	}
	m.ok = true
	if len(m.Method) > 0 && !sdkwire.Parse(m.Method, &m.method) {
		m.badMethod = true
	}
	return m
}

// requestIDHeader carries the front door's id of one POST to the tool
// handlers of the calls in it. An inbound value is always stripped, so a
// client cannot tie its call to someone else's request.
const requestIDHeader = "Mcpgate-Request-Id"

// requestIDKey and requestSeq make the front door's request ids: a counter
// enciphered with AES under a key drawn once per process, so ids are unique
// within a process (a block cipher is a permutation), unpredictable, and
// say nothing of how many POSTs others sent (the counter's plain value
// would); across replicas and restarts they collide with odds of 2^-128.
// Drawing 128 random bits per POST cost more than the rest of the id's work.
var (
	requestIDKey = func() cipher.Block {
		key := make([]byte, 16)
		rand.Read(key)
		b, err := aes.NewCipher(key)
		if err != nil {
			panic(err) // a 16-byte key is always accepted
		}
		return b
	}()
	requestSeq atomic.Uint64
)

// requestIDEncoding writes an id as rand.Text does: 26 characters of
// base32.
var requestIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newRequestID returns the id of one POST.
func newRequestID() string {
	var b [aes.BlockSize]byte
	binary.BigEndian.PutUint64(b[8:], requestSeq.Add(1))
	requestIDKey.Encrypt(b[:], b[:])
	return requestIDEncoding.EncodeToString(b[:])
}

// stampRequestID replaces any inbound [requestIDHeader] of r with a new id,
// and sends it back on w: the caller's handle on the log lines of its
// calls. It returns the id.
func stampRequestID(w http.ResponseWriter, r *http.Request) string {
	id := newRequestID()
	v := []string{id} // shared: neither header's value is changed in place
	r.Header[requestIDHeader] = v
	w.Header()[requestIDHeader] = v
	return id
}

// sessionIDHeader is the Streamable HTTP session header (MCP 2025-03-26 on).
const sessionIDHeader = "Mcp-Session-Id"

// exchange is one request's passage through the front door: what its
// stages read and write. A stage may wrap w, replace r's context or body,
// and leave in the fields below what must be undone once the answer is
// written; finish undoes it, in the reverse order.
type exchange struct {
	w       http.ResponseWriter
	r       *http.Request
	body    []byte
	hasBody bool
	// rpc: a POST with a JSON body, so a JSON-RPC message.
	rpc bool
	// ctx is the calls' context: cancelled when the client hangs up (or a
	// stateless notifications/cancelled names the call), and holding the
	// answer's share of the response budget.
	ctx       context.Context
	requestID string
	peek      rpcPeek // read only when stateless, for notifications/cancelled
	decoded   *message

	untrack    func()               // out of the stateless in-flight registry
	hold       *upstream.AnswerHold // the answer's budget share
	session    *sessionWriter       // binds or frees the session reservation
	unwatch    func()               // the cancel watch on the answer
	unregister func()               // out of callContexts
	unstream   func()               // out of the sessions' streams (taskstatus.go)
	errs       *rpcErrors           // rewrites go-sdk's error answers
	span       trace.Span           // the request's span (traceRequest); nil when tracing is off
	// sessionless: a stateful gateway serves this request as a stateless
	// one does (routeVersion).
	sessionless bool
}

// msg is the POSTed message, decoded once, when a stage first needs it
// (the cancel registry, the step-up check, the fast path), and shared, so
// that no stage reads another message than go-sdk dispatches.
func (x *exchange) msg() *message {
	if x.decoded == nil {
		x.decoded = readMessage(x.body)
	}
	return x.decoded
}

// finish undoes what the stages set up, last first.
func (x *exchange) finish() {
	if x.span != nil {
		defer x.endRequestSpan()
	}
	if x.unstream != nil {
		x.unstream()
	}
	if x.errs != nil {
		x.errs.finish()
	}
	if x.unregister != nil {
		x.unregister()
	}
	if x.unwatch != nil {
		x.unwatch()
	}
	if x.session != nil {
		x.session.finish()
	}
	if x.hold != nil {
		x.hold.Release()
	}
	if x.untrack != nil {
		x.untrack()
	}
}

// A stage does one thing to a request on its way to go-sdk. It returns
// false when it has answered, and the request goes no further.
type stage struct {
	name string
	run  func(*frontDoor, *exchange) bool
}

// stages are the front door, in order. Each one does nothing where its
// part is off (no sessions when stateless, no fast path when stateful, no
// step-up without a policy…); what passes them all goes to go-sdk.
var stages = [...]stage{
	{"read body", (*frontDoor).readRequest},
	{"trace", (*frontDoor).traceRequest},
	{"admit call", (*frontDoor).admitCall},
	{"check message", (*frontDoor).checkRPC},
	{"step-up", (*frontDoor).stepUp},
	{"tasks extension", (*frontDoor).taskExtension}, // 2026-07-28, either mode (tasksext.go)
	{"stateless task", (*frontDoor).statelessTask},
	{"fast path", (*frontDoor).fastPath},
	{"check id", (*frontDoor).checkRPCID},
	{"check initialize", (*frontDoor).checkInitialize},
	{"route version", (*frontDoor).routeVersion},
	{"session", (*frontDoor).session},
	{"session fast path", (*frontDoor).sessionFastPath},
	{"watch cancel", (*frontDoor).watchCancel},
	{"register call", (*frontDoor).registerCall},
	{"restore body", (*frontDoor).restoreBody},
}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{w: w, r: r, ctx: r.Context()}
	defer x.finish()
	for i := range stages {
		if !stages[i].run(f, &x) {
			return
		}
	}
	if x.sessionless {
		f.sessionless.ServeHTTP(x.w, x.r)
		return
	}
	f.next.ServeHTTP(x.w, x.r)
}

// readRequest strips an inbound request id, counts the request and reads
// its body whole (see readBody).
func (f *frontDoor) readRequest(x *exchange) bool {
	x.r.Header.Del(requestIDHeader)
	f.metrics.httpRequest(x.r.Method)
	x.hasBody = x.r.Body != nil && x.r.Body != http.NoBody
	if x.hasBody {
		var ok bool
		if x.body, ok = f.readBody(x.w, x.r); !ok {
			return false
		}
	}
	x.rpc = x.r.Method == http.MethodPost && sdkwire.IsJSON(x.r.Header.Get("Content-Type"))
	if x.rpc && f.inflight != nil {
		x.peek = x.msg().peek()
	}
	return true
}

// admitCall gives a POST what its calls run under: a place in the
// stateless in-flight registry, the answer's share of the response budget
// and the request id. The calls keep their share until their answers are
// written, or their writes have failed (httpbound.Writes): until the
// exchange finishes. go-sdk's tool handlers find the hold through
// callContexts.join. The share counts go-sdk's encodings of the answer
// (sdkAnswerCost) unless the fast path, which writes it from the result,
// serves the call.
func (f *frontDoor) admitCall(x *exchange) bool {
	if x.r.Method != http.MethodPost {
		return true
	}
	if f.inflight != nil {
		x.ctx, x.untrack = f.inflight.track(x.ctx, x.r, x.peek)
	}
	x.hold = &upstream.AnswerHold{Cost: &sdkAnswerCost}
	x.ctx = upstream.WithAnswerHold(x.ctx, x.hold)
	x.requestID = stampRequestID(x.w, x.r)
	return true
}

// checkRPC refuses a message go-sdk would mishandle (see checkMessage).
func (f *frontDoor) checkRPC(x *exchange) bool {
	if !x.rpc {
		return true
	}
	if e := checkMessage(x.body); e != nil {
		f.metrics.refuseMessage(x.body, e)
		writeRPCError(x.w, http.StatusBadRequest, e)
		return false
	}
	return true
}

// stepUp asks the step-up policy (f.authorize) about the message before
// anything is dispatched.
func (f *frontDoor) stepUp(x *exchange) bool {
	if !x.rpc || f.authorize == nil {
		return true
	}
	method, tool, ok := peekCall(x.msg())
	if !ok {
		writeRPCError(x.w, http.StatusBadRequest, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: "invalid request: the method, or a tools/call's params, is not of the type JSON-RPC and MCP give it",
		})
		return false
	}
	if f.metaCalls {
		if real, ok := metaCallTarget(tool, x.msg().Params); ok {
			tool = real // a search meta-call is decided on the tool it runs (search.go)
		}
	}
	if status, challenge, ok := f.authorize(x.r, method, tool); !ok {
		refuseCall(x.w, status, challenge)
		return false
	}
	return true
}

// statelessTask answers the task requests go-sdk cannot read (it drops
// params.task) for a stateless gateway; a stateful one answers them once
// the session is checked (see session).
func (f *frontDoor) statelessTask(x *exchange) bool {
	return !(x.rpc && f.sessions == nil && f.tasks.serve(x.w, x.r, x.body, x.msg))
}

// fastPath lets the fast path answer, under the calls' context:
// cancellable, holding the answer's budget share.
func (f *frontDoor) fastPath(x *exchange) bool {
	return !(x.rpc && f.fast != nil && f.sessions == nil && f.fast.serve(x.w, x.r.WithContext(x.ctx), x.msg()))
}

// sessionFastPath, in stateful mode, lets the fast path answer a tools/call
// on a session that the session stage has found to be its caller's, once
// go-sdk has initialized it (sessionLife.ready), as the fastPath stage does
// for a stateless gateway. The call is registered for notifications/cancelled
// under its session (admitCall, sessionScoped): a cancellation on the
// session, which go-sdk accepts with 202 but cannot match to a call it never
// saw, reaches it through the registry (watchCancel).
func (f *frontDoor) sessionFastPath(x *exchange) bool {
	if !x.rpc || f.fast == nil || x.session == nil || x.sessionless {
		return true
	}
	id := x.r.Header.Get(sessionIDHeader)
	if id == "" || !f.sessions.life.ready(id) {
		return true
	}
	fast := f.fast
	if f.followed() != nil {
		s, done := f.gw.lend() // kept open while it answers (follow.go)
		defer done()
		if fast = s.fast; fast == nil {
			return true // go-sdk's server shows the current gateway's tools
		}
	}
	return !fast.serve(x.w, x.r.WithContext(x.ctx), x.msg())
}

// followed is the gateway this door's gateway follows since a reload retired
// it (follow.go), or nil: the stages that read the catalog use its.
func (f *frontDoor) followed() *Gateway {
	if f.gw == nil {
		return nil
	}
	return f.gw.succ.Load()
}

// taskDoor is the task door of the gateway serving this door's sessions;
// done ends its loan (follow.go's lend: the gateway followed is not closed
// under a task request it answers).
func (f *frontDoor) taskDoor() (d *taskDoor, done func()) {
	if f.followed() != nil {
		s, done := f.gw.lend()
		return s.tasks, done
	}
	return f.tasks, func() {}
}

// checkRPCID refuses an id go-sdk would answer as another (see checkID).
func (f *frontDoor) checkRPCID(x *exchange) bool {
	if !x.rpc {
		return true
	}
	if e := checkID(x.msg()); e != nil {
		f.metrics.refuse(refusedBadID)
		writeRPCError(x.w, http.StatusBadRequest, e)
		return false
	}
	return true
}

// checkInitialize answers an initialize go-sdk would mishandle (see
// answerBadInitialize).
func (f *frontDoor) checkInitialize(x *exchange) bool {
	return !(x.rpc && answerBadInitialize(x.w, x.r, x.msg()))
}

// protocolVersionHeader is the Streamable HTTP protocol version header (MCP
// 2025-06-18 on).
const protocolVersionHeader = "Mcp-Protocol-Version"

// sessionlessVersion is the first protocol version without sessions or
// initialize (SEP-2575): each request says its version and the client's
// capabilities itself.
const sessionlessVersion = "2026-07-28"

// routeVersion, in stateful mode, sends a request of protocol 2026-07-28 or
// later to go-sdk's stateless handler, past the session stage: such a
// request carries no session, and go-sdk v1.8.0's stateful handler would
// open one for it and then refuse it (-32022 unsupported protocol version,
// although server/discover offered 2026-07-28). Sessions remain for the
// versions that have them. A request is of a sessionless version when its
// Mcp-Protocol-Version header says so — what go-sdk's handler reads —
// or, without the header, when its params._meta does (what go-sdk's
// session reads), or when it is server/discover, a method only those
// versions have.
func (f *frontDoor) routeVersion(x *exchange) bool {
	if f.sessionless != nil && x.rpc {
		x.sessionless = sessionlessRequest(x.r.Header.Get(protocolVersionHeader), x.msg())
	}
	return true
}

// sessionlessRequest reports whether a POSTed message, sent with the
// protocol version header v, is of a version without sessions (see
// routeVersion).
func sessionlessRequest(v string, m *message) bool {
	if v != "" {
		return v >= sessionlessVersion
	}
	if !m.ok {
		return false
	}
	if m.method == "server/discover" {
		return true
	}
	var p struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	return len(m.Params) > 0 && sdkwire.Parse(m.Params, &p) && p.Meta.Version >= sessionlessVersion
}

// session, in stateful mode, bounds and guards the sessions (see
// guardSession) and answers a session's task requests.
func (f *frontDoor) session(x *exchange) bool {
	if f.sessions == nil || x.sessionless {
		return true
	}
	sw, ok := f.guardSession(x.w, x.r)
	if !ok {
		return false
	}
	if sw != nil {
		x.session = sw
		x.w = sw
	}
	if id := x.r.Header.Get(sessionIDHeader); id != "" && x.r.Method == http.MethodGet && f.streams != nil {
		// The session's standalone stream: notifications/tasks/status
		// go there (taskstatus.go).
		x.w, x.unstream = f.streams.watch(x.w, id)
	}
	if !x.rpc || x.r.Header.Get(sessionIDHeader) == "" {
		return true
	}
	d, done := f.taskDoor()
	defer done()
	return !d.serve(x.w, x.r, x.body, x.msg)
}

// watchCancel, when stateless, answers a notifications/cancelled after it
// has reached the call it names (see inflight.onCancelled).
func (f *frontDoor) watchCancel(x *exchange) bool {
	if f.inflight != nil {
		x.w, x.unwatch = f.inflight.onCancelled(x.w, x.r, x.peek)
	}
	return true
}

// registerCall lets go-sdk's tool handlers find the POST's context by its
// request id (see callContexts.join), and puts go-sdk's error answers in
// the gateway's words (see rpcErrors). What the front door answered
// itself, the fast path included, never needed either.
func (f *frontDoor) registerCall(x *exchange) bool {
	if x.r.Method != http.MethodPost {
		return true
	}
	x.unregister = f.calls.add(x.requestID, x.ctx)
	x.errs = &rpcErrors{ResponseWriter: x.w, body: x.body, msg: x.msg}
	x.w = x.errs
	return true
}

// restoreBody gives go-sdk the body to read again.
func (f *frontDoor) restoreBody(x *exchange) bool {
	if x.hasBody {
		x.r.Body = io.NopCloser(bytes.NewReader(x.body))
	}
	return true
}

// readBody reads the whole body, at most f.maxBody bytes, within
// f.bodyTimeout. The deadline is per request and cleared once the body is in,
// so it bounds a client that trickles its body without cutting the long SSE
// answer that may follow. (net/http clears it too when the body hits EOF and
// it starts watching for a hang-up; clearing here does not depend on that.)
// On failure it has answered and returns false.
func (f *frontDoor) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > f.maxBody {
		f.tooLarge(w)
		return nil, false
	}
	if f.bodyTimeout > 0 && !httpbound.ServerBoundsBody(r, f.bodyTimeout) {
		// Not every ResponseWriter supports deadlines (HTTP/1 and HTTP/2 in
		// net/http do); without one, the server's own timeouts apply.
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(f.bodyTimeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	body, err := readAll(w, r, f.maxBody)
	if err == nil {
		return body, true
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		f.tooLarge(w)
	case errors.Is(err, os.ErrDeadlineExceeded):
		f.metrics.refuse(refusedTimeout)
		w.Header().Set("Connection", "close")
		writeRPCError(w, http.StatusRequestTimeout, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("the request body did not arrive within %s (body_timeout)", f.bodyTimeout),
		})
	default:
		// The client went away or broke the framing: nobody to answer.
		f.metrics.refuse(refusedUnreadable)
		w.Header().Set("Connection", "close")
		writeRPCError(w, http.StatusBadRequest, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: "the request body could not be read",
		})
	}
	return nil, false
}

// maxPresizedBody bounds the buffer readAll makes before the body arrives:
// a Content-Length is only a claim, and a client that declares
// max_body_bytes and sends nothing must not hold that much memory per
// connection. 4 KiB is what net/http already holds per connection (its
// read buffer), and more than a tools/call needs.
const maxPresizedBody = 4 << 10

// readAll reads r's body, at most max bytes (a longer one is a
// *http.MaxBytesError). A body of Content-Length up to maxPresizedBody is
// read into a buffer of that size, made once (net/http's body ends at the
// Content-Length); a longer one grows as it arrives.
func readAll(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= min(max, maxPresizedBody) {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // shorter than declared: the framing broke
			}
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, max))
}

func (f *frontDoor) tooLarge(w http.ResponseWriter) {
	f.metrics.refuse(refusedTooLarge)
	w.Header().Set("Connection", "close")
	writeRPCError(w, http.StatusRequestEntityTooLarge, &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("the request body exceeds %d bytes (max_body_bytes)", f.maxBody),
	})
}

// checkMessage accepts exactly one JSON-RPC message: a JSON object. It
// returns the error to answer otherwise.
func checkMessage(body []byte) *jsonrpc.Error {
	if !json.Valid(body) { // Valid allocates nothing; Unmarshal says why
		var raw json.RawMessage
		err := json.Unmarshal(body, &raw)
		return &jsonrpc.Error{
			Code:    jsonrpc.CodeParseError,
			Message: "the request body is not valid JSON",
			Data:    jsonString(describeJSONError(body, err)),
		}
	}
	switch bytes.TrimLeft(body, " \t\r\n")[0] {
	case '{':
		return nil
	case '[':
		return &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: "JSON-RPC batches are not accepted: MCP removed batching in protocol 2025-06-18; send one message per POST",
		}
	default:
		return &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidRequest,
			Message: "a JSON-RPC message must be a JSON object",
		}
	}
}

// checkID refuses a message whose id is a number go-sdk would not answer as
// sent. go-sdk v1.8.0 reads every id number as a float64 and answers
// int64(v) (internal/jsonrpc2.MakeID): 1.5 is answered as 1, 2^53+1 as 2^53,
// 1e20 as -2^63, so a client would take the answer for another request's,
// or for none. MCP requires a string or an integer id, and JSON-RPC 2.0 §5
// an answer carrying the id sent. A string id, no id, or one go-sdk cannot
// decode at all is go-sdk's to answer. It runs only where the fast path has
// not answered (which echoes only exact ids, see sdkwire.EchoID), so the hot path
// does not parse a body twice.
func checkID(m *message) *jsonrpc.Error {
	if !m.ok || len(m.ID) == 0 {
		return nil // go-sdk cannot read it either, and says so
	}
	switch m.ID[0] {
	case '"', 'n', 't', 'f', '{', '[': // string, null; go-sdk refuses the others
		return nil
	}
	if _, ok := sdkwire.ExactID(m.ID); ok {
		return nil
	}
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("the request id %.40s must be a string or an integer within ±2^53 (%d), which the gateway can answer as sent", m.ID, int64(sdkwire.MaxExactID)),
	}
}

// answerBadInitialize answers an initialize request whose params go-sdk
// cannot decode, or that has none, with -32602 (invalid params) and the
// request's id, and reports whether it did. go-sdk v1.8.0 answers every
// other method's undecodable params so, but its initialize (which decodes
// into its own initializeParamsV2) answers them with error code 0, which
// is no JSON-RPC error code. Requests go-sdk would refuse before decoding
// (see sdkwire.WouldRead) are left to it.
func answerBadInitialize(w http.ResponseWriter, r *http.Request, m *message) bool {
	if !m.ok || m.method != "initialize" || m.VersionTag != "2.0" || !sdkwire.WouldRead(r, fastVersions) {
		return false
	}
	id, ok := sdkwire.EchoID(m.ID)
	if !ok {
		return false // a notification: nothing to answer
	}
	problem := sdkwire.InitializeProblem(m.Params)
	if problem == "" {
		return false
	}
	sdkwire.WriteError(w, id, jsonrpc.CodeInvalidParams, problem)
	return true
}

// describeJSONError names a JSON syntax problem and where it is.
func describeJSONError(body []byte, err error) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "the body is empty"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if se.Offset >= int64(len(body)) {
			return fmt.Sprintf("%v (the body ends after %d bytes)", se, len(body))
		}
		return fmt.Sprintf("%v at offset %d", se, se.Offset-1) // Offset counts the bad byte
	}
	return err.Error()
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// writeRPCError answers a JSON-RPC error with id null: the front door answers
// before it knows, or can trust, the message's id (JSON-RPC 2.0 §5).
func writeRPCError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	body, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, e})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// callContexts holds the context of every POST being served, under the
// front door's id for it. Safe for concurrent use.
type callContexts struct{ m sync.Map }

// add registers ctx under id, the front door's random id of its POST; done
// removes it.
func (c *callContexts) add(id string, ctx context.Context) (done func()) {
	c.m.Store(id, ctx)
	return func() { c.m.Delete(id) }
}

// errClientGone is the cause of a call cancelled because its POST ended.
var errClientGone = errors.New("gateway: the client's HTTP request ended")

// join returns ctx, also cancelled when the POST that carried the call (named
// by [requestIDHeader] in h) ends — with errClientGone as the cause, or the
// client's own cancellation (see cancel.go). When h names a POST that has already ended
// (the client hung up before the handler started), the answer can no longer
// be delivered (go-sdk keeps no event store here), so the result is cancelled
// at once. Without the header (stdio), ctx is returned as is.
func (c *callContexts) join(ctx context.Context, h http.Header) (context.Context, context.CancelFunc) {
	id := h.Get(requestIDHeader)
	if id == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	v, ok := c.m.Load(id)
	if !ok {
		cancel(errClientGone)
		return ctx, func() {}
	}
	post := v.(context.Context)
	if h := upstream.AnswerHoldFrom(post); h != nil {
		ctx = upstream.WithAnswerHold(ctx, h)
	}
	if span := trace.SpanFromContext(post); span.SpanContext().IsValid() {
		ctx = trace.ContextWithSpan(ctx, span) // the POST's span (traceRequest)
	}
	if c, _ := post.Value(notifiedKey{}).(*inflightCall); c != nil {
		ctx = context.WithValue(ctx, notifiedKey{}, c) // the client's late cancellation (cancelledOf)
	}
	stop := context.AfterFunc(post, func() { cancel(postEndCause(post)) })
	return ctx, func() { stop(); cancel(nil) }
}

// sessionBook bounds and guards stateful sessions: at most max at once, each
// bound to the caller of its initialize POST (see package caller). Safe for
// concurrent use.
//
// go-sdk creates a session for a POST without Mcp-Session-Id and sends its id
// only in that POST's answer; the book learns the id there, before the client
// does. go-sdk closes sessions on its own (idle timeout, DELETE): the book
// forgets an id when go-sdk answers 404 or 204 for it, and prunes against
// (*mcp.Server).Sessions whenever a session is about to be created.
type sessionBook struct {
	server    *mcp.Server
	max       int
	perCaller int // 0: no bound per caller
	// life keeps which sessions have initialized and their idle timeout,
	// when the front door answers calls on sessions (see sessionLife);
	// nil: go-sdk alone does.
	life *sessionLife

	mu        sync.Mutex
	owners    map[string][sha256.Size]byte // session id → its caller (see package caller: its Digest)
	pending   int                          // session-creating POSTs in flight
	pendingBy map[[sha256.Size]byte]int    // of those, per caller (when perCaller is set)

	// fleet, with shared state (shared.go), counts a caller's sessions
	// across the replicas: a slot is taken per session being created and
	// kept while it lives (leases, see gateway/state); nil: this process.
	fleet  func(ctx context.Context, who [sha256.Size]byte, limit int) (release func(), ok bool, err error)
	leases map[string]func() // session id → its fleet slot's release

	digests *caller.Key // keys the owners' digests (the gateway's: shareSessions)

	// others are the books of the other gateways the Front keeps (the
	// current one and those a reload retired that still serve sessions;
	// [Front.Replace] sets it): their sessions, and those being made,
	// count against max_sessions, and a caller's against
	// max_sessions_per_caller, as this book's do. Each is counted under its
	// own lock, before b.mu is taken: a book never holds its lock while it
	// takes another's.
	others atomic.Pointer[[]*sessionBook]
}

// held counts the sessions b's server holds and the session-creating POSTs
// b has in flight, and of those, the ones of caller c, as b's digests name
// callers. It forgets the sessions go-sdk has closed.
func (b *sessionBook) held(c caller.Caller) (all, mine int) {
	who := b.digests.Digest(c)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count(who)
}

// count is held for the caller whose digest is who. b.mu is held.
func (b *sessionBook) count(who [sha256.Size]byte) (all, mine int) {
	live := make(map[string]bool, len(b.owners))
	for ss := range b.server.Sessions() {
		live[ss.ID()] = true
	}
	mine = b.pendingBy[who]
	for id, owner := range b.owners {
		switch {
		case !live[id]:
			delete(b.owners, id) // closed by go-sdk: idle timeout, or a DELETE
			b.unlease(id)
			b.life.forget(id)
		case owner == who:
			mine++
		}
	}
	return len(live) + b.pending, mine
}

// heldByOthers is held summed over the other books.
func (b *sessionBook) heldByOthers(c caller.Caller) (all, mine int) {
	if others := b.others.Load(); others != nil {
		for _, o := range *others {
			a, m := o.held(c)
			all, mine = all+a, mine+m
		}
	}
	return all, mine
}

func newSessionBook(server *mcp.Server, max, perCaller int) *sessionBook {
	return &sessionBook{server: server, max: max, perCaller: perCaller,
		owners: map[string][sha256.Size]byte{}, pendingBy: map[[sha256.Size]byte]int{}, digests: caller.ProcessKey()}
}

// Why reserve refused.
type sessionRefusal int

const (
	sessionGranted sessionRefusal = iota
	sessionsFull                  // max_sessions
	callerFull                    // max_sessions_per_caller
)

// reserve takes a slot for a session about to be created by who. It refuses
// at the cap, or at who's own cap. The count is go-sdk's own (every live
// session, including one whose initialize POST was cut off before its id
// went out, which the book never learns) plus the slots taken by POSTs still
// in flight; a POST whose session is already connected counts twice until it
// answers, which errs on the side of refusing. A caller's count is the
// sessions bound to it that go-sdk still holds, plus its POSTs in flight.
// Both counts add those of the other books (see others): c is who's
// caller, whom they name by their own digests.
func (b *sessionBook) reserve(who [sha256.Size]byte, c caller.Caller) sessionRefusal {
	othersAll, othersMine := b.heldByOthers(c)
	b.mu.Lock()
	defer b.mu.Unlock()
	all, mine := b.count(who)
	all, mine = all+othersAll, mine+othersMine
	switch {
	case all >= b.max:
		return sessionsFull
	case b.perCaller > 0 && mine >= b.perCaller:
		return callerFull
	}
	b.pending++
	if b.perCaller > 0 {
		b.pendingBy[who]++
	}
	return sessionGranted
}

// unpend drops who's reservation from the counts of those in flight.
func (b *sessionBook) unpend(who [sha256.Size]byte) {
	b.pending--
	if b.perCaller > 0 {
		if b.pendingBy[who]--; b.pendingBy[who] <= 0 {
			delete(b.pendingBy, who)
		}
	}
}

// bind turns who's reservation into a bound session; release frees its
// fleet slot (nil: none).
func (b *sessionBook) bind(id string, who [sha256.Size]byte, release func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unpend(who)
	b.owners[id] = who
	if release != nil {
		if b.leases == nil {
			b.leases = map[string]func(){}
		}
		b.leases[id] = release
	}
}

// reserveFleet takes who's fleet-wide slot after reserve granted a local
// one: ok is false when the fleet is at who's limit. Without shared state,
// or when the store fails, the local count alone decides.
func (b *sessionBook) reserveFleet(ctx context.Context, who [sha256.Size]byte) (release func(), ok bool) {
	if b.fleet == nil || b.perCaller <= 0 {
		return nil, true
	}
	release, ok, err := b.fleet(ctx, who, b.perCaller)
	if err != nil {
		return nil, true
	}
	return release, ok
}

// unlease frees the fleet slot of session id, if it holds one. b.mu is held.
func (b *sessionBook) unlease(id string) {
	if release := b.leases[id]; release != nil {
		delete(b.leases, id)
		go release()
	}
}

// release returns who's reservation that created no session.
func (b *sessionBook) release(who [sha256.Size]byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unpend(who)
}

// owns reports whether session id exists and is bound to who.
func (b *sessionBook) owns(id string, who [sha256.Size]byte) bool {
	b.mu.Lock()
	got, ok := b.owners[id]
	b.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(got[:], who[:]) == 1
}

func (b *sessionBook) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.owners, id)
	b.unlease(id)
	b.life.forget(id)
}

// guardSession applies the session cap and binding. A request naming a
// session that does not exist, or that another caller opened, gets
// exactly go-sdk's own 404, so that holding someone's Mcp-Session-Id reveals
// nothing and allows nothing. It returns a writer to hand go-sdk instead of w
// (nil: w will do; call its finish when go-sdk is done), and false when it has
// answered.
func (f *frontDoor) guardSession(w http.ResponseWriter, r *http.Request) (*sessionWriter, bool) {
	b := f.sessions
	c := caller.FromRequest(r)
	who := b.digests.Digest(c)
	if id := r.Header.Get(sessionIDHeader); id != "" {
		if !b.owns(id, who) {
			http.Error(w, "session not found", http.StatusNotFound) // go-sdk's words
			return nil, false
		}
		sw := &sessionWriter{ResponseWriter: w, onHeader: func(status int, _ http.Header) {
			if status == http.StatusNotFound || (r.Method == http.MethodDelete && status == http.StatusNoContent) {
				b.forget(id)
			}
		}}
		if r.Method == http.MethodPost {
			sw.ended = b.life.begin(id) // the idle timer waits for it
		}
		return sw, true
	}
	if r.Method != http.MethodPost {
		return nil, true // go-sdk answers GET and DELETE without a session id: 400
	}
	refusal := b.reserve(who, c)
	var lease func()
	if refusal == sessionGranted {
		var ok bool
		if lease, ok = b.reserveFleet(r.Context(), who); !ok {
			b.release(who)
			refusal = callerFull
		}
	}
	if refusal != sessionGranted {
		reason, status, e := refusedSessionCap, http.StatusServiceUnavailable, &jsonrpc.Error{
			Code:    jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("the gateway is at its session limit (%d, max_sessions); retry later or close an unused session", b.max),
		}
		if refusal == callerFull {
			reason, status, e = refusedCallerCap, http.StatusTooManyRequests, &jsonrpc.Error{
				Code:    jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("this caller has %d sessions open, its limit (max_sessions_per_caller); close one (DELETE) or let one expire", b.perCaller),
			}
		}
		f.metrics.refuse(reason)
		w.Header().Set("Retry-After", "60")
		writeRPCError(w, status, e)
		return nil, false
	}
	sw := &sessionWriter{ResponseWriter: w}
	sw.onHeader = func(_ int, h http.Header) {
		if id := h.Get(sessionIDHeader); id != "" && sw.bound.CompareAndSwap(false, true) {
			b.bind(id, who, lease)
		}
	}
	// The reservation outlives this function: finish releases it when go-sdk
	// is done with the request, unless the answer bound it to a session
	// (go-sdk writes the answer's header before it returns).
	sw.release = func() {
		b.release(who)
		if lease != nil {
			lease()
		}
	}
	return sw, true
}

// sessionWriter watches the status and header of go-sdk's answer.
type sessionWriter struct {
	http.ResponseWriter
	onHeader func(status int, h http.Header)
	release  func() // called by finish when no session was bound
	ended    func() // called by finish: the POST no longer holds its session's idle timer
	wrote    bool
	bound    atomic.Bool // the answer named the session: the reservation is spent
}

func (w *sessionWriter) WriteHeader(status int) {
	if !w.wrote && status >= 200 {
		w.wrote = true
		w.onHeader(status, w.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets SSE answers through.
func (w *sessionWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController (go-sdk flushes with it) reach the
// underlying writer.
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish returns an unused reservation. Call it when the handler returns.
// A handler that wrote nothing leaves net/http to send its own 200 with the
// header map as it stands, and go-sdk sets a new session's id there before
// it answers (and returns without answering when the client is gone): that
// id goes out all the same, so it is bound as if written, not left to count
// against max_sessions and against no caller.
func (w *sessionWriter) finish() {
	if !w.wrote {
		w.wrote = true
		w.onHeader(http.StatusOK, w.Header())
	}
	if w.release != nil && !w.bound.Load() {
		w.release()
	}
	if w.ended != nil {
		w.ended()
	}
}
