package playbook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream"
)

// Runs as MCP tasks (2025-11-25). A task outlives the request that made it,
// and with a stateless gateway the request that polls it may reach another
// replica, which knows nothing of the run but its execution id. So besides
// [Runner.Start], which dispatches a run the way [Runner.Run] does, the
// methods here work from the execution id alone: [Runner.Check] polls the
// engine once, [Runner.Await] polls until the run is terminal, and
// [Runner.Cancel] calls the cancel route.

// ErrNoCancelRoute is returned by [Runner.Cancel] when the engine has no
// cancel route: the run cannot be stopped from the gateway.
var ErrNoCancelRoute = errors.New("playbook: the engine has no cancel route")

// Start starts req's run, or joins the run a same request started within the
// dedup window (as [Runner.Run] does), and returns as soon as the engine has
// given its execution id — it does not wait for the run to end. The run is
// then held for the task: nobody waits for it, yet it is not cancelled
// after the linger; this runner polls it to its end, and at the ceiling
// (Options.Timeout) cancels it upstream, as for any run.
//
// It returns the execution id and when the run began (earlier than now
// when it joined a run already going): the run's ceiling is that plus
// Options.Timeout. When the engine refuses to start the run, or ctx ends
// before it answers, or the run would be over Options.MaxRuns or
// MaxRunsPerCaller (Busy), Start returns the outcome to report and no id.
func (r *Runner) Start(ctx context.Context, req Request) (string, time.Time, *Outcome) {
	key := r.key(req)
	id, begun, out, again := r.startOnce(ctx, key, req)
	if again { // given up for another replica's run of it: hold that one
		id, begun, out, _ = r.startOnce(ctx, key, req)
	}
	return id, begun, out
}

// startOnce is one dispatch of Start: again says the run it started was
// superseded (Runner.supersede) before the engine's id could be recorded.
func (r *Runner) startOnce(ctx context.Context, key string, req Request) (_ string, _ time.Time, _ *Outcome, again bool) {
	rn, attached, remote, busy := r.dispatch(ctx, key, req, false)
	if busy != nil {
		return "", time.Time{}, busy, false
	}
	if remote != nil {
		// Another replica drives it; the task polls it by its id, and
		// holds it as a task holds a run: it is counted as waiting for
		// good, so the linger never cancels it.
		return remote.ExecutionID, remote.Begun, nil, false
	}
	select {
	case <-rn.started:
	case <-rn.done:
	case <-ctx.Done():
		now := errors.Is(context.Cause(ctx), ErrCallCancelled)
		last := r.detach(rn, now, nil)
		return "", time.Time{}, &Outcome{State: Cancelled, Attached: attached, CancelPlanned: last && !r.opts.Routes.Cancel.IsZero(),
			CancelNow: now, Result: errorResult(r.abandonText(req.Path, "", now, last), "", req.Path, nil, r.opts.MaxStructured)}, false
	}
	select {
	case <-rn.done:
		if rn.out.superseded {
			r.detach(rn, false, nil)
			return "", time.Time{}, rn.out.own(attached), true
		}
	default:
	}
	rn.mu.Lock()
	id := rn.id
	rn.mu.Unlock()
	if id == "" { // done without an id: the engine did not start it
		return "", time.Time{}, rn.out.own(attached), false
	}
	if req.Ended != nil {
		rn.onEnd(func(out *Outcome) {
			if out.superseded {
				return // given up for another replica's run of it: that one ends there
			}
			req.Ended(out.own(attached))
		})
	}
	return id, rn.begun, nil, false
}

// Snapshot is what one status poll says of a run.
type Snapshot struct {
	// State is "" while the run goes on; Succeeded, Failed or Cancelled once
	// it is terminal.
	State State
	// Progress holds the engine's own progress fields (Polls is 0).
	Progress Progress
	// Status is the status the engine reported.
	Status map[string]any
	// Result is the tool result of a terminal run, as Run would have
	// returned it: IsError unless Succeeded.
	Result *mcp.CallToolResult
}

// Check polls the status of execution id (of playbook path) once. A run the
// engine reports cancelled (see cancelled) is Cancelled rather than Failed;
// a status the engine will never give (a 4xx other than 401, 403 and 429) is
// a Failed run. An error is a poll that failed and may work when repeated:
// no answer, a 5xx, or the caller refused (401, 403).
func (r *Runner) Check(ctx context.Context, id, path string, cred upstream.Credentials) (*Snapshot, error) {
	st, err := r.status(ctx, id, cred)
	if err != nil {
		var fatal *fatalError
		if !errors.As(err, &fatal) || fatal.status == http.StatusUnauthorized || fatal.status == http.StatusForbidden {
			return nil, err
		}
		msg := fmt.Sprintf("playbook %s (execution %s): its status could not be read: %v", path, id, err)
		return &Snapshot{State: Failed, Result: errorResult(msg, id, path, nil, r.opts.MaxStructured)}, nil
	}
	s := &Snapshot{Status: st, Progress: progressOf(st)}
	s.State, s.Result = r.ending(id, path, st)
	return s, nil
}

