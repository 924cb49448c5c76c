package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// playbookHandler runs t's playbook for a tools/call on /mcp (or stdio).
// Progress goes to the client when it sent a progressToken and the answer
// is a stream: SSE over HTTP (go-sdk drops it from a JSON answer), or stdio.
// Cancellation: the run is left when the handler's ctx ends. A client that
// hung up (the front door) leaves it to the runner's linger, for a re-send;
// a client that sent notifications/cancelled has it cancelled upstream at
// once — in stateless mode through the front door's registry (cancel.go),
// in a stateful session and over stdio through go-sdk (see
// clientCancelled).
func (g *Gateway) playbookHandler(t *Tool) mcp.ToolHandler {
	pb, runner := t.Playbook, g.runners[t.Upstream]
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if sdkCancels(req) {
			var cancel context.CancelFunc
			ctx, cancel = clientCancelled(ctx)
			defer cancel()
		}
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header
		}
		ctx = g.callTrace(ctx, t, h)
		args, cred, err := g.startPlaybookCall(ctx, t, req, req.Params.Arguments)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		run := playbook.Request{Tool: t.Tool.Name, Path: pb.Path, Workload: pb.Workload(args), Cred: cred, Caller: g.callerID(req), Cancelled: cancelledOf(ctx)}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			run.Progress = func(p playbook.Progress) {
				// Errors are the client's stream gone: the run carries on
				// for a re-send, so there is nothing to do.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(p.Polls), Message: progressMessage(pb.Path, p),
				})
			}
		}
		out := runner.Run(ctx, run)
		g.logRun(ctx, t, out)
		return out.Result, nil
	}
}

// sdkCancels reports whether go-sdk ends req's handler context only for
// the client's notifications/cancelled (or a broken connection): a call in
// a stateful session, or over stdio (no front-door POST). A stateless
// request's context may also end when its POST does
// (PropagateRequestCancellation, 2026-07-28): the front door gives those
// their cause (callContexts.join, cancel.go).
func sdkCancels(req *mcp.CallToolRequest) bool {
	if req.Extra == nil || req.Extra.Header.Get(requestIDHeader) == "" {
		return true // stdio
	}
	return req.Session != nil && req.Session.ID() != ""
}

// clientCancelled returns ctx with the client's cancellation named: when
// ctx ends with the bare cause context.Canceled — what go-sdk v1.8.0's
// jsonrpc2 gives a handler's context for notifications/cancelled
// (Connection.Cancel); a connection that breaks gives its read or write
// error instead — the returned context ends with errCancelNotified, which
// wraps playbook.ErrCallCancelled, so the runner cancels the run upstream
// at once rather than after its linger. Any other end keeps its cause.
func clientCancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if cause == context.Canceled {
			cause = errCancelNotified
		}
		cancel(cause)
	})
	return c, func() { stop(); cancel(nil) }
}

// startPlaybookCall is what every path that runs a playbook (tools/call on
// /mcp or stdio, a task, the NoETL endpoint) does first: decode and
// validate the arguments raw, then obtain the upstream credential. A call
// refused here is logged and counted as callTool counts a REST call's, and
// the error is the text for the caller.
func (g *Gateway) startPlaybookCall(ctx context.Context, t *Tool, req *mcp.CallToolRequest, raw json.RawMessage) (map[string]any, upstream.Credentials, error) {
	args, err := upstream.DecodeArguments(raw)
	if err == nil {
		err = t.Binding.Validate(args)
	}
	if err != nil {
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeInvalidArguments, Cause: err})
		return nil, upstream.Credentials{}, err
	}
	cred, err := g.credentials(ctx, t, req)
	if err != nil {
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeUnreachable, Cause: err})
		return nil, upstream.Credentials{}, fmt.Errorf("the gateway could not obtain a credential for upstream %s", t.Upstream)
	}
	return args, cred, nil
}

// callerID names who makes a call for the playbook runner's dedup table
// and per-caller run cap (playbook.Request.Caller): caller.Key.RunKey
// over HTTP ("" for a caller with no credential at all, whose calls are
// never merged); over stdio, the one client at the other end of the pipe.
func (g *Gateway) callerID(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return "stdio"
	}
	return g.callers.RunKey(caller.Of(req.Extra.TokenInfo, req.Extra.Header))
}

// progressMessage is what a client shows while a run goes on.
func progressMessage(path string, p playbook.Progress) string {
	return fmt.Sprintf("playbook %s running (poll %d)", path, p.Polls) + progressDetail(p)
}

// progressDetail is what the engine said of a run's progress, for a message:
// ", 40%" (a fraction up to 1 is read as one of 1, else as percent) and
// ": its own words", each when it said them.
func progressDetail(p playbook.Progress) string {
	var msg string
	if p.Fraction != nil {
		f := *p.Fraction
		if f <= 1 {
			f *= 100
		}
		msg += fmt.Sprintf(", %.0f%%", f)
	}
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// logRun writes the line a playbook call leaves: never the workload.
//
// It also counts the run in mcpgate_playbook_runs_total, so that both front
// ends (/mcp and the NoETL endpoint) are counted.
func (g *Gateway) logRun(ctx context.Context, t *Tool, out *playbook.Outcome) {
	g.metrics.playbookRun(t.Tool.Name, string(out.State))
	// A busy refusal is info, not a warning: a caller over its cap could
	// flood the log at warn level; mcpgate_playbook_runs_total{outcome="busy"}
	// counts them.
	level := slog.LevelInfo
	if out.State == playbook.TimedOut || out.State == playbook.NotStarted && out.HTTPStatus >= 500 {
		level = slog.LevelWarn
	}
	g.logger.LogAttrs(ctx, level, "playbook call",
		slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.String("execution_id", out.ExecutionID), slog.String("outcome", string(out.State)),
		slog.Int("polls", out.Polls), slog.Bool("attached", out.Attached), slog.String("upstream_cancel", upstreamCancel(out)))
}

// upstreamCancel says on a call's log line what became of its run upstream:
// "sent" (this call's outcome cancelled it), "at_once" (the client
// cancelled the call, and the run is cancelled now), "planned" (the call
// left a run still going, which the runner cancels after its linger unless
// a re-send joins it, and logs on its own "playbook run" line), or "none".
func upstreamCancel(out *playbook.Outcome) string {
	switch {
	case out.CancelSent:
		return "sent"
	case out.CancelPlanned && out.CancelNow:
		return "at_once"
	case out.CancelPlanned:
		return "planned"
	}
	return "none"
}
