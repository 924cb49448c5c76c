package gateway

import (
	"cmp"
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
// fast path: the request checked as go-sdk's handler would check it
// (checkFederated), then forwarded by federation's lean hop on a session
// of the caller's protocol version (Upstream.Forward), its result bytes
// passed through. The caller asked for no progress (sdkHandsOff) and can
// be asked nothing (stateless), so what may come back before the result
// is the upstream's log messages: go-sdk's ephemeral stateless session
// streams those to an old-protocol caller (it logs at "info", the level
// the gateway asks its upstreams for), and so does this answer — JSON
// when nothing came before the result, an event stream from the first
// log message on.
//
// An upstream Forward does not speak to (stdio, legacy SSE, a session
// that negotiated 2026-07-28) is called through its go-sdk session, as
// go-sdk's handler would.
func (f *fastPath) serveFederated(w http.ResponseWriter, r *http.Request, id []byte, t *Tool, req *mcp.CallToolRequest) {
	g, ctx := f.g, r.Context()
	if h := upstream.AnswerHoldFrom(ctx); h != nil {
		h.Cost = &fastAnswerCost
	}
	cred, failed := g.checkFederated(ctx, t, req)
	if failed != nil {
		f.writeCallResult(w, id, failed)
		return
	}
	// go-sdk reads a request without the header as 2025-03-26.
	version := cmp.Or(r.Header.Get("Mcp-Protocol-Version"), "2025-03-26")
	s := &eventAnswer{w: w, id: id}
	start := time.Now()
	res, err := g.federated[t.Upstream].Forward(ctx, cred, version, &federation.ForwardParams{
		Name: t.Federated.Name, Arguments: req.Params.Arguments, Meta: req.Params.Meta,
	}, s.log)
	switch {
	case errors.Is(err, federation.ErrNotForwarded):
		f.writeCallResult(w, id, g.sendFederated(ctx, t, req, cred, nil))
	case err != nil:
		s.result(f, g.federatedError(ctx, t, req, err), nil)
	default:
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeOK, Status: http.StatusOK, Elapsed: time.Since(start)})
		s.result(f, nil, res)
	}
}

// eventAnswer is the answer to a forwarded call: JSON, unless a log
// message comes before the result, which turns it into an event stream
// (go-sdk's event: message, data: the JSON-RPC message).
type eventAnswer struct {
	w       http.ResponseWriter
	id      []byte
	started bool
}

// log relays one notifications/message of the upstream's, re-encoded
// from the fields the protocol defines (as go-sdk's ServerSession.Log
// would send it): nothing else of the upstream's message reaches the
// caller. One that does not decode is dropped.
func (s *eventAnswer) log(msg []byte) {
	var n struct {
		Params mcp.LoggingMessageParams `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil || n.Params.Level == "" {
		return
	}
	params, err := json.Marshal(&mcp.LoggingMessageParams{Level: n.Params.Level, Logger: n.Params.Logger, Data: n.Params.Data})
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

// result ends the answer with res, or with raw, a result's JSON as the
// upstream sent it (its hop's own fields taken out).
func (s *eventAnswer) result(f *fastPath, res *mcp.CallToolResult, raw json.RawMessage) {
	if !s.started {
		if res != nil {
			f.writeCallResult(s.w, s.id, res)
		} else {
			sdkwire.WriteResult(s.w, s.id, raw)
		}
		return
	}
	if res != nil {
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		var err error
		if raw, err = res.MarshalJSON(); err != nil {
			raw = nil
		}
	}
	buf := sdkwire.GetBuffer()
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(s.id)
	if raw == nil {
		buf.WriteString(`,"error":{"code":-32603,"message":"marshaling call result"}}`)
	} else {
		buf.WriteString(`,"result":`)
		buf.Write(raw)
		buf.WriteByte('}')
	}
	s.event(buf.Bytes())
	sdkwire.PutBuffer(buf)
}
