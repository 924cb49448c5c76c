package playbook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream"
)

// A Request asks for one playbook run.
type Request struct {
	// Tool is the tool's name: with the caller and Workload, it keys the
	// dedup table.
	Tool string
	// Path is the playbook's path on the engine ("demo/slow").
	Path string
	// Workload is sent as is (the caller merges defaults).
	Workload map[string]any
	// Cred is what the engine is shown, as for any REST tool call.
	Cred upstream.Credentials
	// Caller names who asks, for the dedup table and Options.MaxRunsPerCaller:
	// an opaque digest of who the caller is (never a credential). It matters
	// because Cred may be the same for every caller (client_credentials,
	// static, none): two callers must never share a run. "" is a caller the
	// gateway cannot tell from others (no credential at all): its requests
	// are never merged with anyone's, its own re-sends included.
	Caller string
	// Progress, if set, is called on the caller's goroutine after each
	// status poll that this request saw.
	Progress func(Progress)
	// Cancelled, if set, is closed when the client cancels this request on
	// purpose (MCP notifications/cancelled) — which may come after ctx has
	// ended: a client that drops its connection and then sends the
	// notification. A run the request left to its linger is then cancelled
	// upstream at once, unless another request waits for it meanwhile.
	Cancelled <-chan struct{}
	// Ended, if set, is called once, off the caller's goroutine, with the
	// outcome of the run [Runner.Start] started or joined for this request,
	// when that run ends in this process. It is not called when Start
	// returns an outcome (no run), nor for a run another replica drives
	// (Options.Shared): that one ends where it runs, nor for the requests
	// past the first MaxEndedPerRun of one run. Run ignores it.
	//
	// The requests' Ended of one run are kept with the run, not each on a
	// goroutine parked until it ends: a re-sent call joins the run, and
	// one goroutine per join, held up to Options.Timeout, would let a
	// caller hold as many as it sends requests. They are called one after
	// another, on one goroutine, once the run has ended.
	Ended func(*Outcome)
}

// closed reports whether ch is closed (nil: never).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return ch != nil
	default:
		return false
	}
}

// Progress is what one status poll said.
type Progress struct {
	// Polls counts the status polls so far; it only grows.
	Polls int
	// Fraction is the engine's own "progress" field, if it sent a number.
	Fraction *float64
	// Message is the engine's own "message" field, if any.
	Message string
}

// State is how a run ended.
type State string

// The states of an [Outcome].
const (
	Succeeded  State = "succeeded"   // terminal, not failed
	Failed     State = "failed"      // terminal and failed, or the status could not be read
	TimedOut   State = "timeout"     // the ceiling was reached
	Cancelled  State = "cancelled"   // the request was cancelled, or the client hung up
	NotStarted State = "not_started" // the execute route refused or could not be reached
	Busy       State = "busy"        // refused by Options.MaxRuns or MaxRunsPerCaller: nothing was sent
	Released   State = "released"    // the gateway shut down before the run ended: the run goes on (see Runner.Release)
)

// Outcome is what a request got of its run.
type Outcome struct {
	State       State
	ExecutionID string // "" when NotStarted
	// Status is the last status the engine reported (nil before the first).
	Status map[string]any
	// Result is the tool result: IsError unless Succeeded.
	Result *mcp.CallToolResult
	// HTTPStatus is the engine's answer to execute when NotStarted (0: no
	// answer): 401 and 403 mean access denied.
	HTTPStatus int
	// CancelSent reports that the cancel route was called for this outcome.
	CancelSent bool
	// superseded: the run was given up for another replica's run of the
	// same request (Runner.supersede); its requests follow that one.
	superseded bool
	// CancelPlanned reports that the request left a run still going, which
	// the runner cancels upstream when no request waits for it any more (at
	// once, or after Options.Linger unless a re-send joins it); the
	// runner's own log line says when it did.
	CancelPlanned bool
	// CancelNow reports that the planned cancel is at once, not after
	// Options.Linger: the client cancelled the call on purpose (see
	// ErrCallCancelled).
	CancelNow bool
	// Attached reports that the request joined a run another one started.
	Attached bool
	// Polls counts the status polls.
	Polls int
	// Cap names the bound that refused a Busy request: "max_runs" or
	// "max_runs_per_caller"; Limit is its value.
	Cap   string
	Limit int
}

