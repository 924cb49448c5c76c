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
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcpgate/mcpgate/upstream"
)

// Forward is the lean tools/call: one POST on a reused Streamable HTTP
// session, its answer read as it comes (JSON, or an event stream whose
// notifications go to note), without go-sdk's client connection in
// between. It is hand-written where go-sdk's ClientSession serves because
// that hop cost the gateway more than the upstream's own work per call
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
// later, a stdio child and a legacy SSE upstream are not its: it returns
// [ErrNotForwarded] before sending anything, and the caller uses
// [Upstream.CallTool].
//
// The result is the upstream's JSON-RPC result, whole, with the hop's own
// fields taken out (resultType, and the io.modelcontextprotocol/ keys of
// _meta). An upstream's JSON-RPC error is returned as CallTool returns
// it. note receives each notifications/message (a log line, at the level
// the session asked for) that arrives on the call's stream before its
// result, in order; other notifications are the session's business and
// are dropped, and a request of the upstream's is answered "method not
// found" (a stateless caller can be asked nothing). note may be nil.
func (u *Upstream) Forward(ctx context.Context, cred Credential, version string, p *ForwardParams, note func(msg []byte)) (json.RawMessage, error) {
	if u.endpoint == "" || u.cfg.Transport == TransportSSE {
		return nil, ErrNotForwarded
	}
	if u.cfg.ProtocolVersion != "" {
		version = "" // the pinned version's session
	}
	if version >= "2026-07-28" {
		return nil, ErrNotForwarded
	}
	if err := u.downErr(); err != nil {
		return nil, err
	}
	body, err := forwardBody(p)
	if err != nil {
		return nil, fmt.Errorf("federation: upstream %q: tools/call: %v", u.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	s := u.slotForVersion(cred, version)
	c := u.newCall(nil)
	c.ctx = ctx
	for attempt := 0; ; attempt++ {
		cs, err := s.session(ctx)
		if err != nil {
			return nil, u.callErr(ctx, "tools/call", fmt.Errorf("connecting: %w", err))
		}
		negotiated := cs.InitializeResult().ProtocolVersion
		if negotiated >= "2026-07-28" {
			return nil, ErrNotForwarded
		}
		// Listed while in flight, so that a log message on the session's
		// own stream is not taken for another call's (soleCall).
		s.begin(c)
		res, err := u.post(ctx, cs, cred, negotiated, body, note)
		s.endForwarded(c)
		switch {
		case err == nil:
			u.answeredNow()
			return res, nil
		case ctx.Err() != nil:
			return nil, u.callErr(ctx, "tools/call", err)
		case answered(err):
			u.answeredNow()
			return nil, u.callErr(ctx, "tools/call", err)
		}
		s.drop(cs)
		if attempt == 0 && notSent(err) {
			u.log.Debug("upstream session lost; starting another", "method", "tools/call", "error", err)
			continue
		}
		if !notSent(err) {
			err = fmt.Errorf("the session was lost, the call may have run: %w", err)
		}
		return nil, u.callErr(ctx, "tools/call", err)
	}
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
}

// forwardBody is the JSON-RPC request of p, with the id 1: one request
// per POST, whose answer comes on that POST, needs no id of its own. It is
// written by hand (the name quoted by encoding/json, the arguments as the
// caller's checked bytes): go-sdk's encoder took 4% of the gateway's CPU
// per forwarded call.
func forwardBody(p *ForwardParams) ([]byte, error) {
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
	b = append(b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`...)
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

// post sends one forwarded call on cs and reads its answer.
func (u *Upstream) post(ctx context.Context, cs *mcp.ClientSession, cred Credential, version string, body []byte, note func([]byte)) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Mcp-Protocol-Version", version)
	if id := cs.ID(); id != "" {
		h.Set("Mcp-Session-Id", id)
	}
	if cred != "" {
		h.Set("Authorization", string(cred)) // the endpoint's origin: guard refuses any other
	}
	resp, err := u.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			u.cancelForwarded(cs, cred, version)
			return nil, ctx.Err()
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			// No connection, so nothing sent: go-sdk's code for a request
			// its transport refused.
			return nil, &jsonrpc.Error{Code: -32005, Message: fmt.Sprintf("sending: %v", err)}
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && cs.ID() != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, mcp.ErrSessionMissing
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, hostile("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(snippet)))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var res json.RawMessage
	switch mt {
	case "application/json":
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, u.lostRead(ctx, cs, cred, version, err)
		}
		m, err := parseMessage(data)
		if err != nil {
			return nil, hostile("tools/call: the answer is not JSON-RPC: %v", err)
		}
		if res, err = u.answer(m); err != nil {
			return nil, err
		}
	case "text/event-stream":
		res, err = u.readEvents(ctx, cs, cred, version, resp.Body, note)
		if err != nil {
			return nil, err
		}
	default:
		return nil, hostile("tools/call answered with Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return stripHop(res)
}

// lostRead is a failure to read an answer that was under way: the call
// reached the upstream and may have run.
func (u *Upstream) lostRead(ctx context.Context, cs *mcp.ClientSession, cred Credential, version string, err error) error {
	if ctx.Err() != nil {
		u.cancelForwarded(cs, cred, version)
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

// answer reads one JSON-RPC message meant as the call's answer.
func (u *Upstream) answer(m *wireMessage) (json.RawMessage, error) {
	if m.Method != "" || string(m.ID) != "1" {
		return nil, hostile("tools/call: the answer is not the call's response")
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if len(m.Result) == 0 {
		return nil, hostile("tools/call: the response has neither result nor error")
	}
	return m.Result, nil
}

// readEvents reads the call's event stream until its response: log
// messages go to note, a request of the upstream's is refused.
func (u *Upstream) readEvents(ctx context.Context, cs *mcp.ClientSession, cred Credential, version string, body io.Reader, note func([]byte)) (json.RawMessage, error) {
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
			return nil, u.lostRead(ctx, cs, cred, version, err)
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
				return u.answer(m)
			case len(m.ID) > 0 && string(m.ID) != "null":
				u.refuse(cs, cred, version, m)
			case m.Method == "notifications/message":
				u.logs.Store(true)
				if note != nil {
					note(bytes.Clone(data.Bytes()))
				}
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

// refuse answers a request the upstream sent on a forwarded call's stream:
// the caller is stateless and can be asked nothing (the gateway offered no
// such capability to a stateless caller's upstream session).
func (u *Upstream) refuse(cs *mcp.ClientSession, cred Credential, version string, r *wireMessage) {
	if cs == nil {
		return // no session to answer on (FuzzForwardAnswer reads streams without one)
	}
	msg, err := json.Marshal(r.Method + ": the caller is stateless and cannot be asked")
	if err != nil {
		return
	}
	data := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, r.ID, jsonrpc.CodeMethodNotFound, msg)
	go u.postMessage(cs, cred, version, data)
}

// cancelForwarded tells the upstream that the caller gave up on the call
// (notifications/cancelled), as go-sdk's client does for its calls.
func (u *Upstream) cancelForwarded(cs *mcp.ClientSession, cred Credential, version string) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":1,"reason":"cancelled by the caller"}`)})
	if err == nil {
		go u.postMessage(cs, cred, version, data)
	}
}

