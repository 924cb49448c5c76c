// Package stdio is the gateway's stdio transport: newline-delimited JSON-RPC,
// one message per line, as MCP's stdio transport specifies, hardened where
// go-sdk's own mcp.StdioTransport ends the session (see [Transport]).
// `mcpgate stdio` serves it on stdin and stdout through Gateway.ServeStdio.
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
)

// DefaultMaxLineBytes bounds one line (one JSON-RPC message) read over stdio.
// 4 MiB holds any tools/call a model writes with room to spare, while keeping
// what one bad client can make the gateway buffer small. (go-sdk's own stdio
// transport allows 16 MiB, and ends the session on a longer line.)
const DefaultMaxLineBytes = 4 << 20

// DefaultDrainTimeout bounds how long a stdio session that has reached the
// end of its input (or a shutdown request) waits for the calls already read to
// be answered, when Options.DrainTimeout is zero: the gateway's default
// upstream timeout (30s) plus a margin. Gateway.ServeStdio uses the longest
// upstream timeout plus the margin instead, so that a call that times out
// upstream still gets its answer.
const DefaultDrainTimeout = 30*time.Second + 5*time.Second

// methodShutdown is the stdio lifecycle's request to stop: the gateway answers
// it with a null result, stops reading, answers the calls in flight and ends
// the session. MCP itself ends a stdio session by closing stdin; both work.
const methodShutdown = "shutdown"

// methodCancelled is the notification that cancels a call in flight.
const methodCancelled = "notifications/cancelled"

// Options configures [NewTransport]. The zero value is ready to use.
type Options struct {
	// Logger receives a warning per line that is refused. Nil means no
	// logging. Line contents are never logged: they may carry secrets.
	Logger *slog.Logger
	// MaxLineBytes bounds one inbound line. A longer line is skipped and
	// answered with -32600; the session goes on. Zero means
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// DrainTimeout bounds the wait, after the input ends or a shutdown
	// request, for the calls already read to be answered. Calls still running
	// then are cancelled. Zero means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Fast, when set, answers the calls it takes instead of go-sdk (see
	// [Fast]). Nil: every message goes to go-sdk.
	Fast Fast
}

// Fast answers some calls ahead of go-sdk: Gateway.ServeStdio installs the
// gateway's fast path here, which answers a tools/call without go-sdk's
// decoders (four decodes per call, each with a fresh 32 KiB buffer).
//
// The transport offers Take each line that is one JSON object once the
// session's initialize has been answered with a result (and that answer is
// being written: no answer of Take's calls can come before it), with the
// protocol version it negotiated, when that is the version the client asked
// for (go-sdk's answers depend on both); else no line is offered. A call Take takes is
// the transport's, as go-sdk's calls are: its id is checked against the
// calls in flight (a duplicate is refused as go-sdk's would be) and
// recorded, so that the end of the input and a shutdown wait for its
// answer (DrainTimeout); a notifications/cancelled naming it cancels its
// context at once, with cause context.Canceled, as go-sdk's jsonrpc2 does,
// and is then handed to go-sdk as well (which finds no call of its own
// under that id, and does nothing); Close cancels it with cause
// [ErrSessionClosed]. Its answer is written whole, under the lock every
// line is written under, and not at all once the connection is closed.
type Fast interface {
	// Take returns the call the line carries when it answers it itself,
	// or nil to hand the line to go-sdk unchanged. It must not keep line,
	// which the transport reuses.
	Take(line []byte, protocolVersion string) *Call
}

// Call is a call Fast.Take took.
type Call struct {
	// ID is the request's id, as go-sdk reads it.
	ID jsonrpc.ID
	// Run runs the call under ctx, on a goroutine of its own, and returns
	// what writes its answer: one whole line, its newline included,
	// written to w under the transport's write lock.
	Run func(ctx context.Context) (answer func(w io.Writer) error)
}

// ErrSessionClosed is the cause of the context of a call Fast took that was
// still running when the connection closed (the session ended, or its drain
// timeout passed).
var ErrSessionClosed = errors.New("stdio: the session ended before the call was answered")