// run is one execution, shared by the requests waiting for it.
type run struct {
	key    string
	ctx    context.Context // the run's own; cancelled when abandoned
	cancel context.CancelFunc

	done    chan struct{} // closed when out is set
	out     *Outcome
	started chan struct{} // closed when the engine has given the execution id
	begun   time.Time     // when the run started: its ceiling runs from here

	caller string // Request.Caller of the request that started it
	path   string // Request.Path: the playbook, for the runner's log lines

	// With Options.Shared: claimed says the fleet's record of key is this
	// run's, by its claim token claim, until lost: another replica took the
	// claim over (supersede). release frees its fleet slot (nil: none taken).
	claimed bool
	claim   string
	lost    atomic.Bool
	release func()

	mu       sync.Mutex // guards the fields below
	waiters  int
	ending   bool // being cancelled upstream or given up: no request may join it
	progress Progress
	changed  chan struct{} // closed and replaced on each poll
	linger   *time.Timer
	id       string    // execution id, once known
	expires  time.Time // when done: the end of its dedup window
	// ended are the Request.Ended of the requests that started or joined
	// it (at most MaxEndedPerRun), called once it has ended (see onEnd).
	ended []func(*Outcome)
}

// MaxEndedPerRun bounds the Request.Ended kept for one run: the requests
// past it are not told of its end. All the requests of one run are one
// caller's (the dedup key holds the caller), and a client re-sends a call
// a few times at most (a broken stream); past 64 it is looping, and what
// Ended tells (MCP notifications/tasks/status) is optional: the client
// polls anyway.
const MaxEndedPerRun = 64

// onEnd has f called with the run's outcome once it ends: at once, on a
// goroutine of its own, when it has already ended; else with the run's
// other requests' (see drive), unless MaxEndedPerRun are kept already.
func (rn *run) onEnd(f func(*Outcome)) {
	rn.mu.Lock()
	out := rn.out
	if out == nil {
		if len(rn.ended) < MaxEndedPerRun {
			rn.ended = append(rn.ended, f)
		}
		rn.mu.Unlock()
		return
	}
	rn.mu.Unlock()
	go f(out)
}

// own returns a copy of o for one request (attached: it joined a run
// another request started), whose Result, and its _meta, the request may
// write: every request that joins a run gets the run's one outcome, and
// go-sdk writes a 2026-07-28 answer's result (resultType, _meta
// serverInfo), as a search meta-call writes its _meta.
func (o *Outcome) own(attached bool) *Outcome {
	out := *o
	out.Attached = attached
	if o.Result != nil {
		res := *o.Result
		res.Meta = maps.Clone(o.Result.Meta)
		out.Result = &res
	}
	return &out
}

// ErrCallCancelled, as the cause of a Run's ctx (context.WithCancelCause),
// says that the client cancelled the call on purpose (MCP
// notifications/cancelled) rather than went away: a client that cancels wants
// the run stopped, so when no other request waits for it the run is
// cancelled upstream at once, without the linger that leaves a client whose
// stream broke time to re-send.
var ErrCallCancelled = errors.New("playbook: the client cancelled the call")

// Run runs req's playbook, or joins the run a same request started within
// the dedup window, and waits for its outcome, calling req.Progress after
// each poll. When ctx ends first, Run returns at once with a Cancelled
// outcome; the run itself is cancelled upstream once no request waits for it
// (after Options.Linger, or at once when ctx's cause is ErrCallCancelled).
func (r *Runner) Run(ctx context.Context, req Request) *Outcome {
	key := r.key(req)
	if p := r.prev.Load(); p != nil && r.opts.Shared == nil && key != "" && p.localRun(key) {
		return p.run(ctx, key, req) // a run of the runner this one replaced
	}
	return r.run(ctx, key, req)
}

// run is Run for req, whose dedup key is key, on this runner's runs. A run
// given up for another replica's (supersede) is left for that one: the
// request is dispatched once more, and follows it.
func (r *Runner) run(ctx context.Context, key string, req Request) *Outcome {
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	out, again := r.runOnce(ctx, key, req)
	if again {
		out, _ = r.runOnce(ctx, key, req)
	}
	return out
}