// postMessage sends one message that expects no answer but 202, within a
// few seconds, on the upstream's own context.
func (u *Upstream) postMessage(cs *mcp.ClientSession, cred Credential, version string, data []byte) {
	ctx, cancel := context.WithTimeout(u.ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.endpoint, bytes.NewReader(data))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if id := cs.ID(); id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if cred != "" {
		req.Header.Set("Authorization", string(cred))
	}
	resp, err := u.http.Do(req)
	if err != nil {
		u.log.Debug("upstream message not delivered", "error", err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}

// stripHop takes the upstream hop's own fields out of a tools/call result
// (see CallTool): resultType, and _meta's io.modelcontextprotocol/ keys.
// A result without them is returned as it came, unparsed.
func stripHop(res json.RawMessage) (json.RawMessage, error) {
	if len(res) == 0 || res[0] != '{' {
		return nil, hostile("tools/call: the result is not a JSON object")
	}
	if !bytes.Contains(res, []byte(`"resultType"`)) && !bytes.Contains(res, []byte(hopMetaPrefix)) {
		return res, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, hostile("tools/call: the result is not a JSON object: %v", err)
	}
	delete(m, "resultType")
	if raw, ok := m["_meta"]; ok {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(raw, &meta); err == nil {
			for k := range meta {
				if strings.HasPrefix(k, hopMetaPrefix) {
					delete(meta, k)
				}
			}
			if len(meta) == 0 {
				delete(m, "_meta")
			} else if b, err := json.Marshal(meta); err == nil {
				m["_meta"] = b
			}
		}
	}
	return json.Marshal(m)
}

// versionKey is the pool key of a session of cred speaking version.
func versionKey(cred Credential, version string) string {
	return cred.key() + "@" + strconv.Quote(version)
}