// Transport is an [mcp.Transport] over newline-delimited JSON-RPC: one
// message per line, as MCP's stdio transport specifies. Unlike go-sdk's
// mcp.StdioTransport, which ends the session on the first line it cannot
// decode, it keeps serving:
//
//   - a line that is not JSON is answered with -32700 (id null, data naming
//     the line, the byte offset and the syntax error);
//   - JSON that is not one JSON-RPC message (a batch, a number, an object
//     without "jsonrpc": "2.0", an id already in flight, a line over
//     MaxLineBytes) is answered with -32600 and a message saying what is
//     wrong; blank lines are ignored;
//   - at the end of the input, and after a shutdown request (answered with a
//     null result), the session ends only once every call already read is
//     answered, or DrainTimeout passed;
//   - no error answer carries code 0: go-sdk answers a call before initialize
//     with code 0, which becomes -32600 saying to send initialize first; an
//     initialize whose params it cannot decode is answered -32602 before it
//     sees it; any other uncoded error becomes -32603;
//   - with Options.Fast, the calls that hook takes are run and answered
//     without go-sdk, under the same rules (see [Fast]).
//
// A Transport is for one [mcp.Server.Connect] or [mcp.Server.Run]. The
// caller owns r and w: they are not closed, and a read of r that blocks
// after the session ended keeps one goroutine until r returns.
type Transport struct {
	r    io.Reader
	w    io.Writer
	opts Options
}

// NewTransport returns a transport that reads messages from r and writes
// them to w (stdin and stdout for `mcpgate stdio`). opts may be nil.
func NewTransport(r io.Reader, w io.Writer, opts *Options) *Transport {
	t := &Transport{r: r, w: w}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.Logger == nil {
		t.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if t.opts.MaxLineBytes <= 0 {
		t.opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if t.opts.DrainTimeout <= 0 {
		t.opts.DrainTimeout = DefaultDrainTimeout
	}
	return t
}

// Connect implements [mcp.Transport]. It starts the goroutine that reads r.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c := &stdioConn{
		w:        t.w,
		opts:     t.opts,
		incoming: make(chan inbound),
		closed:   make(chan struct{}),
		pending:  make(map[jsonrpc.ID]string),
	}
	if t.opts.Fast != nil {
		c.fast = make(map[jsonrpc.ID]context.CancelCauseFunc)
		c.base, c.endBase = context.WithCancelCause(context.WithoutCancel(ctx))
	}
	go c.readLines(t.r)
	return c, nil
}

// inbound is what the line reader hands to Read: a message, or the error that
// ended the input (io.EOF at its end or after a shutdown request).
type inbound struct {
	msg jsonrpc.Message
	err error
}

// stdioConn is the [mcp.Connection] of a Transport.
//
// One goroutine (readLines) reads lines and answers those that are not
// messages; Read hands the messages to go-sdk and records every call's id;
// Write removes it when its answer goes out. That record is what lets the end
// of the input wait for the answers instead of dropping them: go-sdk's
// jsonrpc2 refuses every write once Read has reported the end.
type stdioConn struct {
	opts     Options
	incoming chan inbound // unbuffered: a call is recorded before the next line is read

	writeMu sync.Mutex // one line at a time on w: go-sdk's answers and ours
	w       io.Writer

	mu          sync.Mutex
	pending     map[jsonrpc.ID]string // id → method of the calls read and not yet answered
	initialized bool                  // an initialize call was answered with a result
	drained     chan struct{}         // closed when pending empties while ending; nil otherwise
	ended       bool                  // Read reported the end of the input
	// version is the protocol version of the initialize answer, once it
	// is written, when it is the version the client asked for: from then
	// on lines are offered to opts.Fast.
	version string
	// asked is the protocolVersion each initialize in flight asked for,
	// as go-sdk reads it: go-sdk's answers depend on it too (from
	// 2026-07-28 on, a result has a resultType), whatever it negotiates.
	asked map[jsonrpc.ID]string
	// fast cancels each call opts.Fast took and is running, by id.
	fast map[jsonrpc.ID]context.CancelCauseFunc
	// writing counts the answers of such calls being written: retired
	// from pending (its id may be used again once the client has the
	// answer), still awaited by a drain.
	writing int

	base    context.Context         // the fast calls' parent; nil without opts.Fast
	endBase context.CancelCauseFunc // cancels base, at Close

	closeOnce sync.Once
	closed    chan struct{}
}