// ending reads a status: "" while the run goes on, else its terminal state
// and the result to report. A run that failed because it was cancelled (see
// cancelled) is Cancelled, whoever reads it: a task's status, the runner
// that drives the run, a call waiting for it.
func (r *Runner) ending(id, path string, st map[string]any) (State, *mcp.CallToolResult) {
	switch state := r.terminal(st); state {
	case Succeeded:
		return Succeeded, r.successResult(id, path, st)
	case Failed:
		if r.cancelled(st) {
			return Cancelled, errorResult(fmt.Sprintf("playbook %s was cancelled (execution %s)", path, id), id, path, st, r.opts.MaxStructured)
		}
		return Failed, errorResult(failureText(path, id, st), id, path, st, r.opts.MaxStructured)
	}
	return "", nil
}

// cancelled reports whether a failed status says the run was cancelled: the
// state the terminal pointer reads (NoETL: "status") is CANCELLED or
// CANCELED, in any case.
func (r *Runner) cancelled(st map[string]any) bool {
	p := r.opts.Terminal.Pointer
	if p == "" {
		p = "/status"
	}
	v, ok := pointer(st, p)
	if !ok {
		return false
	}
	s, _ := v.(string)
	return strings.EqualFold(s, "CANCELLED") || strings.EqualFold(s, "CANCELED")
}

// Await polls execution id every Options.PollInterval until it is terminal
// and returns its outcome. At deadline (the run's ceiling: its start plus
// Options.Timeout) it gives the run up: TimedOut, and cancelled upstream
// when there is a cancel route. MaxPollFailures failed polls in a row give
// it up too (Failed). It waits on a timer between polls; it returns ctx's
// error when ctx ends first.
func (r *Runner) Await(ctx context.Context, id, path string, cred upstream.Credentials, deadline time.Time) (*Outcome, error) {
	failures := 0
	tick := time.NewTimer(0)
	defer tick.Stop()
	for polls := 0; ; polls++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		s, err := r.Check(ctx, id, path, cred)
		switch {
		case err == nil && s.State == Cancelled && !time.Now().Before(deadline):
			// The runner that drives the run cancelled it at the ceiling.
			return &Outcome{State: TimedOut, ExecutionID: id, Status: s.Status, Polls: polls + 1, CancelSent: true,
				Result: errorResult(r.CeilingText(path, id)+"; it was cancelled upstream", id, path, s.Status, r.opts.MaxStructured)}, nil
		case err == nil && s.State != "":
			return &Outcome{State: s.State, ExecutionID: id, Status: s.Status, Result: s.Result, Polls: polls + 1}, nil
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			if failures++; failures >= r.opts.MaxPollFailures {
				msg := fmt.Sprintf("playbook %s (execution %s): its status could not be read: %v", path, id, err)
				return &Outcome{State: Failed, ExecutionID: id, Polls: polls + 1,
					Result: errorResult(msg, id, path, nil, r.opts.MaxStructured)}, nil
			}
		default:
			failures = 0
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			out := &Outcome{State: TimedOut, ExecutionID: id, Polls: polls + 1}
			if s != nil {
				out.Status = s.Status
			}
			var msg string
			out.CancelSent, msg = r.cancelUpstream(ctx, id, cred, r.CeilingText(path, id))
			out.Result = errorResult(msg, id, path, out.Status, r.opts.MaxStructured)
			return out, nil
		}
		tick.Reset(min(wait, r.opts.PollInterval))
	}
}

// CeilingText says that a run did not finish within Options.Timeout.
func (r *Runner) CeilingText(path, id string) string {
	return fmt.Sprintf("playbook %s did not finish within %s (execution %s)", path, r.opts.Timeout, id)
}

// Cancel calls the cancel route for execution id. It returns
// ErrNoCancelRoute when there is none, and an error naming the engine's
// answer when the engine refuses.
func (r *Runner) Cancel(ctx context.Context, id string, cred upstream.Credentials) error {
	rt := r.opts.Routes.Cancel
	if rt.IsZero() {
		return ErrNoCancelRoute
	}
	path, err := r.idPath(r.paths.cancel, id)
	if err != nil {
		return err
	}
	a, err := r.client.Send(ctx, rt.Method, path, nil, cred)
	if err != nil {
		return err
	}
	if a.Status < 200 || a.Status > 299 {
		return fmt.Errorf("the engine refused to cancel execution %s: HTTP %d%s", id, a.Status, detail(a.Body))
	}
	return nil
}