// runOnce is one dispatch of run: again says the run it waited for was
// superseded (its outcome is then what to answer if the request is not
// dispatched again).
func (r *Runner) runOnce(ctx context.Context, key string, req Request) (_ *Outcome, again bool) {
	rn, attached, remote, busy := r.dispatch(ctx, key, req, false)
	if busy != nil {
		return busy, false
	}
	if remote != nil {
		if out := r.follow(ctx, key, remote, req); out != nil {
			return out, false
		}
		// The record named a run that had ended without success (its
		// replica could not drop the record): not one to hand a new
		// request, as locally. Start a fresh one.
		_ = r.opts.Shared.Drop(ctx, key, "")
		if rn, attached, _, busy = r.dispatch(ctx, key, req, true); busy != nil {
			return busy, false
		}
	}
	seen := 0
	for {
		rn.mu.Lock()
		changed, p := rn.changed, rn.progress
		rn.mu.Unlock()
		if p.Polls > seen {
			seen = p.Polls
			if req.Progress != nil {
				req.Progress(p)
			}
		}
		select {
		case <-rn.done:
			r.detach(rn, false, nil)
			return rn.out.own(attached), rn.out.superseded
		case <-r.released:
			return r.release(rn, req, attached, seen), false
		case <-ctx.Done():
			// At once: the client cancelled on purpose, or no re-send could
			// join the run (no linger; an anonymous caller's runs are
			// never merged).
			now := errors.Is(context.Cause(ctx), ErrCallCancelled) || closed(req.Cancelled) || r.opts.Linger < 0 || rn.key == ""
			last := r.detach(rn, now, req.Cancelled)
			rn.mu.Lock()
			id := rn.id
			rn.mu.Unlock()
			select {
			case <-rn.done: // it ended meanwhile: say how
				return rn.out.own(attached), false
			default:
			}
			return &Outcome{State: Cancelled, ExecutionID: id, Attached: attached, Polls: seen, CancelPlanned: last && !r.opts.Routes.Cancel.IsZero(),
				CancelNow: now, Result: errorResult(r.abandonText(req.Path, id, now, last), id, req.Path, nil, r.opts.MaxStructured)}, false
		case <-changed:
		}
	}
}

// Release answers every request waiting for a run, now and from now on,
// with a Released outcome, and leaves the runs going: the gateway is
// shutting down (its drain's shutdown_timeout has passed) and must answer
// the calls it holds, but a run is the engine's, and the caller's re-send
// — to this gateway's successor, or another replica — attaches to it again
// within the dedup window. No run is cancelled upstream on this account,
// and no linger starts. New requests are still served: Release does not
// stop the runner, the server's shutdown stops new requests reaching it.
func (r *Runner) Release() {
	r.releaseOnce.Do(func() { close(r.released) })
}

// release is Run's answer once Release was called: rn loses this waiter
// without being cancelled, and the request is told its execution id and
// that a re-send attaches to the run.
func (r *Runner) release(rn *run, req Request, attached bool, seen int) *Outcome {
	rn.mu.Lock()
	rn.waiters--
	id := rn.id
	rn.mu.Unlock()
	select {
	case <-rn.done: // it ended meanwhile: say how
		return rn.out.own(attached)
	default:
	}
	return r.releasedOutcome(id, req, attached, seen)
}

// releasedOutcome is the Released outcome of a request waiting for execution id
// (a run of this runner's, or one it follows on another replica's behalf).
func (r *Runner) releasedOutcome(id string, req Request, attached bool, seen int) *Outcome {
	what := fmt.Sprintf("the gateway is shutting down and stopped waiting for playbook %s", req.Path)
	if id != "" {
		what += fmt.Sprintf(" (execution %s)", id)
	} else {
		what += " (its execution id was not known yet)"
	}
	what += "; the run goes on, it is not cancelled"
	switch {
	case r.opts.DedupWindow < 0 || req.Caller == "":
		what += "; this engine's calls are not de-duplicated, so re-sending the call starts a second run"
	case r.opts.Shared != nil:
		what += fmt.Sprintf("; re-send the same call within %s to wait for it again: it attaches to this run on any gateway of the fleet (shared state), it does not start another", r.opts.DedupWindow)
	default:
		what += "; re-sending the same call to another gateway starts a second run: gateways attach a re-send to a run another one started only when they share state (state.backend: redis)"
	}
	return &Outcome{State: Released, ExecutionID: id, Attached: attached, Polls: seen,
		Result: errorResult(what, id, req.Path, nil, r.opts.MaxStructured)}
}

// abandonText says what becomes of a run a request left; last says that no
// other request (nor a task) waits for it.
func (r *Runner) abandonText(path, id string, now, last bool) string {
	what := fmt.Sprintf("the call was cancelled before playbook %s finished", path)
	if id != "" {
		what += fmt.Sprintf(" (execution %s)", id)
	}
	switch {
	case !last:
		return what + "; the run goes on for another request or task that waits for it"
	case r.opts.Routes.Cancel.IsZero():
		return what + "; the engine has no cancel route, so the run may go on"
	case now || r.opts.DedupWindow < 0 || r.opts.Linger < 0:
		return what + "; the gateway cancels the run upstream"
	}
	return what + fmt.Sprintf("; the gateway cancels the run upstream unless the same call is re-sent within %s", r.opts.Linger)
}