// SessionID implements [mcp.Connection]: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }

// Close implements [mcp.Connection]. It unblocks Read; r and w stay open.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.endBase != nil {
			c.endBase(ErrSessionClosed)
		}
	})
	return nil
}

// Read implements [mcp.Connection]: the next message, or io.EOF once the
// input ended (or a shutdown request came) and every call read was answered.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		c.mu.Lock()
		ended := c.ended
		c.mu.Unlock()
		if ended {
			return nil, io.EOF
		}
		var in inbound
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case in = <-c.incoming:
		}
		if in.err != nil {
			if !errors.Is(in.err, io.EOF) {
				return nil, in.err
			}
			c.drain(ctx)
			return nil, io.EOF
		}
		req, ok := in.msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			if ok && req.Method == methodShutdown {
				c.drain(ctx) // a shutdown notification: nothing to answer
				return nil, io.EOF
			}
			return in.msg, nil
		}
		if req.Method == methodShutdown {
			// Answered at once, as the stdio lifecycle asks; readLines has
			// stopped reading, and the calls before it are drained.
			resp := &jsonrpc.Response{ID: req.ID, Result: json.RawMessage("null")}
			if err := c.writeMessage(resp); err != nil {
				return nil, err
			}
			c.drain(ctx)
			return nil, io.EOF
		}
		return req, nil // recorded by the reader (admit)
	}
}

// admit records a call the reader is about to hand to go-sdk, so that a
// call the reader takes next (opts.Fast) cannot reuse its id, and reports
// whether to hand it on: a duplicate id and an initialize whose params
// go-sdk cannot decode are answered here. err is such an answer's write
// error.
func (c *stdioConn) admit(msg jsonrpc.Message) (ok bool, err error) {
	req, isReq := msg.(*jsonrpc.Request)
	if !isReq {
		return true, nil
	}
	if !req.IsCall() {
		if req.Method == methodCancelled && c.fast != nil {
			c.cancelFast(req.Params)
		}
		return true, nil
	}
	if req.Method == methodShutdown {
		return true, nil // Read answers it
	}
	if !c.record(req.ID, req.Method) {
		return false, c.refuseDuplicate(req.ID)
	}
	if req.Method == "initialize" {
		// go-sdk would answer params it cannot decode with code 0.
		if problem := sdkwire.InitializeProblem(req.Params); problem != "" {
			c.retire(req.ID, false)
			id, _ := json.Marshal(req.ID.Raw())
			return false, c.writeError(id, jsonrpc.CodeInvalidParams, problem, nil)
		}
		if c.opts.Fast != nil {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			sdkwire.Parse(req.Params, &p)
			c.mu.Lock()
			if c.asked == nil {
				c.asked = make(map[jsonrpc.ID]string)
			}
			c.asked[req.ID] = p.ProtocolVersion
			c.mu.Unlock()
		}
	}
	return true, nil
}

// record adds a call to pending, and reports false when its id is already
// there.
func (c *stdioConn) record(id jsonrpc.ID, method string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.pending[id]; dup {
		return false
	}
	c.pending[id] = method
	return true
}

// refuseDuplicate answers a call whose id is already in flight: jsonrpc2
// would answer it with no id at all; say which.
func (c *stdioConn) refuseDuplicate(id jsonrpc.ID) error {
	raw, _ := json.Marshal(id.Raw())
	return c.writeError(nil, jsonrpc.CodeInvalidRequest,
		fmt.Sprintf("invalid request: id %s is already in use by a call in flight; use a new id per call", raw), nil)
}

