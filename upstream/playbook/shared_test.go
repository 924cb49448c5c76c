package playbook

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// memShared is a Shared in memory, as two replicas would see one store;
// down makes every method fail, dropFails only Drop (a store that failed at
// the moment a run ended).
type memShared struct {
	mu        sync.Mutex
	recs      map[string]*RunRecord
	claimed   map[string]time.Time // when each record was claimed, for Age and takeovers
	slots     map[string]int       // "" for the engine, else by caller
	down      bool
	dropFails bool
}

var errStoreDown = errors.New("store down")

func newMemShared() *memShared {
	return &memShared{recs: map[string]*RunRecord{}, claimed: map[string]time.Time{}, slots: map[string]int{}}
}

func (m *memShared) Admit(_ context.Context, caller string, maxRuns, maxPerCaller int) (func(), int, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, 0, 0, errStoreDown
	}
	if maxRuns > 0 && m.slots[""] >= maxRuns {
		return nil, 1, m.slots[""], nil
	}
	if maxPerCaller > 0 && m.slots["c:"+caller] >= maxPerCaller {
		return nil, 2, m.slots["c:"+caller], nil
	}
	m.slots[""]++
	m.slots["c:"+caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.slots[""]--
			m.slots["c:"+caller]--
			m.mu.Unlock()
		})
	}, 0, 0, nil
}

func (m *memShared) Claim(_ context.Context, key string, rec RunRecord, _ time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return false, errStoreDown
	}
	if r := m.recs[key]; r != nil && (r.ExecutionID != "" || time.Since(m.claimed[key]) <= StaleClaimAfter) {
		return false, nil
	}
	rec.Waiters = 1
	m.recs[key] = &rec
	m.claimed[key] = time.Now()
	return true, nil
}

func (m *memShared) Record(_ context.Context, key string) (*RunRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, errStoreDown
	}
	if r := m.recs[key]; r != nil {
		cp := *r
		cp.Age = time.Since(m.claimed[key])
		return &cp, nil
	}
	return nil, nil
}

func (m *memShared) Update(_ context.Context, key string, rec RunRecord, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errStoreDown
	}
	r := m.recs[key]
	switch {
	case r == nil:
	case rec.Claim != "" && r.Claim != rec.Claim:
		return ErrClaimLost
	default:
		r.ExecutionID, r.Path, r.Begun, r.State = rec.ExecutionID, rec.Path, rec.Begun, rec.State
	}
	return nil
}

func (m *memShared) Drop(_ context.Context, key, claim string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down || m.dropFails {
		return errStoreDown
	}
	if r := m.recs[key]; r != nil && claim != "" && r.Claim != claim {
		return ErrClaimLost
	}
	delete(m.recs, key)
	return nil
}

func (m *memShared) count(key string, by int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, errStoreDown
	}
	r := m.recs[key]
	if r == nil {
		return 0, nil
	}
	r.Waiters += by
	return r.Waiters, nil
}

func (m *memShared) Join(_ context.Context, key string) (int64, error)    { return m.count(key, 1) }
func (m *memShared) Leave(_ context.Context, key string) (int64, error)   { return m.count(key, -1) }
func (m *memShared) Waiters(_ context.Context, key string) (int64, error) { return m.count(key, 0) }

// replicas are two runners in front of one engine, sharing sh.
func replicas(t *testing.T, e *engine.Engine, sh Shared, opts Options) (*Runner, *Runner) {
	t.Helper()
	opts.Shared = sh
	return newRunner(t, e.Handler(), opts), newRunner(t, e.Handler(), opts)
}

var alicesRun = Request{Tool: "t", Path: "demo/slow", Caller: "alice", Workload: map[string]any{"label": "x"}}

