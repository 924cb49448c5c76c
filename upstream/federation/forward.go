package federation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcpgate/mcpgate/upstream"
)

// Forward is the lean tools/call: one POST on a reused Streamable HTTP
// session, its answer read as it comes (JSON, or an event stream whose log
// messages go to note), without go-sdk's client connection in between. It
// is hand-written where go-sdk's ClientSession serves because that hop
// cost the gateway more than the upstream's own work per call
// (docs/performance.md, "Federated tools/call"; cmd/mcpgate-bench -targets
// mcp,federated measures it). go-sdk still makes, keeps and re-makes the
// session (its handshake, its GET stream, list_changed): Forward borrows
// its id and negotiated version.
//
// It takes what a caller's stateless request can carry: no progress token
// (the caller asked for none, so none is sent), no 2026-07-28 framing. It
// speaks version — the caller's — to the upstream on a session of that
// version, as the upstream supports it (a pinned mcp.protocol_version
// wins), so a caller's call costs the upstream what the caller's own
// request would. A session whose negotiated version is 2026-07-28 or
// later is not its: it returns [ErrNotForwarded] before sending anything,
// and the caller uses [Upstream.CallTool]; nor are a stdio child and a
// legacy SSE upstream (see [Upstream.Forwards]).
//
// Each call has an id of its own (several callers may share the session),
// and its answer must carry it. The result is decoded and rebuilt as
// CallTool's is — content of the known types, structuredContent, isError,
// _meta without the hop's own keys — so that what a caller gets does not
// depend on the path. An upstream's JSON-RPC error is returned as an
// error, and a call that reached the upstream is never sent again unless
// p.Idempotent. note receives each notifications/message at or above the
// level the gateway asks its upstreams for ([Options.LogLevel]) that
// arrives on the call's stream before its result, in order; other
// notifications are the session's business and are dropped, and a request
// of the upstream's is answered "method not found" (a stateless caller can
// be asked nothing) — at most [maxRefusals] of them, past which the call
// fails. note may be nil.
func (u *Upstream) Forward(ctx context.Context, cred Credential, version string, p *ForwardParams, note func(*mcp.LoggingMessageParams)) (*mcp.CallToolResult, error) {
	if !u.Forwards() {
		return nil, ErrNotForwarded
	}
	if u.cfg.ProtocolVersion != "" {
		version = "" // the pinned version's session
	}
	if version >= "2026-07-28" {
		return nil, ErrNotForwarded
	}
	id := u.tokenPrefix + "fwd-" + strconv.FormatUint(u.seq.Add(1), 10)
	body, err := forwardBody(id, p)
	if err != nil {
		return nil, fmt.Errorf("federation: upstream %q: tools/call: %v", u.name, err)
	}
	c := u.newCall(nil)
	c.forwarded = true
	h := &hop{u: u, cred: cred, id: id, note: note}
	var res *mcp.CallToolResult
	err = u.doOn(ctx, u.slotOf(cred, version, true), "tools/call", p.Idempotent, c, func(ctx context.Context, cs *mcp.ClientSession) error {
		h.cs, h.version = cs, cs.InitializeResult().ProtocolVersion
		if h.version >= "2026-07-28" {
			return ErrNotForwarded
		}
		var err error
		res, err = h.post(ctx, body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Forwards reports whether [Upstream.Forward] speaks to the upstream: a
// Streamable HTTP one. Whether a session's negotiated version lets it is
// known only once the session is made.
func (u *Upstream) Forwards() bool {
	return u.endpoint != "" && u.cfg.Transport != TransportSSE
}

// maxRefusals bounds the requests an upstream may put on one forwarded
// call's stream: each is refused by a POST of its own, and an answer
// within max_response_bytes could hold hundreds of thousands.
const maxRefusals = 4

// hop is one forwarded call on one session.
type hop struct {
	u       *Upstream
	cs      *mcp.ClientSession
	cred    Credential
	version string // the session's negotiated protocol version
	id      string // the call's JSON-RPC id
	note    func(*mcp.LoggingMessageParams)
	refused int
}

// ErrNotForwarded says [Upstream.Forward] sent nothing: the upstream, or
// the session it would use, is not one it speaks to.
var ErrNotForwarded = errors.New("federation: not a call Forward makes")

// ForwardParams are the params of a forwarded tools/call: the upstream's
// tool name, the caller's arguments (checked), and the caller's _meta
// (its hop's own keys are not sent).
type ForwardParams struct {
	Name      string
	Arguments json.RawMessage
	Meta      mcp.Meta
	// Idempotent allows sending the call again on a new session when the
	// old one was lost while the call was in flight (as CallTool's).
	Idempotent bool
}

// forwardBody is the JSON-RPC request of p with the string id id. It is
// written by hand (the name quoted by encoding/json, the arguments as the
// caller's checked bytes): go-sdk's encoder took 4% of the gateway's CPU
// per forwarded call.
func forwardBody(id string, p *ForwardParams) ([]byte, error) {
	name, err := json.Marshal(p.Name)
	if err != nil {
		return nil, err
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if !json.Valid(args) {
		return nil, errors.New("the arguments are not JSON")
	}
	b := make([]byte, 0, 80+len(name)+len(args))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...) // letters, digits and dashes
	b = append(b, `","method":"tools/call","params":{`...)
	meta := withoutHopMeta(p.Meta)
	delete(meta, "progressToken")
	if len(meta) > 0 {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		b = append(b, `"_meta":`...)
		b = append(b, m...)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = append(b, name...)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	return append(b, "}}"...), nil
}

// post sends the call and reads its answer.
func (h *hop) post(ctx context.Context, body []byte) (*mcp.CallToolResult, error) {
	u := h.u
	req, err := h.request(ctx, body)
	if err != nil {
		return nil, err
	}
	resp, err := u.fwd.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			h.cancelled()
			return nil, ctx.Err()
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return nil, &notSentError{err} // no connection, so nothing sent
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && h.cs.ID() != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, mcp.ErrSessionMissing
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, hostile("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet)))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var m *wireMessage
	switch mt {
	case "application/json":
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, h.lostRead(ctx, err)
		}
		if m, err = parseMessage(data); err != nil {
			return nil, hostile("tools/call: the answer is not JSON-RPC: %v", err)
		}
	case "text/event-stream":
		if m, err = h.readEvents(ctx, resp.Body); err != nil {
			return nil, err
		}
	default:
		return nil, hostile("tools/call answered with Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return h.result(ctx, m)
}

// request is a POST of body on the session.
func (h *hop) request(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.u.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hd := req.Header
	hd.Set("Content-Type", "application/json")
	hd.Set("Accept", "application/json, text/event-stream")
	hd.Set("Mcp-Protocol-Version", h.version)
	if id := h.cs.ID(); id != "" {
		hd.Set("Mcp-Session-Id", id)
	}
	if h.cred != "" {
		hd.Set("Authorization", string(h.cred)) // the endpoint's origin: guard refuses any other
	}
	return req, nil
}

// notSentError is a failure before anything reached the upstream.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "sending: " + e.err.Error() }

// upstreamError is the upstream's JSON-RPC error answer to a forwarded
// call: answered, whatever its code (the server-error range go-sdk also
// uses for its own transport failures is the upstream's to use too).
type upstreamError struct{ e *jsonrpc.Error }

func (e *upstreamError) Error() string { return e.e.Error() }

// lostRead is a failure to read an answer that was under way: the call
// reached the upstream and may have run.
func (h *hop) lostRead(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		h.cancelled()
		return ctx.Err()
	}
	var he *hostileError // cappedBody's: the answer was too large
	if errors.As(err, &he) {
		return err
	}
	return fmt.Errorf("reading the answer: %w", err)
}

// wireMessage is one JSON-RPC message of a forwarded call's answer: a
// response, a notification or a request of the upstream's.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// parseMessage decodes one message as go-sdk's jsonrpc.DecodeMessage
// would (segmentio's decoder, fields matched case-sensitively, nested at
// most as deep as go-sdk allows), into raw parts: go-sdk's decoder takes
// a fresh 100+ KB buffer per message, 72% of what the gateway allocated
// per forwarded call.
func parseMessage(data []byte) (*wireMessage, error) {
	if !upstream.WithinDepth(data, maxDepth) {
		return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	var m wireMessage
	if _, err := sjson.Parse(data, &m, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, err
	}
	if m.JSONRPC != "2.0" {
		return nil, fmt.Errorf("jsonrpc is %q, not 2.0", m.JSONRPC)
	}
	return &m, nil
}

// maxDepth is go-sdk's (internal/json defaultMaxDepth).
const maxDepth = 1000

// result reads the message meant as the call's answer: its response, by
// its id, decoded as go-sdk's client decodes a tools/call result and
// rebuilt as CallTool rebuilds it.
func (h *hop) result(ctx context.Context, m *wireMessage) (*mcp.CallToolResult, error) {
	var id string
	if m.Method != "" || json.Unmarshal(m.ID, &id) != nil || id != h.id {
		return nil, hostile("tools/call: the answer is not the call's response")
	}
	if m.Error != nil {
		return nil, &upstreamError{m.Error}
	}
	if len(m.Result) == 0 {
		return nil, hostile("tools/call: the response has neither result nor error")
	}
	// Counted before it is decoded: a hostile upstream's answer of nested
	// empty lists decodes to about 70 bytes a byte.
	release, err := h.u.opts.ResponseBudget.HoldAnswer(ctx, m.Result, h.u.opts.QueueTimeout)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &busyError{err.Error()} // callErr names the upstream and the method
	}
	// Nothing to give back when the call's AnswerHold keeps it until the
	// answer is written.
	defer release()
	res, err := decodeCallToolResult(m.Result) // go-sdk's decoding, without its fresh decoder
	if err != nil {
		return nil, hostile("tools/call: the result does not decode: %v", err)
	}
	return &mcp.CallToolResult{Meta: withoutHopMeta(res.Meta), Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}, nil
}

// readEvents reads the call's event stream until its response: log
// messages go to note, a request of the upstream's is refused.
func (h *hop) readEvents(ctx context.Context, body io.Reader) (*wireMessage, error) {
	br := bufio.NewReaderSize(body, 4096)
	var data bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long data line: read the rest of it (the body is bounded
			// by max_response_bytes). What ReadSlice returned is the
			// reader's buffer, which the next read overwrites: copy first.
			head := bytes.Clone(line)
			rest, rerr := br.ReadBytes('\n')
			line, err = append(head, rest...), rerr
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("the event stream ended before the call's response: %w", io.ErrUnexpectedEOF)
			}
			return nil, h.lostRead(ctx, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data.Len() == 0 {
				continue
			}
			m, derr := parseMessage(data.Bytes())
			if derr != nil {
				return nil, hostile("tools/call: an event is not JSON-RPC: %v", derr)
			}
			switch {
			case m.Method == "":
				return m, nil
			case len(m.ID) > 0 && string(m.ID) != "null":
				if h.refused++; h.refused > maxRefusals {
					return nil, hostile("tools/call: the upstream sent more than %d requests on a stateless caller's call", maxRefusals)
				}
				h.refuse(m)
			case m.Method == "notifications/message":
				h.u.logs.Store(true)
				h.log(m.Params)
			}
			data.Reset()
		case bytes.HasPrefix(line, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
		if err != nil { // io.EOF after a last line without its newline
			return nil, fmt.Errorf("the event stream ended before the call's response: %w", io.ErrUnexpectedEOF)
		}
	}
}

// log hands a log message to note when its level is at least the one the
// gateway asked the upstream for: an upstream that ignores
// logging/setLevel does not get its debug lines to the caller, as the
// caller's own session would not have sent them (go-sdk's path).
func (h *hop) log(params json.RawMessage) {
	if h.note == nil {
		return
	}
	var p mcp.LoggingMessageParams
	if json.Unmarshal(params, &p) != nil || !atLeast(p.Level, h.u.opts.LogLevel) {
		return
	}
	h.note(&mcp.LoggingMessageParams{Level: p.Level, Logger: p.Logger, Data: p.Data})
}

// logLevels are the syslog levels of MCP logging, lowest first.
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// atLeast reports whether level is a known level at or above min ("" : any
// known level).
func atLeast(level, min mcp.LoggingLevel) bool {
	i := slices.Index(logLevels, level)
	return i >= 0 && i >= slices.Index(logLevels, min)
}

// refuse answers a request the upstream sent on a forwarded call's stream:
// the caller is stateless and can be asked nothing (the gateway offered no
// such capability to a stateless caller's upstream session).
func (h *hop) refuse(r *wireMessage) {
	if h.cs == nil {
		return // no session to answer on (FuzzForwardAnswer reads streams without one)
	}
	msg, err := json.Marshal(r.Method + ": the caller is stateless and cannot be asked")
	if err != nil {
		return
	}
	go h.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, r.ID, jsonrpc.CodeMethodNotFound, msg))
}

// cancelled tells the upstream that the caller gave up on the call
// (notifications/cancelled, naming the call's own id), as go-sdk's client
// does for its calls.
func (h *hop) cancelled() {
	go h.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%q,"reason":"cancelled by the caller"}}`, h.id))
}

// send posts one message that expects no answer but 202, within a few
// seconds, on the upstream's own context.
func (h *hop) send(data []byte) {
	ctx, cancel := context.WithTimeout(h.u.ctx, 5*time.Second)
	defer cancel()
	req, err := h.request(ctx, data)
	if err != nil {
		return
	}
	resp, err := h.u.fwd.Do(req)
	if err != nil {
		h.u.log.Debug("upstream message not delivered", "error", h.u.redact(err))
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}

// versionKey is the pool key of a session of cred speaking version.
func versionKey(cred Credential, version string) string {
	return cred.key() + "@" + strconv.Quote(version)
}
