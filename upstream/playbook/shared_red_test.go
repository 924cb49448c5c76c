package playbook

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestSlowClaimerSuperseded: replica A claims a run and stalls before the
// engine answers its execute; past StaleClaimAfter replica B takes the
// claim over, starts the run and records its id. When A's execute answers
// at last, A's write of its id is refused (ErrClaimLost), so the record
// keeps B's run; A cancels its own duplicate upstream and its request
// follows B's run and gets its result (red-team finding 4 of issue 24).
// The same for a task (Start): it holds B's run.
func TestSlowClaimerSuperseded(t *testing.T) {
	for _, how := range []string{"Run", "Start"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := engine.New(&engine.Options{Step: time.Second})
				hold := make(chan struct{})
				var executes atomic.Int32
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/execute") && executes.Add(1) == 1 {
						<-hold // A's execute: the engine answers late
					}
					e.Handler().ServeHTTP(w, r)
				})
				sh := newMemShared()
				opts := Options{Shared: sh}
				a, b := newRunner(t, h, opts), newRunner(t, h, opts)

				type started struct {
					id  string
					out *Outcome
				}
				first := make(chan started, 1)
				go func() {
					if how == "Run" {
						out := a.Run(t.Context(), alicesRun)
						first <- started{out.ExecutionID, out}
					} else {
						id, _, out := a.Start(t.Context(), alicesRun)
						first <- started{id, out}
					}
				}()
				time.Sleep(StaleClaimAfter + time.Second) // fake time: A's claim is stale
				synctest.Wait()
				bOut := make(chan *Outcome, 1)
				go func() { bOut <- b.Run(t.Context(), alicesRun) }()
				time.Sleep(time.Second) // B has taken over and started its run
				synctest.Wait()
				rec, _ := sh.Record(t.Context(), a.key(alicesRun))
				if rec == nil || rec.ExecutionID == "" {
					t.Fatalf("B did not record its run: %+v", rec)
				}
				bID := rec.ExecutionID
				close(hold) // A's execute answers: a second run at the engine
				got := <-first
				if got.id != bID {
					t.Errorf("A's %s: execution %q (%+v); want B's run %s", how, got.id, got.out, bID)
				}
				if how == "Run" && (got.out.State != Succeeded || !got.out.Attached) {
					t.Errorf("A's call: %s attached=%v (%s); want B's success, followed", got.out.State, got.out.Attached, text(got.out.Result))
				}
				if out := <-bOut; out.State != Succeeded || out.ExecutionID != bID {
					t.Errorf("B: %s %s", out.State, out.ExecutionID)
				}
				if rec, _ := sh.Record(t.Context(), a.key(alicesRun)); rec == nil || rec.ExecutionID != bID {
					t.Errorf("the record after A's late write: %+v; want B's run %s", rec, bID)
				}
				c := e.Counts()
				cancelled := e.CancelledIDs()
				if c.Started != 2 || len(cancelled) != 1 || cancelled[0] == bID || slices.Contains(cancelled, bID) {
					t.Errorf("engine %+v, cancelled %v; want A's duplicate (not B's %s) cancelled", c, cancelled, bID)
				}
				time.Sleep(DefaultTimeout + time.Minute) // fake time: every run's goroutine ends
				synctest.Wait()
			})
		})
	}
}
