package playbook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Runs shared by a fleet of gateways.
//
// With Options.Shared set, a Runner shares with every other replica that
// uses the same store (one engine, one upstream name):
//
//   - the dedup table: the replica that starts a run records its dedup key
//     (a hash: see Runner.key) with the execution id and when it began; a
//     same request reaching another replica finds the record and follows the
//     run by polling its status route itself, with no execute;
//   - who waits for a run: every request waiting anywhere is counted in the
//     record, so the linger that cancels an abandoned run counts re-sends on
//     other replicas, and the last request out anywhere decides (a follower
//     that is last cancels through the engine's cancel route itself);
//   - the run caps (MaxRuns, MaxRunsPerCaller) count the fleet's runs, as
//     leases that expire when the replica holding them stops renewing them.
//
// The local table and counts stay as they are: a run started here is joined
// here without the store, and when the store fails (an error from any
// method) the runner does what it does alone. Nothing secret is handed to
// the store: keys are hashes, Request.Caller a digest.

// Shared is the state a Runner shares with the other replicas of a fleet
// (see Options.Shared). Every method has its own short timeout; an error
// means the store could not be asked, and the runner then decides alone.
type Shared interface {
	// Admit takes a fleet-wide slot for a run about to start: refused is 0
	// when taken, 1 when maxRuns runs are in flight on the engine, 2 when
	// maxPerCaller are in flight for caller; n is the count that refused it.
	// A bound <= 0 is no bound. release gives the slot back (once).
	Admit(ctx context.Context, caller string, maxRuns, maxPerCaller int) (release func(), refused, n int, err error)
	// Claim records key's run as starting on this replica with one waiter,
	// for ttl, unless a record exists: claimed is false then. The record
	// is rec.Claim's (a token unique to this claim). A record that is a
	// claim without an execution id older than StaleClaimAfter (by the
	// store's clock) does not count: its replica died, or stalled, or its
	// claim timed out at the replica while the store kept it, before the
	// run was recorded; Claim takes it over, and the record is the new
	// claim's from then on.
	Claim(ctx context.Context, key string, rec RunRecord, ttl time.Duration) (claimed bool, err error)
	// Record returns key's record, or nil when there is none.
	Record(ctx context.Context, key string) (*RunRecord, error)
	// Update sets the execution id, begun and state of key's record and its
	// ttl, if the record exists and is rec.Claim's: when another claim took
	// it over, nothing is written and the error is ErrClaimLost (rec.Claim
	// "" writes whoever's record it is). The check and the write are one
	// step in the store.
	Update(ctx context.Context, key string, rec RunRecord, ttl time.Duration) error
	// Drop deletes key's record if it is claim's (ErrClaimLost when another
	// claim took it over); claim "" deletes whoever's record it is.
	Drop(ctx context.Context, key, claim string) error
	// Join counts one more request waiting for key's run and returns the
	// count; 0 when there is no record (nothing is counted then).
	Join(ctx context.Context, key string) (int64, error)
	// Leave counts one request out and returns the count left.
	Leave(ctx context.Context, key string) (int64, error)
	// Waiters returns the count of requests waiting for key's run (0 when
	// there is no record).
	Waiters(ctx context.Context, key string) (int64, error)
}

// ErrClaimLost is Shared.Update's and Drop's refusal of a write by a
// replica whose claim on a run's record another replica took over (a claim
// that stayed without an execution id past StaleClaimAfter: see
// Shared.Claim). The record names the other replica's run; the runner
// gives up its own run of the same request and follows that one.
var ErrClaimLost = errors.New("playbook: another replica took over the claim on this run's record")

// RunRecord is what a fleet knows of one run, by its dedup key.
type RunRecord struct {
	// Claim is the token of the claim that made the record (Shared.Claim,
	// Update, Drop); Record need not return it.
	Claim string
	// ExecutionID is the engine's id; "" while the run is being started.
	ExecutionID string
	// Path is the playbook's path.
	Path string
	// Begun is when the run started: its ceiling is Begun + Options.Timeout.
	Begun time.Time
	// State is "" while the run goes on, Succeeded once it has (only a
	// success is kept: see Options.DedupWindow).
	State State
	// Waiters counts the requests waiting for it, fleet-wide.
	Waiters int64
	// Age is how long ago the record was claimed, by the store's clock
	// (replicas' clocks may differ); 0 when the store cannot say.
	Age time.Duration
}

