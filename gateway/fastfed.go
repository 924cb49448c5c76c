package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// serveFederated answers a stateless tools/call of a federated tool on the
// fast path, and reports whether it did: the request checked as go-sdk's
// handler would check it (checkFederated), then forwarded by federation's
// lean hop on a session of the caller's protocol version
// (Upstream.Forward). The caller asked for no progress (sdkHandsOff) and
// can be asked nothing (stateless), so what may come back before the
// result is the upstream's log messages: go-sdk's ephemeral stateless
// session streams those to an old-protocol caller (it logs at "info", the
// level the gateway asks its upstreams for), and so does this answer —
// JSON when nothing came before the result, an event stream from the
// first log message on.
//
// An upstream Forward does not speak to (stdio, legacy SSE, a session that
// negotiated 2026-07-28) is go-sdk's session's to serve, which relays its
// log messages: serveFederated then writes nothing and returns false.
func (f *fastPath) serveFederated(w http.ResponseWriter, r *http.Request, id []byte, t *Tool, req *mcp.CallToolRequest) bool {
	g, ctx := f.g, r.Context()
	up := g.federated[t.Upstream]
	if !up.Forwards() {
		return false
	}
	cred, failed := g.checkFederated(ctx, t, req)
	if failed != nil {
		holdFastCost(ctx)
		f.writeCallResult(w, id, failed)
		return true
	}
	// go-sdk reads a request without the header as 2025-03-26.
	version := cmp.Or(r.Header.Get("Mcp-Protocol-Version"), "2025-03-26")
	s := &eventAnswer{w: w, id: id}
	start := time.Now()
	res, err := up.Forward(ctx, cred, version, &federation.ForwardParams{
		Name: t.Federated.Name, Arguments: req.Params.Arguments, Meta: req.Params.Meta,
		Idempotent: federatedIdempotent(t),
	}, s.log)
	if errors.Is(err, federation.ErrNotForwarded) {
		return false // nothing sent, nothing written
	}
	holdFastCost(ctx)
	if err != nil {
		res = g.federatedError(ctx, t, req, err)
	} else {
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeOK, Status: http.StatusOK, Elapsed: time.Since(start)})
	}
	s.result(f, res)
	return true
}

// eventAnswer is the answer to a forwarded call: JSON, unless a log
// message comes before the result, which turns it into an event stream
// (go-sdk's event: message, data: the JSON-RPC message).
type eventAnswer struct {
	w       http.ResponseWriter
	id      []byte
	started bool
}

// log relays one of the upstream's log messages, as go-sdk's
// ServerSession.Log would send it.
func (s *eventAnswer) log(p *mcp.LoggingMessageParams) {
	params, err := json.Marshal(p)
	if err != nil {
		return
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/message", Params: params})
	if err != nil {
		return
	}
	s.event(data)
}

func (s *eventAnswer) event(data []byte) {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Connection", "keep-alive")
		s.w.WriteHeader(http.StatusOK)
	}
	buf := sdkwire.GetBuffer()
	buf.WriteString("event: message\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	_, _ = s.w.Write(buf.Bytes())
	sdkwire.PutBuffer(buf)
	_ = http.NewResponseController(s.w).Flush()
}

// result ends the answer with res.
func (s *eventAnswer) result(f *fastPath, res *mcp.CallToolResult) {
	if !s.started {
		f.writeCallResult(s.w, s.id, res)
		return
	}
	if res.Content == nil {
		res.Content = []mcp.Content{} // Server.callTool: avoid "null"
	}
	buf := sdkwire.GetBuffer()
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(s.id)
	if raw, err := res.MarshalJSON(); err != nil {
		buf.WriteString(`,"error":{"code":-32603,"message":"marshaling call result"}}`)
	} else {
		buf.WriteString(`,"result":`)
		buf.Write(raw)
		buf.WriteByte('}')
	}
	s.event(buf.Bytes())
	sdkwire.PutBuffer(buf)
}

// holdFastCost tells the response budget that the fast path writes the
// answer: through answerWriter's few KiB, or marshaled once
// (fastAnswerCost).
func holdFastCost(ctx context.Context) {
	if h := upstream.AnswerHoldFrom(ctx); h != nil {
		h.Cost = &fastAnswerCost
	}
}