// key is the dedup key: a hash of the caller, the credential the engine is
// shown, the tool and the arguments. Neither credential is kept. "" when
// dedup is off, and for an anonymous caller: callers the gateway cannot tell
// apart must not share a run (one could read another's result).
func (r *Runner) key(req Request) string {
	if r.opts.DedupWindow < 0 || req.Caller == "" {
		return ""
	}
	args, err := json.Marshal(req.Workload) // map keys sorted: canonical
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, part := range []string{req.Caller, req.Cred.BearerToken, req.Cred.Header, req.Cred.Value} {
		sum := sha256.Sum256([]byte(part)) // fixed length: no part can run into the next
		h.Write(sum[:])
	}
	h.Write([]byte(req.Tool))
	h.Write([]byte{0})
	h.Write([]byte(req.Path))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// attach finds the run for key that a request may join, or starts one, and
// counts the caller as waiting for it. A run it starts carries ctx's trace
// (upstream.DetachTrace), not its cancellation: its requests to the engine
// belong to the trace of the request that started it. A run is started only within
// Options.MaxRuns and MaxRunsPerCaller; over either, attach returns the Busy
// outcome instead, and nothing is sent to the engine.
//
// release frees the fleet slot dispatch took for the run (nil: none), and
// claim is the token of dispatch's claim on the fleet's record of key ("":
// none); both become the run's when attach starts one, and stay the
// caller's otherwise.
func (r *Runner) attach(ctx context.Context, key string, req Request, release func(), claim string) (*run, bool, *Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.prune(now)
	if rn := r.runs[key]; key != "" && rn != nil && rn.join(now) {
		return rn, true, nil
	}
	if out := r.admit(req); out != nil {
		return nil, false, out
	}
	ctx, cancel := context.WithCancel(upstream.DetachTrace(ctx))
	rn := &run{key: key, caller: req.Caller, ctx: ctx, cancel: cancel, done: make(chan struct{}), started: make(chan struct{}), changed: make(chan struct{}), waiters: 1, begun: now, path: req.Path,
		claimed: claim != "", claim: claim, release: release}
	if key != "" {
		r.runs[key] = rn // replaces a run that may not be joined
	}
	r.active++
	r.byCaller[req.Caller]++
	go r.drive(rn, req)
	return rn, false, nil
}

// join counts one more request waiting for rn, if a request may join it: a
// run going on that is not being cancelled, or one that succeeded within its
// dedup window. A run that failed, timed out or was cancelled is never
// handed to a new request: a fresh call must start a fresh run.
func (rn *run) join(now time.Time) bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	select {
	case <-rn.done:
		if rn.out.State != Succeeded || now.After(rn.expires) {
			return false
		}
	default:
		if rn.ending || rn.ctx.Err() != nil {
			return false
		}
		if rn.linger != nil {
			rn.linger.Stop()
			rn.linger = nil
		}
	}
	rn.waiters++
	return true
}

// admit returns the Busy outcome of a request that would start a run over
// Options.MaxRuns or MaxRunsPerCaller, or nil. r.mu is held.
func (r *Runner) admit(req Request) *Outcome {
	switch {
	case r.opts.MaxRuns > 0 && r.active >= r.opts.MaxRuns:
		return r.busy(req, true, r.active, false)
	case r.opts.MaxRunsPerCaller > 0 && r.byCaller[req.Caller] >= r.opts.MaxRunsPerCaller:
		return r.busy(req, false, r.byCaller[req.Caller], false)
	}
	return nil
}

// busy is the Busy outcome of a request refused by max_runs (engine) or
// max_runs_per_caller, at n runs in flight: this replica's, or the fleet's.
func (r *Runner) busy(req Request, engine bool, n int, fleet bool) *Outcome {
	where := "the gateway already has"
	if fleet {
		where = "the gateway's replicas already have"
	}
	bound, limit := "max_runs", r.opts.MaxRuns
	why := fmt.Sprintf("%s %d runs in flight on this engine", where, n)
	if !engine {
		bound, limit = "max_runs_per_caller", r.opts.MaxRunsPerCaller
		why = fmt.Sprintf("this caller already has %d runs in flight on this engine", n)
		if fleet {
			why += " across the gateway's replicas"
		}
	}
	msg := fmt.Sprintf("playbook %s was not started: the engine is busy: %s (%s is %d); nothing was sent to the engine, try again when a run ends", req.Path, why, bound, limit)
	return &Outcome{State: Busy, Cap: bound, Limit: limit, Result: errorResult(msg, "", req.Path, nil, 0)}
}

// prune drops ended runs whose window has passed, at most twice a window.
func (r *Runner) prune(now time.Time) {
	if len(r.runs) == 0 || now.Sub(r.lastPrune) < r.opts.DedupWindow/2 {
		return
	}
	r.lastPrune = now
	for k, rn := range r.runs {
		select {
		case <-rn.done:
			rn.mu.Lock()
			expired := now.After(rn.expires)
			rn.mu.Unlock()
			if expired {
				delete(r.runs, k)
			}
		default:
		}
	}
}