// remoteStartWait bounds how long a request waits for another replica that
// claimed the same run to record its execution id, polling the record every
// remoteStartPoll. The execute request is one HTTP call: past this the
// claim is taken to be a replica that died before it could say, and the
// request starts a run of its own.
const (
	remoteStartWait = 10 * time.Second
	remoteStartPoll = 50 * time.Millisecond
)

// StaleClaimAfter is the age past which a claim without an execution id is
// taken to be a replica that died before it could say (see remoteStartWait):
// a request does not wait for it, and Shared.Claim takes it over, so that
// such a record does not hold every same request for remoteStartWait, and
// leave it without dedup, for as long as it lives (the run's timeout and
// the dedup window).
const StaleClaimAfter = remoteStartWait

// followGrace is how long past a followed run's ceiling a follower still
// polls: the replica that drives the run cancels it at the ceiling, and the
// follower reads that; past the grace the driver is taken to be gone.
const followGrace = 10 * time.Second

// shareTTL is how long a run's record lives while the run goes on: its
// ceiling plus the dedup window.
func (r *Runner) shareTTL() time.Duration { return r.opts.Timeout + r.opts.DedupWindow }

// fleet asks the store for key's run before this replica starts one. It
// returns the record of a run another replica started (or is starting) that
// the request may follow, or nil: start locally. A run being started is
// waited for, up to remoteStartWait.
func (r *Runner) fleet(ctx context.Context, key string) *RunRecord {
	deadline := time.Now().Add(remoteStartWait)
	for {
		rec, err := r.opts.Shared.Record(ctx, key)
		if err != nil || rec == nil {
			return nil
		}
		if rec.ExecutionID != "" {
			return rec
		}
		if rec.Age > StaleClaimAfter || time.Now().After(deadline) {
			return nil
		}
		t := time.NewTimer(remoteStartPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// localRun reports whether key names a run of this replica that a request
// may join.
func (r *Runner) localRun(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rn := r.runs[key]
	if rn == nil {
		return false
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	select {
	case <-rn.done:
		return rn.out.State == Succeeded && time.Now().Before(rn.expires)
	default:
		return !rn.ending && rn.ctx.Err() == nil
	}
}

// dispatch is attach with the fleet: it follows a run another replica
// started (remote != nil), or joins or starts one here. A run started here
// holds a fleet slot and, when key is set, the fleet's record of key.
// local skips the fleet's record: the request starts a run here (or joins
// one of this replica's).
func (r *Runner) dispatch(ctx context.Context, key string, req Request, local bool) (rn *run, attached bool, remote *RunRecord, busy *Outcome) {
	sh := r.opts.Shared
	if sh == nil {
		rn, attached, busy = r.attach(ctx, key, req, nil, "")
		return rn, attached, nil, busy
	}
	for try := 0; ; try++ {
		if key != "" && r.localRun(key) {
			// Joined here without a slot: a run started here holds the
			// fleet's record, where the request is counted too.
			rn, attached, busy = r.attach(ctx, key, req, nil, "")
			if attached && rn.claimed {
				_, _ = sh.Join(ctx, key)
			}
			return rn, attached, nil, busy
		}
		if key != "" && !local {
			if rec := r.fleet(ctx, key); rec != nil {
				if rec.State == Succeeded {
					return nil, true, rec, nil
				}
				if n, err := sh.Join(ctx, key); err == nil && n > 0 {
					return nil, true, rec, nil
				}
				// Gone meanwhile, or the store failed: start here.
			}
		}
		release, refused, n, err := sh.Admit(ctx, req.Caller, r.opts.MaxRuns, r.opts.MaxRunsPerCaller)
		if err == nil && refused != 0 {
			return nil, false, nil, r.busy(req, refused == 1, n, true)
		}
		claim := "" // this request's claim on key's record, once granted
		if key != "" && err == nil {
			token := claimToken()
			ok, cerr := sh.Claim(ctx, key, RunRecord{Path: req.Path, Begun: time.Now(), Claim: token}, r.shareTTL())
			if cerr == nil && !ok && try < 2 {
				release() // another replica claimed it first: follow it
				continue
			}
			if cerr == nil && ok {
				claim = token
			}
		}
		claimed := claim != ""
		if err != nil {
			release = nil // the store failed: the local caps decide alone
		}
		rn, attached, busy = r.attach(ctx, key, req, release, claim)
		if rn == nil || attached {
			// Refused here, or joined a local run started without the
			// store: the slot and the claim taken above are not this run's.
			if release != nil {
				release()
			}
			if claimed {
				_ = sh.Drop(ctx, key, claim)
			}
		}
		if attached && rn.claimed {
			// A local run: count the request fleet-wide too, as a
			// request on another replica would be.
			_, _ = sh.Join(ctx, key)
		}
		return rn, attached, nil, busy
	}
}

// follow waits for a run another replica drives, by polling its status
// route, and returns its outcome. It is Run for a remote run: Progress is
// called after each poll; when ctx ends first the request is counted out,
// and when it was the last request waiting anywhere the run is cancelled
// upstream (after the linger, or at once when the client cancelled).
//
// It returns nil when the first status read says the run has already
// ended without success: a record its replica could not drop (the store
// failed then). Such a run is not handed to a new request (see join); the
// caller starts a fresh one.
func (r *Runner) follow(ctx context.Context, key string, rec *RunRecord, req Request) *Outcome {
	id := rec.ExecutionID
	deadline := rec.Begun.Add(r.opts.Timeout)
	tick := time.NewTimer(0)
	defer tick.Stop()
	polls, failures := 0, 0
	counted := rec.State != Succeeded // dispatch joined it
	leave := func() {
		if counted {
			_, _ = r.opts.Shared.Leave(context.WithoutCancel(ctx), key)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return r.abandonRemote(ctx, key, id, req, polls, counted)
		case <-r.released: // the drain's end (Release): the run goes on
			leave()
			return r.releasedOutcome(id, req, true, polls)
		case <-tick.C:
		}
		s, err := r.Check(ctx, id, req.Path, req.Cred)
		switch {
		case err != nil && ctx.Err() != nil:
			continue // the select above says how
		case err != nil:
			if failures++; failures >= r.opts.MaxPollFailures {
				leave()
				msg := fmt.Sprintf("playbook %s (execution %s): its status could not be read: %v", req.Path, id, err)
				return &Outcome{State: Failed, ExecutionID: id, Attached: true, Polls: polls,
					Result: errorResult(msg, id, req.Path, nil, r.opts.MaxStructured)}
			}
		default:
			failures = 0
			polls++
			if req.Progress != nil {
				p := s.Progress
				p.Polls = polls
				req.Progress(p)
			}
			if s.State != "" {
				leave()
				if polls == 1 && s.State != Succeeded {
					return nil
				}
				return &Outcome{State: s.State, ExecutionID: id, Status: s.Status, Result: s.Result, Attached: true, Polls: polls}
			}
		}
		if time.Now().After(deadline.Add(followGrace)) {
			leave()
			return &Outcome{State: TimedOut, ExecutionID: id, Attached: true, Polls: polls,
				Result: errorResult(r.CeilingText(req.Path, id)+"; the replica that ran it did not say how it ended", id, req.Path, nil, r.opts.MaxStructured)}
		}
		tick.Reset(r.opts.PollInterval)
	}
}

// abandonRemote counts a follower out whose ctx ended, and cancels the run
// upstream when it was the last request waiting for it anywhere: at once
// when the client cancelled the call, else after the linger unless a
// request joins it meanwhile. When the store cannot say, the follower is
// not the last: the replica that drives the run decides.
func (r *Runner) abandonRemote(ctx context.Context, key, id string, req Request, polls int, counted bool) *Outcome {
	now := errors.Is(context.Cause(ctx), ErrCallCancelled)
	last := false
	if counted {
		n, err := r.opts.Shared.Leave(context.WithoutCancel(ctx), key)
		last = err == nil && n <= 0
	}
	if last && !r.opts.Routes.Cancel.IsZero() {
		cancel := func() {
			if n, err := r.opts.Shared.Waiters(context.Background(), key); err != nil || n > 0 {
				return // joined meanwhile, or cannot tell: the driver decides
			}
			cctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			err := r.Cancel(cctx, id, req.Cred)
			r.logger.Info("playbook run cancelled upstream by a follower", "playbook", req.Path, "execution_id", id, "error", errText(err))
		}
		if now || r.opts.Linger < 0 {
			go cancel()
		} else {
			time.AfterFunc(r.opts.Linger, cancel)
		}
	}
	return &Outcome{State: Cancelled, ExecutionID: id, Attached: true, Polls: polls, CancelPlanned: last && !r.opts.Routes.Cancel.IsZero(),
		CancelNow: now, Result: errorResult(r.abandonText(req.Path, id, now, last), id, req.Path, nil, r.opts.MaxStructured)}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fleetWaits reports whether a request anywhere still waits for rn, by the
// store's count; false when rn has no record of its own in the store, or
// the store cannot say (the replica then decides by its own count, as
// alone).
func (r *Runner) fleetWaits(rn *run) bool {
	if r.opts.Shared == nil || !rn.holds() {
		return false
	}
	n, err := r.opts.Shared.Waiters(context.Background(), rn.key)
	return err == nil && n > 0
}

// leaveFleet counts a local request out of rn fleet-wide, when rn has a
// record of its own in the store; it reports whether requests still wait
// for it elsewhere.
func (r *Runner) leaveFleet(rn *run) bool {
	if r.opts.Shared == nil || !rn.holds() {
		return false
	}
	n, err := r.opts.Shared.Leave(context.Background(), rn.key)
	return err == nil && n > 0
}

// recordStart tells the fleet the execution id of a run started here. It
// returns ErrClaimLost when another replica took over the run's claim
// meanwhile (see supersede); other store errors are the store's to count.
func (r *Runner) recordStart(rn *run, req Request, id string) error {
	if r.opts.Shared == nil || !rn.holds() {
		return nil
	}
	err := r.opts.Shared.Update(context.Background(), rn.key, RunRecord{ExecutionID: id, Path: req.Path, Begun: rn.begun, Claim: rn.claim}, r.shareTTL())
	if errors.Is(err, ErrClaimLost) {
		return err
	}
	return nil
}

// supersede gives up run rn, started here as execution id, whose claim on
// the fleet's record another replica took over before the id could be
// recorded (this replica took longer than StaleClaimAfter between its claim
// and the engine's answer): that replica started the same request's run
// too, and the record names it. rn is cancelled upstream, no request may
// join it, and it touches the record no more; the requests waiting for it
// follow the other run (Run and Start dispatch them again).
func (r *Runner) supersede(rn *run, req Request, id string) *Outcome {
	rn.lost.Store(true)
	rn.end()
	msg := fmt.Sprintf("playbook %s (execution %s) was started twice: this replica took longer than %s to start it, another replica took its claim over and started the same run, and this one is given up for that one", req.Path, id, StaleClaimAfter)
	sent, msg := r.cancelUpstream(rn.ctx, id, req.Cred, msg)
	r.logger.Warn("playbook run superseded: another replica took over its claim and started the same run", "playbook", req.Path, "execution_id", id, "cancel_sent", sent)
	return &Outcome{State: Cancelled, ExecutionID: id, CancelSent: sent, superseded: true,
		Result: errorResult(msg, id, req.Path, nil, r.opts.MaxStructured)}
}

// holds reports whether rn's claim holds the fleet's record of its key.
func (rn *run) holds() bool { return rn.claimed && !rn.lost.Load() }

// claimToken is a fresh claim's token (RunRecord.Claim).
func claimToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recordEnd tells the fleet how a run started here ended: a success is kept
// for the dedup window, anything else is forgotten; and frees its slot.
func (r *Runner) recordEnd(rn *run, out *Outcome, path string) {
	if rn.release != nil {
		rn.release()
	}
	if r.opts.Shared == nil || !rn.holds() {
		return
	}
	ctx := context.Background()
	if out.State == Succeeded && r.opts.DedupWindow > 0 {
		_ = r.opts.Shared.Update(ctx, rn.key, RunRecord{ExecutionID: out.ExecutionID, Path: path, Begun: rn.begun, State: Succeeded, Claim: rn.claim}, r.opts.DedupWindow)
		return
	}
	_ = r.opts.Shared.Drop(ctx, rn.key, rn.claim)
}
