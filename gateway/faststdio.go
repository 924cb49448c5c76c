package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/gateway/stdio"
)

// stdioFast is the fast path behind the stdio transport (stdio.Options.Fast):
// it answers a tools/call line itself where go-sdk would decode it four
// times, each with a fresh 32 KiB buffer (docs/go-sdk-decoder.md), and
// hands the transport every other line for go-sdk, unchanged.
//
// It takes a line only when go-sdk would run it as the same call, and
// answers it as go-sdk's session would:
//
//   - the transport offers lines only once initialize has been answered
//     (go-sdk refuses calls before), with the protocol version negotiated;
//     it takes them only at the versions the HTTP fast path answers
//     ([fastVersions]; 2026-07-28 changes the answers);
//   - one JSON-RPC 2.0 request, method tools/call, an id go-sdk echoes as
//     sent, params as fastPath.callOf takes them (no progress token, no
//     2026-07-28 _meta, not a search meta-call, a tool it knows or one go-sdk
//     would call unknown), and no params.task;
//   - not a federated tool: its MCP server's log messages and requests back
//     go through go-sdk's session;
//   - the call runs the tool handler go-sdk would run ([Gateway.handler]),
//     with the request go-sdk builds over stdio (no Extra, no header: the
//     same credentials, log line and caller), counted in
//     mcpgate_rpc_requests_total and traced as go-sdk's middleware would
//     (countMethods, traceStdio); a notifications/cancelled reaches it as
//     go-sdk's does (the transport cancels its context with
//     context.Canceled, which a playbook call reads as the client's
//     cancellation: clientCancelled);
//   - the answer is written as the HTTP fast path writes it
//     (answerWriter), as one line.
//
// TestStdioFastDifferential and FuzzStdio hold its answers to go-sdk's.
type stdioFast struct{ f *fastPath }

// stdioFast returns the transport's fast path, or nil (every line to
// go-sdk) when the gateway has none (Options.DisableFastPath, MCPGODEBUG).
// A stateful config's gateway has one too (it answers calls on sessions):
// its calls over stdio are taken the same way.
func (g *Gateway) stdioFast() stdio.Fast {
	if g.fast == nil {
		return nil
	}
	return stdioFast{g.fast}
}

// taskMember is how a task-augmented call's params start a member.
var taskMember = []byte(`"task"`)

// Take implements stdio.Fast.
func (s stdioFast) Take(line []byte, version string) *stdio.Call {
	if version == "" || !slices.Contains(fastVersions, version) {
		return nil
	}
	msg := readMessage(line)
	if !msg.ok || msg.VersionTag != "2.0" || msg.method != "tools/call" {
		return nil
	}
	id, ok := sdkwire.EchoID(msg.ID)
	if !ok {
		return nil
	}
	jid, ok := stdioID(msg.ID)
	if !ok {
		return nil
	}
	if bytes.Contains(msg.Params, taskMember) {
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		if !sdkwire.Parse(msg.Params, &p) || p.Task != nil {
			return nil // the task door's, or go-sdk's
		}
	}
	f := s.f
	t, p, ok := f.callOf(msg.Params)
	if !ok || t != nil && t.Federated != nil {
		return nil
	}
	f.g.metrics.rpcMethod("tools/call") // countMethods counts go-sdk's
	if f.onServe != nil {
		f.onServe()
	}
	return &stdio.Call{ID: jid, Run: func(ctx context.Context) func(io.Writer) error {
		return f.runStdio(ctx, id, t, p)
	}}
}

// stdioID is a request id as go-sdk's jsonrpc2 reads it (MakeID), from an
// id sdkwire.EchoID accepted.
func stdioID(raw []byte) (jsonrpc.ID, bool) {
	var v any
	if raw[0] == '"' {
		var s string
		if !sdkwire.Parse(raw, &s) {
			return jsonrpc.ID{}, false
		}
		v = s
	} else {
		n, ok := sdkwire.ExactID(raw)
		if !ok {
			return jsonrpc.ID{}, false
		}
		v = float64(n)
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// runStdio runs one call taken from a stdio line and returns its answer;
// t nil is a tool go-sdk does not know.
func (f *fastPath) runStdio(ctx context.Context, id []byte, t *Tool, p *mcp.CallToolParamsRaw) func(io.Writer) error {
	g := f.g
	if g.tracer != nil {
		// traceStdio's span, for a request go-sdk does not see.
		c, span := startRequestSpan(ctx, g.tracer, nil, "tools/call", p.Name)
		defer span.End()
		ctx = c
		if t == nil {
			span.SetStatus(codes.Error, "the request failed")
		}
	}
	if t == nil {
		return func(w io.Writer) error {
			return writeErrorLine(w, id, jsonrpc.CodeInvalidParams, unknownTool(p.Name))
		}
	}
	res, err := g.handler(t)(ctx, &mcp.CallToolRequest{Params: p})
	if err != nil {
		// Not returned by the handlers stdioFast runs; go-sdk would answer
		// an internal error.
		return func(w io.Writer) error {
			return writeErrorLine(w, id, jsonrpc.CodeInternalError, err.Error())
		}
	}
	return func(w io.Writer) error { return writeCallLine(w, id, res) }
}

// writeCallLine writes the answer to a tools/call with res as one line, as
// fastPath.writeCallResult writes it to a POST.
func writeCallLine(w io.Writer, id []byte, res *mcp.CallToolResult) error {
	if res.Content == nil {
		res.Content = []mcp.Content{} // Server.callTool: avoid "null"
	}
	buf := sdkwire.GetBuffer()
	defer sdkwire.PutBuffer(buf)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	buf.WriteString(`,"result":`)
	if plainResult(res) {
		a := answerWriter{buf: buf, w: w}
		if a.callResult(res) {
			buf.WriteString("}\n")
			a.flush()
			return a.err
		}
		// It wrote nothing: buf holds the head.
	}
	data, err := res.MarshalJSON()
	if err != nil {
		return writeErrorLine(w, id, jsonrpc.CodeInternalError, fmt.Sprintf("marshaling call result: %v", err))
	}
	buf.Write(data)
	buf.WriteString("}\n")
	_, err = w.Write(buf.Bytes())
	return err
}

// writeErrorLine writes a JSON-RPC error answer as one line, as go-sdk's
// wire form has it (sdkwire.WriteError).
func writeErrorLine(w io.Writer, id []byte, code int64, message string) error {
	buf := sdkwire.GetBuffer()
	defer sdkwire.PutBuffer(buf)
	sdkwire.AppendError(buf, id, code, message)
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