// detach counts a caller out; the last one out of a run still going starts
// its linger, after which the run is cancelled, or cancels it at once when
// now is set (the client cancelled the call on purpose: see
// ErrCallCancelled). It reports whether the caller was the last one out of
// a run still going, which is then cancelled. A linger is cut short when
// cancelled (the request's Cancelled) is closed before it ends.
func (r *Runner) detach(rn *run, now bool, cancelled <-chan struct{}) bool {
	elsewhere := r.leaveFleet(rn) // with Options.Shared: the last one out anywhere decides
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.waiters--
	if rn.waiters > 0 || elsewhere {
		return false
	}
	select {
	case <-rn.done:
		return false
	default:
	}
	if now || r.opts.Linger < 0 || rn.key == "" {
		rn.cancel()
		return true
	}
	rn.linger = time.AfterFunc(r.opts.Linger, func() {
		elsewhere := r.fleetWaits(rn) // a re-send joined it on another replica
		rn.mu.Lock()
		defer rn.mu.Unlock()
		if rn.waiters == 0 && !elsewhere {
			rn.cancel()
		}
	})
	if cancelled != nil {
		go r.cutLinger(rn, rn.linger, cancelled)
	}
	return true
}

// cutLinger cancels rn at once when cancelled is closed while linger, the
// linger the last request out started, still runs: that request's client
// has since cancelled it on purpose. It returns once the linger is over
// either way (it ends, or a re-send stopped it and joined the run).
func (r *Runner) cutLinger(rn *run, linger *time.Timer, cancelled <-chan struct{}) {
	end := time.NewTimer(r.opts.Linger)
	defer end.Stop()
	select {
	case <-cancelled:
	case <-rn.done:
		return
	case <-end.C:
		return
	}
	elsewhere := r.fleetWaits(rn)
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.linger == linger && rn.waiters == 0 && !elsewhere {
		linger.Stop()
		rn.linger = nil
		// The engine may not have answered the execute yet: the run's
		// own "playbook run" line names the id once it is known.
		id := rn.id
		if id == "" {
			id = "(not yet given by the engine)"
		}
		r.logger.Info("playbook run cancelled at once: the client cancelled the call it had left (no linger)", "playbook", rn.path, "execution_id", id)
		rn.cancel()
	}
}

// end marks rn as being given up: from now on no request may join it.
func (rn *run) end() {
	rn.mu.Lock()
	rn.ending = true
	rn.mu.Unlock()
}

// drive starts the run and polls it to its end. It is the run's only
// goroutine; between polls it waits on timers, not in a loop.
func (r *Runner) drive(rn *run, req Request) {
	out := r.poll(rn, req)
	r.mu.Lock()
	rn.mu.Lock()
	rn.out = out
	ended := rn.ended
	rn.ended = nil
	rn.expires = time.Now().Add(r.opts.DedupWindow)
	if rn.linger != nil {
		rn.linger.Stop()
		rn.linger = nil
	}
	rn.mu.Unlock()
	if out.State != Succeeded && r.runs[rn.key] == rn {
		// Only a success is handed to a re-send (see join).
		delete(r.runs, rn.key)
	}
	r.active--
	if r.byCaller[rn.caller]--; r.byCaller[rn.caller] <= 0 {
		delete(r.byCaller, rn.caller)
	}
	r.mu.Unlock()
	close(rn.done)
	if len(ended) > 0 {
		go func() {
			for _, f := range ended {
				f(out)
			}
		}()
	}
	r.recordEnd(rn, out, req.Path) // after the waiters have their outcome: a store round trip
	// Freed only now: a request that joins between the poll's end and the
	// outcome's record must still see the run as going on (join refuses a
	// run whose context ended), and then gets the outcome.
	rn.cancel()
	if r.opts.OnRunEnd != nil {
		r.opts.OnRunEnd(RunEnd{Tool: req.Tool, Path: req.Path, State: out.State, Elapsed: time.Since(rn.begun)})
	}
	r.logger.LogAttrs(context.Background(), slog.LevelInfo, "playbook run",
		slog.String("playbook", req.Path), slog.String("execution_id", out.ExecutionID),
		slog.String("outcome", string(out.State)), slog.Int("polls", out.Polls),
		slog.Bool("cancel_sent", out.CancelSent))
}