// retire removes an answered call from pending, ending a drain that waits
// for it to be the last, and records an initialize answered with a result
// (ok). It returns the call's method ("" when unknown), the protocol version
// an initialize asked for, and whether initialize has been answered with a
// result.
func (c *stdioConn) retire(id jsonrpc.ID, ok bool) (method, asked string, initialized bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	method, asked = c.pending[id], c.asked[id]
	if method == "initialize" && ok {
		c.initialized = true
	}
	delete(c.pending, id)
	delete(c.asked, id)
	c.settledLocked()
	return method, asked, c.initialized
}

// settledLocked ends a drain that waits for no more calls. c.mu is held.
func (c *stdioConn) settledLocked() {
	if len(c.pending) == 0 && c.writing == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

// drain waits, up to DrainTimeout, until every call read has been answered,
// and marks the connection ended.
func (c *stdioConn) drain(ctx context.Context) {
	c.mu.Lock()
	c.ended = true
	n := len(c.pending) + c.writing
	var drained chan struct{}
	if n > 0 {
		drained = make(chan struct{})
		c.drained = drained
	}
	c.mu.Unlock()
	if n == 0 {
		return
	}
	timer := time.NewTimer(c.opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		c.mu.Lock()
		n = len(c.pending) + c.writing
		c.mu.Unlock()
		c.opts.Logger.Warn("stdio: input ended with calls still running; cancelling them",
			slog.Int("calls", n), slog.Duration("waited", c.opts.DrainTimeout))
	case <-c.closed:
	case <-ctx.Done():
	}
}

// Write implements [mcp.Connection]. An answer retires its call; an error
// answer without a JSON-RPC code gets one (see [Transport]).
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.writeMessage(msg)
	}
	method, asked, initialized := c.retire(resp.ID, resp.Error == nil)
	initialize := method == "initialize" && resp.Error == nil
	if resp.Error != nil {
		msg = withCode(resp, method, initialized)
	}
	if !initialize || c.opts.Fast == nil {
		return c.writeMessage(msg)
	}
	// From now on go-sdk serves calls on this session (its
	// InitializeParams are set before it answers): so may opts.Fast. The
	// version is set under the write lock, before the answer is written: a
	// client that reads the answer may send a call at once, which is then
	// the fast path's, and whose answer cannot come before this one.
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(resp.Result, &r)
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("gateway: encoding a message for stdio: %w", err)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	if asked == r.ProtocolVersion {
		c.version = r.ProtocolVersion
	}
	c.mu.Unlock()
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// withCode returns resp with a JSON-RPC error code when go-sdk left it 0,
// which is not a JSON-RPC code and which strict clients reject.
func withCode(resp *jsonrpc.Response, method string, initialized bool) *jsonrpc.Response {
	var wire *jsonrpc.Error
	if errors.As(resp.Error, &wire) && wire.Code != 0 {
		return resp
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
	if wire != nil {
		e.Data = wire.Data
	}
	switch {
	case method == "initialize":
		// A second initialize, or one go-sdk could not accept.
		e.Code = jsonrpc.CodeInvalidRequest
	case !initialized:
		// go-sdk: `method "tools/list" is invalid during session
		// initialization`, code 0 (server.go, ServerSession.handle).
		e.Code = jsonrpc.CodeInvalidRequest
		e.Message = fmt.Sprintf("%q was called before initialize: send an initialize request first, then the notifications/initialized notification", method)
	}
	out := *resp
	out.Error = e
	return &out
}

// writeMessage writes one message as one line.
func (c *stdioConn) writeMessage(msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("gateway: encoding a message for stdio: %w", err)
	}
	return c.writeLine(data)
}

func (c *stdioConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.w.Write(append(data, '\n'))
	return err
}

// errorAnswer is the wire form of the gateway's own error answers.
// jsonrpc.EncodeMessage omits a null id, and JSON-RPC 2.0 (§5) requires
// "id": null when the request's id could not be read.
type errorAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *jsonrpc.Error  `json:"error"`
}

// writeError answers a line that carried no message go-sdk could take. id is
// the request's id when it could be read, else nil (null).
func (c *stdioConn) writeError(id json.RawMessage, code int64, message string, data any) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := &jsonrpc.Error{Code: code, Message: message}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	line, err := json.Marshal(errorAnswer{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		return fmt.Errorf("gateway: encoding an error answer: %w", err)
	}
	return c.writeLine(line)
}

