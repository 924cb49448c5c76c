package playbook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// lateExecute serves e, but answers an execute only after delay (the run
// is started at once, as an engine that is slow to answer has started it),
// or never when delay is negative; an answer not yet written is dropped
// when the request's context ends.
func lateExecute(e *engine.Engine, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/api/execute") {
			e.Handler().ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		e.Handler().ServeHTTP(rec, r)
		var late <-chan time.Time
		if delay >= 0 {
			late = time.After(delay)
		}
		select {
		case <-late:
		case <-r.Context().Done():
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// TestCancelWhileExecuteInFlight: a call left while the engine has started
// its run but not yet answered the execute (a loaded machine, a slow
// engine) still gets its run cancelled upstream, by the id the late answer
// gives. The execute used to be cut short with the run's context, and the
// run went on upstream uncancelled (TestOverTheNetwork saw 15-19 cancels of
// 20). An engine that never answers is given up ExecuteGrace after the
// cancel.
func TestCancelWhileExecuteInFlight(t *testing.T) {
	for _, tt := range []struct {
		name          string
		delay         time.Duration
		wantCancelled int
		wantEnd       time.Duration // after the cancel, when the run's goroutine is done
		wantRunText   string        // in the run's own outcome (what a request that attached to it is given)
	}{
		{"late answer", time.Second, 1, time.Second / 2, "cancelled before playbook demo/slow finished (execution "},
		{"no answer", -1, 0, ExecuteGrace, "the engine had not answered the execute of playbook demo/slow, and it did not within 10s: if the engine started the run, it goes on"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := engine.New(&engine.Options{Step: time.Hour})
				r := newRunner(t, lateExecute(e, tt.delay), Options{Linger: -1, Timeout: time.Hour})
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(time.Second/2, func() { cancel(ErrCallCancelled) })
				req := Request{Tool: "t", Path: "demo/slow", Caller: "alice"}
				out := r.Run(ctx, req)
				if out.State != Cancelled || out.ExecutionID != "" {
					t.Fatalf("the call: %s, id %q; want cancelled before the id was known", out.State, out.ExecutionID)
				}
				if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
					t.Fatalf("at the cancel: %+v, want the run started, not yet cancelled", c)
				}
				// The run goes on past the call: its own outcome is what a
				// request that attached to it (a task's Start) is given.
				r.mu.Lock()
				rn := r.runs[r.key(req)]
				r.mu.Unlock()
				if rn == nil {
					t.Fatal("the run is not kept after the call's cancel")
				}
				cancelledAt := time.Now()
				var active int
				for time.Since(cancelledAt) < tt.wantEnd+time.Minute {
					time.Sleep(time.Second / 4)
					synctest.Wait()
					r.mu.Lock()
					active = r.active
					r.mu.Unlock()
					if active == 0 {
						break
					}
				}
				if active != 0 {
					t.Fatalf("the run's goroutine still active %s after the cancel", time.Since(cancelledAt))
				}
				if took := time.Since(cancelledAt); took > tt.wantEnd {
					t.Errorf("the run ended %s after the cancel, want %s at most", took, tt.wantEnd)
				}
				if c := e.Counts(); c.Cancelled != tt.wantCancelled {
					t.Errorf("engine %+v, want %d cancelled", c, tt.wantCancelled)
				}
				<-rn.done
				if got := text(rn.out.Result); rn.out.State != Cancelled || !strings.Contains(got, tt.wantRunText) {
					t.Errorf("the run's outcome: %s, %q; want cancelled, saying %q", rn.out.State, got, tt.wantRunText)
				}
			})
		})
	}
}