func (r *Runner) poll(rn *run, req Request) *Outcome {
	// The ceiling bounds the whole run, its requests included.
	ctx, cancel := context.WithTimeout(rn.ctx, r.opts.Timeout)
	defer cancel()
	id, status, err := r.executeOnce(ctx, rn, req)
	var bad *badIDError
	if errors.As(err, &bad) {
		// The engine started something the gateway cannot name back to it:
		// it can be neither polled nor cancelled, so the call fails here.
		return &Outcome{State: Failed, Result: errorResult(fmt.Sprintf("playbook %s: %v", req.Path, err), "", req.Path, nil, 0)}
	}
	if err != nil {
		if errors.Is(err, errExecuteUnanswered) {
			// Not "before it started": the execute reached the engine,
			// which may have started the run and not said so.
			return &Outcome{State: Cancelled, Result: errorResult(fmt.Sprintf("the call was cancelled while the engine had not answered the execute of playbook %s, and it did not within %s: if the engine started the run, it goes on, with no execution id to cancel it by", req.Path, ExecuteGrace), "", req.Path, nil, 0)}
		}
		if rn.ctx.Err() != nil {
			return &Outcome{State: Cancelled, Result: errorResult(fmt.Sprintf("the call was cancelled before playbook %s started", req.Path), "", req.Path, nil, 0)}
		}
		return &Outcome{State: NotStarted, HTTPStatus: status,
			Result: errorResult(fmt.Sprintf("playbook %s could not be started: %v", req.Path, err), "", req.Path, nil, 0)}
	}
	rn.mu.Lock()
	rn.id = id
	rn.mu.Unlock()
	if errors.Is(r.recordStart(rn, req, id), ErrClaimLost) {
		return r.supersede(rn, req, id)
	}
	close(rn.started)
	out := &Outcome{ExecutionID: id}
	if ctx.Err() != nil {
		// Cancelled (or past the ceiling) while the execute was answered:
		// the run exists upstream, and now has an id to cancel it by.
		return r.stop(rn, req, out, nil)
	}
	tick := time.NewTimer(0) // the first poll at once: a fast run answers at once
	defer tick.Stop()
	failures := 0
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return r.stop(rn, req, out, lastErr)
		case <-tick.C:
		}
		st, err := r.status(ctx, id, req.Cred)
		if err != nil {
			if ctx.Err() != nil {
				return r.stop(rn, req, out, err)
			}
			var fatal *fatalError
			failures++
			lastErr = err
			if errors.As(err, &fatal) || failures >= r.opts.MaxPollFailures {
				rn.end()
				out.State = Failed
				msg := fmt.Sprintf("playbook %s (execution %s): its status could not be read: %v", req.Path, id, err)
				out.CancelSent, msg = r.cancelUpstream(rn.ctx, id, req.Cred, msg)
				out.Result = errorResult(msg, id, req.Path, out.Status, r.opts.MaxStructured)
				return out
			}
			tick.Reset(r.opts.PollInterval)
			continue
		}
		failures = 0
		out.Status = st
		out.Polls++
		p := progressOf(st)
		p.Polls = out.Polls
		rn.mu.Lock()
		rn.progress = p
		close(rn.changed)
		rn.changed = make(chan struct{})
		rn.mu.Unlock()
		if state, res := r.ending(id, req.Path, st); state != "" {
			out.State, out.Result = state, res
			return out
		}
		tick.Reset(r.opts.PollInterval)
	}
}

// ExecuteGrace is how long the answer to a run's execute is still waited
// for once the run is cancelled (its last waiter left) while the execute is
// in flight. The engine may have started the run already, and only that
// answer names it: cut short, the execute would leave the run going on
// upstream, uncancelled, for as long as it lasts. Past the grace (an engine
// that does not answer) the execute is given up. The ceiling bounds it too.
const ExecuteGrace = 10 * time.Second

// errExecuteUnanswered is executeOnce's error when the execute was given up
// at the end of ExecuteGrace: the engine may have started the run.
var errExecuteUnanswered = errors.New("the engine did not answer the execute")

// executeOnce is execute for rn under ctx, rn's ceiling; rn's cancellation
// does not cut it short but gives it ExecuteGrace to be answered. Given up
// then, its error is errExecuteUnanswered.
func (r *Runner) executeOnce(ctx context.Context, rn *run, req Request) (string, int, error) {
	deadline, _ := ctx.Deadline()
	ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	var givenUp atomic.Bool
	stop := context.AfterFunc(rn.ctx, func() {
		grace := time.NewTimer(ExecuteGrace)
		defer grace.Stop()
		select {
		case <-grace.C:
			givenUp.Store(true)
			cancel()
		case <-ectx.Done():
		}
	})
	defer stop()
	defer cancel() // before stop: ends the grace's wait, if it began
	id, status, err := r.execute(ectx, req)
	if err != nil && givenUp.Load() {
		err = errExecuteUnanswered
	}
	return id, status, err
}