// readLines reads r line by line until its end, a read error, a shutdown
// request or Close. It answers the lines that are not messages itself and
// hands the messages to Read one at a time.
func (c *stdioConn) readLines(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	limit := c.opts.MaxLineBytes
	var (
		line []byte
		n    int // line number, from 1, for diagnostics
	)
	for {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(chunk) > limit+2 { // +2: the "\r\n" is not the message
					tooLong = true
					line = line[:0]
				} else {
					line = append(line, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(bytes.TrimRight(line, "\r\n")) > limit {
			tooLong = true
		}
		if err != nil && !errors.Is(err, io.EOF) {
			c.deliver(inbound{err: fmt.Errorf("gateway: reading stdio: %w", err)})
			return
		}
		eof := err != nil
		if len(line) > 0 || tooLong {
			n++
			msg, ok, werr := c.parseLine(n, line, tooLong)
			if werr != nil {
				c.deliver(inbound{err: fmt.Errorf("gateway: writing stdio: %w", werr)})
				return
			}
			if ok {
				if ok, werr = c.admit(msg); werr != nil {
					c.deliver(inbound{err: fmt.Errorf("gateway: writing stdio: %w", werr)})
					return
				}
			}
			if ok {
				if !c.deliver(inbound{msg: msg}) {
					return
				}
				if req, isReq := msg.(*jsonrpc.Request); isReq && req.Method == methodShutdown {
					return // nothing after a shutdown is read
				}
			}
		}
		if eof {
			c.deliver(inbound{err: io.EOF})
			return
		}
	}
}

// deliver hands in to Read; false means the connection was closed.
func (c *stdioConn) deliver(in inbound) bool {
	select {
	case c.incoming <- in:
		return true
	case <-c.closed:
		return false
	}
}

// parseLine decodes line n. ok reports a message for Read; otherwise the line
// was blank, or it was answered here (err is that answer's write error).
func (c *stdioConn) parseLine(n int, line []byte, tooLong bool) (msg jsonrpc.Message, ok bool, err error) {
	refuse := func(code int64, id json.RawMessage, message string, data any) (jsonrpc.Message, bool, error) {
		c.opts.Logger.Warn("stdio: line refused", slog.Int("line", n), slog.Int64("code", code), slog.String("reason", message))
		return nil, false, c.writeError(id, code, message, data)
	}
	type lineData struct {
		Line int `json:"line"`
	}
	if tooLong {
		return refuse(jsonrpc.CodeInvalidRequest, nil,
			fmt.Sprintf("invalid request: line %d is longer than the limit of %s and was skipped", n, byteSize(c.opts.MaxLineBytes)),
			lineData{n})
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, false, nil // blank lines separate nothing: ignore them
	}
	if !json.Valid(line) {
		var raw json.RawMessage
		err := json.Unmarshal(line, &raw) // says what is wrong, and where
		if err == nil {
			err = errors.New("invalid JSON") // not reached: both use one scanner
		}
		var offset int64 = -1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			offset = se.Offset
		} else if errors.Is(err, io.ErrUnexpectedEOF) {
			offset = int64(len(line))
		}
		return refuse(jsonrpc.CodeParseError, nil,
			fmt.Sprintf("parse error: line %d is not valid JSON", n),
			struct {
				Line   int    `json:"line"`
				Offset int64  `json:"offset"`
				Error  string `json:"error"`
			}{n, offset, err.Error()})
	}
	switch line[0] {
	case '{':
		if c.opts.Fast != nil {
			if version := c.fastVersion(); version != "" {
				if call := c.opts.Fast.Take(line, version); call != nil {
					return nil, false, c.startFast(call)
				}
			}
		}
	case '[':
		return refuse(jsonrpc.CodeInvalidRequest, nil,
			"invalid request: a batch (JSON array) is not accepted; send one JSON-RPC message per line", lineData{n})
	default:
		return refuse(jsonrpc.CodeInvalidRequest, nil,
			fmt.Sprintf("invalid request: a JSON-RPC message is a JSON object, not %s", jsonKind(line[0])), lineData{n})
	}
	msg, derr := jsonrpc.DecodeMessage(line)
	if derr == nil {
		return msg, true, nil
	}
	id, why := diagnose(line, derr)
	return refuse(jsonrpc.CodeInvalidRequest, id, "invalid request: "+why, lineData{n})
}

// fastVersion returns the protocol version the session negotiated once its
// initialize answer is written, else "": the lines opts.Fast may take.
func (c *stdioConn) fastVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return ""
	}
	return c.version
}