func TestSharedRuns(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, e *engine.Engine, sh *memShared)
	}{
		{"a re-send on B follows A's run: one execute, its result", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{})
			first := make(chan *Outcome, 1)
			go func() { first <- a.Run(t.Context(), alicesRun) }()
			time.Sleep(time.Second) // fake time: the run is going
			synctest.Wait()
			out := b.Run(t.Context(), alicesRun)
			if out.State != Succeeded || !out.Attached {
				t.Errorf("B: %s attached=%v (%s)", out.State, out.Attached, text(out.Result))
			}
			if o := <-first; o.State != Succeeded || o.ExecutionID != out.ExecutionID {
				t.Errorf("A: %s %s, B followed %s", o.State, o.ExecutionID, out.ExecutionID)
			}
			// Within the dedup window, the success goes to a re-send on B.
			if out := b.Run(t.Context(), alicesRun); out.State != Succeeded || !out.Attached {
				t.Errorf("B after success: %s attached=%v", out.State, out.Attached)
			}
			if c := e.Counts(); c.Started != 1 {
				t.Errorf("the engine started %d runs, want 1", c.Started)
			}
		}},
		{"B drains while it follows A's run: B's request is answered, the run goes on", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{})
			first := make(chan *Outcome, 1)
			go func() { first <- a.Run(t.Context(), alicesRun) }()
			time.Sleep(time.Second) // fake time: the run is going
			synctest.Wait()
			followed := make(chan *Outcome, 1)
			go func() { followed <- b.Run(t.Context(), alicesRun) }()
			time.Sleep(time.Second)
			synctest.Wait()
			b.Release()
			out := <-followed
			if out.State != Released || !out.Attached || !strings.Contains(text(out.Result), "the run goes on") {
				t.Errorf("B: %s attached=%v (%s)", out.State, out.Attached, text(out.Result))
			}
			if o := <-first; o.State != Succeeded || o.ExecutionID != out.ExecutionID {
				t.Errorf("A: %s %s, B followed %s", o.State, o.ExecutionID, out.ExecutionID)
			}
			if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
				t.Errorf("engine: %+v, want 1 started, none cancelled", c)
			}
		}},
		{"A's client hangs up; B's re-send keeps the run past A's linger", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{})
			ctx, hangUp := context.WithCancel(t.Context())
			done := make(chan *Outcome, 1)
			go func() { done <- a.Run(ctx, alicesRun) }()
			time.Sleep(time.Second)
			hangUp()
			if o := <-done; o.State != Cancelled || !o.CancelPlanned {
				t.Fatalf("A after the hang-up: %s planned=%v", o.State, o.CancelPlanned)
			}
			out := b.Run(t.Context(), alicesRun) // within the 2s linger
			if out.State != Succeeded || !out.Attached {
				t.Errorf("B: %s attached=%v (%s)", out.State, out.Attached, text(out.Result))
			}
			if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
				t.Errorf("engine %+v, want one run not cancelled", c)
			}
		}},
		{"a follower that is last out cancels A's run upstream", func(t *testing.T, _ *engine.Engine, sh *memShared) {
			e := engine.New(&engine.Options{Step: time.Minute}) // still going when B cancels
			a, b := replicas(t, e, sh, Options{})
			actx, aHangUp := context.WithCancel(t.Context())
			go a.Run(actx, alicesRun)
			time.Sleep(time.Second)
			bctx, bCancel := context.WithCancelCause(t.Context())
			done := make(chan *Outcome, 1)
			go func() { done <- b.Run(bctx, alicesRun) }()
			time.Sleep(time.Second)
			aHangUp() // B still waits: A's linger must not cancel
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 0 {
				t.Fatalf("A cancelled the run B waits for: %+v", c)
			}
			bCancel(ErrCallCancelled)
			if o := <-done; o.State != Cancelled || !o.CancelPlanned {
				t.Errorf("B: %s planned=%v", o.State, o.CancelPlanned)
			}
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 || c.Started != 1 {
				t.Errorf("engine %+v, want the one run cancelled at once", c)
			}
		}},
		{"a stale record of a failed run is not followed: a fresh run", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{})
			req := Request{Tool: "t", Path: "demo/fail", Caller: "alice"}
			sh.dropFails = true
			if o := a.Run(t.Context(), req); o.State != Failed {
				t.Fatalf("A: %s", o.State)
			}
			sh.dropFails = false
			if o := b.Run(t.Context(), req); o.State != Failed || o.Attached {
				t.Errorf("B: %s attached=%v, want a run of its own", o.State, o.Attached)
			}
			if c := e.Counts(); c.Started != 2 {
				t.Errorf("the engine started %d runs, want 2", c.Started)
			}
		}},
		{"the caps count both replicas", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{MaxRunsPerCaller: 1})
			go a.Run(t.Context(), alicesRun)
			time.Sleep(time.Second)
			o := b.Run(t.Context(), Request{Tool: "t", Path: "demo/fast", Caller: "alice"})
			if o.State != Busy || o.Cap != "max_runs_per_caller" || !strings.Contains(text(o.Result), "across the gateway's replicas") {
				t.Errorf("B: %s %s %s", o.State, o.Cap, text(o.Result))
			}
			if o := b.Run(t.Context(), Request{Tool: "t", Path: "demo/fast", Caller: "bob"}); o.State != Succeeded {
				t.Errorf("bob on B: %s", o.State)
			}
		}},
		{"a task on B for the run A drives is that run: its id, no second execute", func(t *testing.T, e *engine.Engine, sh *memShared) {
			a, b := replicas(t, e, sh, Options{})
			go a.Run(t.Context(), alicesRun)
			time.Sleep(time.Second)
			id, begun, out := b.Start(t.Context(), alicesRun)
			if out != nil || id == "" {
				t.Fatalf("B's task: %q %+v", id, out)
			}
			if rec, _ := sh.Record(t.Context(), a.key(alicesRun)); rec == nil || rec.ExecutionID != id || !rec.Begun.Equal(begun) || rec.Waiters != 2 {
				t.Errorf("B's task %s (begun %v) against the record %+v: want A's run, counted as waiting", id, begun, rec)
			}
			if c := e.Counts(); c.Started != 1 {
				t.Errorf("the engine started %d runs, want 1", c.Started)
			}
		}},
		{"a store that is down: each replica alone", func(t *testing.T, e *engine.Engine, sh *memShared) {
			sh.down = true
			a, b := replicas(t, e, sh, Options{})
			first := make(chan *Outcome, 1)
			go func() { first <- a.Run(t.Context(), alicesRun) }()
			time.Sleep(time.Second)
			if o := b.Run(t.Context(), alicesRun); o.State != Succeeded || o.Attached {
				t.Errorf("B: %s attached=%v", o.State, o.Attached)
			}
			if o := <-first; o.State != Succeeded {
				t.Errorf("A: %s", o.State)
			}
			if c := e.Counts(); c.Started != 2 {
				t.Errorf("the engine started %d runs, want 2 (no store: per process)", c.Started)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tt.run(t, engine.New(&engine.Options{Step: time.Second}), newMemShared())
				time.Sleep(DefaultTimeout + time.Minute) // fake time: every run's goroutine ends
				synctest.Wait()
			})
		})
	}
}