// stop ends a run whose context ended: past the ceiling, or abandoned.
func (r *Runner) stop(rn *run, req Request, out *Outcome, cause error) *Outcome {
	rn.end()
	var msg string
	if rn.ctx.Err() != nil {
		out.State = Cancelled
		msg = fmt.Sprintf("the call was cancelled before playbook %s finished (execution %s)", req.Path, out.ExecutionID)
	} else {
		out.State = TimedOut
		msg = fmt.Sprintf("playbook %s did not finish within %s (execution %s)", req.Path, r.opts.Timeout, out.ExecutionID)
	}
	out.CancelSent, msg = r.cancelUpstream(rn.ctx, out.ExecutionID, req.Cred, msg)
	out.Result = errorResult(msg, out.ExecutionID, req.Path, out.Status, r.opts.MaxStructured)
	return out
}

// cancelUpstream calls the cancel route, if any, and adds to msg what
// became of it. It has its own short deadline: the run's has passed.
// trace gives the requests their trace (see upstream.DetachTrace).
func (r *Runner) cancelUpstream(trace context.Context, id string, cred upstream.Credentials, msg string) (bool, string) {
	if r.opts.Routes.Cancel.IsZero() {
		return false, msg + "; the engine has no cancel route, so the run may go on"
	}
	// Not trace's cancellation (the run's context may have ended: that is
	// often why it is cancelled), only its trace.
	ctx, cancel := context.WithTimeout(upstream.DetachTrace(trace), 10*time.Second)
	defer cancel()
	rt := r.opts.Routes.Cancel
	path, err := r.idPath(r.paths.cancel, id)
	if err != nil {
		return false, msg + "; it could not be cancelled upstream: " + err.Error()
	}
	a, err := r.client.Send(ctx, rt.Method, path, nil, cred)
	switch {
	case err != nil:
		return true, msg + "; cancelling it upstream failed: " + err.Error()
	case a.Status < 200 || a.Status > 299:
		return true, msg + fmt.Sprintf("; the engine refused to cancel it (HTTP %d)", a.Status)
	}
	return true, msg + "; it was cancelled upstream"
}

// fatalError is a status answer that polling again cannot mend (4xx), or an
// id that no status request can carry.
type fatalError struct {
	msg    string
	status int // the engine's HTTP status; 0 when nothing was sent
}

func (e *fatalError) Error() string { return e.msg }

func (r *Runner) execute(ctx context.Context, req Request) (id string, status int, err error) {
	workload := req.Workload
	if workload == nil {
		workload = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{"path": req.Path, "workload": workload})
	if err != nil {
		return "", 0, fmt.Errorf("the workload is not JSON: %v", err)
	}
	rt := r.opts.Routes.Execute
	a, err := r.client.Send(ctx, rt.Method, r.paths.execute.String(), body, req.Cred)
	if err != nil {
		return "", 0, err
	}
	if a.Status < 200 || a.Status > 299 {
		return "", a.Status, fmt.Errorf("the engine answered HTTP %d%s", a.Status, detail(a.Body))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(a.Body, &m); err != nil || m == nil {
		return "", a.Status, errors.New("the engine's answer to execute is not a JSON object")
	}
	raw, ok := m["execution_id"]
	if !ok || string(raw) == "null" {
		return "", a.Status, errors.New("the engine's answer to execute has no execution_id")
	}
	if id, err = ExecutionID(raw); err != nil {
		return "", a.Status, &badIDError{err}
	}
	// Every route that names the run must be able to: refuse here an id
	// the status or cancel path could not carry, before a poll is sent.
	if _, err := r.idPath(r.paths.status, id); err != nil {
		return "", a.Status, &badIDError{fmt.Errorf("the engine's execution_id %q cannot be sent back in its status route: %v", shorten(id, 64), err)}
	}
	return id, a.Status, nil
}

// badIDError is an execute answer whose execution_id the gateway cannot
// send back to the engine as it was given.
type badIDError struct{ err error }

func (e *badIDError) Error() string { return e.err.Error() }
func (e *badIDError) Unwrap() error { return e.err }

// MaxExecutionIDLen bounds an execution id, in bytes: an id goes into every
// status and cancel path, each result's _meta, log lines and sealed task ids.
// Snowflake ids have 19 digits, UUIDs 36 characters.
const MaxExecutionIDLen = 256

// ExecutionID reads an engine's execution id from its JSON value, as the
// exact text the engine sent: a string's value, or an integer's literal
// digits. An id never goes through float64, which rounds integers above 2^53
// to another run's id (snowflake ids are 63-bit), and never through a
// decoder's repair of bad Unicode (a lone surrogate escape or an invalid
// UTF-8 byte would become U+FFFD, so two runs' ids would read alike).
// Anything else — a fraction, an exponent, an object, a boolean, an empty
// string, a string that is not valid Unicode, an id longer than
// MaxExecutionIDLen — is an error naming it.
func ExecutionID(raw json.RawMessage) (string, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 {
		return "", errors.New("the engine's execution_id is empty")
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("the engine's execution_id is not a valid JSON string: %v", err)
		}
		switch {
		case s == "":
			return "", errors.New("the engine's execution_id is an empty string")
		case !utf8.Valid(raw) || strings.ContainsRune(s, utf8.RuneError):
			return "", fmt.Errorf("the engine's execution_id %s is not valid Unicode (an invalid byte or a lone surrogate): it cannot be sent back exactly", shorten(string(raw), 64))
		case len(s) > MaxExecutionIDLen:
			return "", fmt.Errorf("the engine's execution_id is %d bytes long, over the %d the gateway sends back", len(s), MaxExecutionIDLen)
		}
		return s, nil
	case c == '-' || '0' <= c && c <= '9':
		if len(raw) > MaxExecutionIDLen {
			return "", fmt.Errorf("the engine's execution_id is a number of %d digits, over the %d the gateway sends back", len(raw), MaxExecutionIDLen)
		}
		if !isIntegerLiteral(raw) {
			return "", fmt.Errorf("the engine's execution_id %s is a number but not an integer: an id must be a string or an integer", shorten(string(raw), 64))
		}
		return string(raw), nil
	}
	kind := "an object"
	switch raw[0] {
	case '[':
		kind = "an array"
	case 't', 'f':
		kind = "a boolean"
	case 'n':
		kind = "null"
	}
	return "", fmt.Errorf("the engine's execution_id is %s (%s): an id must be a string or an integer", kind, shorten(string(raw), 64))
}