// startFast records a call opts.Fast took and runs it on a goroutine of its
// own, which writes its answer and then retires it. err is the write error
// of the answer to a duplicate id.
func (c *stdioConn) startFast(call *Call) error {
	if !c.record(call.ID, "tools/call") {
		return c.refuseDuplicate(call.ID)
	}
	ctx, cancel := context.WithCancelCause(c.base)
	c.mu.Lock()
	c.fast[call.ID] = cancel
	c.mu.Unlock()
	go func() {
		answer := call.Run(ctx)
		cancel(nil)
		// As go-sdk's answers (Write): the id is free again before the
		// client can read the answer; a drain waits for the write.
		c.mu.Lock()
		delete(c.fast, call.ID)
		delete(c.pending, call.ID)
		c.writing++
		c.mu.Unlock()
		c.writeMu.Lock()
		select {
		case <-c.closed: // the session ended: nothing more is written
		default:
			if err := answer(c.w); err != nil {
				c.opts.Logger.Warn("stdio: writing an answer failed", slog.String("error", err.Error()))
			}
		}
		c.writeMu.Unlock()
		c.mu.Lock()
		c.writing--
		c.settledLocked()
		c.mu.Unlock()
	}()
	return nil
}

// cancelFast cancels the call opts.Fast took that a notifications/cancelled
// names (params.requestId, compared as go-sdk's jsonrpc2 compares ids), if
// it is running: with cause context.Canceled, what go-sdk gives a handler's
// context for the same notification.
func (c *stdioConn) cancelFast(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	c.mu.Lock()
	cancel := c.fast[id]
	c.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// diagnose says what makes a JSON object not a JSON-RPC message, once
// jsonrpc.DecodeMessage refused it, and returns its id when that is usable,
// so that the client can match the answer to its call.
func diagnose(line []byte, derr error) (id json.RawMessage, why string) {
	var m struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil, derr.Error()
	}
	idOK := len(m.ID) > 0 && (m.ID[0] == '"' || m.ID[0] == '-' || m.ID[0] >= '0' && m.ID[0] <= '9')
	if idOK {
		id = m.ID
	}
	switch {
	case len(m.JSONRPC) == 0:
		return id, `missing "jsonrpc": "2.0"`
	case string(m.JSONRPC) != `"2.0"`:
		return id, fmt.Sprintf(`"jsonrpc" is %s; it must be "2.0"`, m.JSONRPC)
	case len(m.ID) > 0 && string(m.ID) != "null" && !idOK:
		return nil, fmt.Sprintf(`"id" is %s; it must be a string or a number`, jsonKind(m.ID[0]))
	case len(m.Method) > 0 && m.Method[0] != '"':
		return id, fmt.Sprintf(`"method" is %s; it must be a string`, jsonKind(m.Method[0]))
	case len(m.Method) == 0 && !idOK:
		return nil, `the object has neither "method" (a request) nor "id" (a response)`
	}
	return id, derr.Error()
}

// jsonKind names the kind of JSON value that starts with b.
func jsonKind(b byte) string {
	switch {
	case b == '{':
		return "an object"
	case b == '[':
		return "an array"
	case b == '"':
		return "a string"
	case b == 't' || b == 'f':
		return "a boolean"
	case b == 'n':
		return "null"
	default:
		return "a number"
	}
}

// byteSize writes n bytes for a message: "4194304 bytes (4 MiB)".
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