// isIntegerLiteral reports whether b is a JSON integer: -?(0|[1-9][0-9]*),
// no fraction, no exponent.
func isIntegerLiteral(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] == '0' && len(b) > 1 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// idPath builds a route's path for execution id: escaped, and refused when
// it would make a '.' or '..' segment, by the code that builds every REST
// tool's path (upstream.PathTemplate).
func (r *Runner) idPath(t *upstream.PathTemplate, id string) (string, error) {
	p, err := t.Expand(map[string]string{"id": id})
	var ae *upstream.ArgumentError
	if errors.As(err, &ae) {
		return "", fmt.Errorf("execution id %q: %s", shorten(id, 64), strings.TrimPrefix(strings.Join(ae.Problems, "; "), "id: "))
	}
	return p, err
}

func (r *Runner) status(ctx context.Context, id string, cred upstream.Credentials) (map[string]any, error) {
	rt := r.opts.Routes.Status
	path, err := r.idPath(r.paths.status, id)
	if err != nil {
		return nil, &fatalError{err.Error(), 0}
	}
	a, err := r.client.Send(ctx, rt.Method, path, nil, cred)
	if err != nil {
		return nil, err
	}
	if a.Status >= 400 && a.Status < 500 && a.Status != 429 {
		return nil, &fatalError{fmt.Sprintf("the engine answered HTTP %d%s", a.Status, detail(a.Body)), a.Status}
	}
	if a.Status < 200 || a.Status > 299 {
		return nil, fmt.Errorf("the engine answered HTTP %d%s", a.Status, detail(a.Body))
	}
	m, err := decodeStatus(a.Body)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// decodeStatus reads a status object keeping every number's literal
// (json.Number): the status is shown to the client as structuredContent, and
// an id in it must reach the client as the engine wrote it.
func decodeStatus(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("the engine's status is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the engine's status is not a JSON object (more follows it)")
	}
	return m, nil
}

// progressOf reads the engine's own progress fields from a status.
func progressOf(st map[string]any) Progress {
	var p Progress
	switch v := st["progress"].(type) {
	case json.Number:
		if f, err := v.Float64(); err == nil {
			p.Fraction = &f
		}
	case float64:
		p.Fraction = &v
	}
	p.Message, _ = st["message"].(string)
	return p
}

// terminal reads st as Succeeded, Failed, or "" (still running).
func (r *Runner) terminal(st map[string]any) State {
	t := r.opts.Terminal
	if t.Pointer == "" {
		if st["failed"] == true {
			return Failed
		}
		if st["completed"] == true {
			return Succeeded
		}
		return ""
	}
	v, ok := pointer(st, t.Pointer)
	if !ok || v == nil {
		return ""
	}
	s := fmt.Sprint(v)
	for _, f := range t.Failed {
		if strings.EqualFold(s, f) {
			return Failed
		}
	}
	for _, ok := range t.Succeeded {
		if strings.EqualFold(s, ok) {
			return Succeeded
		}
	}
	return ""
}

// pointer resolves an RFC 6901 JSON pointer in v.
func pointer(v any, p string) (any, bool) {
	if p == "" {
		return v, true
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// detail is a short ": <message>" from an engine's error body, or "".
func detail(body []byte) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	for _, k := range []string{"detail", "message", "error"} {
		if s, ok := m[k].(string); ok && s != "" {
			return ": " + shorten(s, 300)
		}
	}
	return ""
}
