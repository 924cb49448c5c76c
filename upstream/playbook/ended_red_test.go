package playbook

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestStartEndedKeptWithTheRun: the Ended of the requests that start or
// join one run are called once each when it ends — the first
// MaxEndedPerRun of them; those past it are not — with their own copy of
// the outcome (Attached for a join), and a request that joins the run once
// it has ended (a success, within the dedup window) is told at once.
// Waiting to be told holds no goroutine per request.
func TestStartEndedKeptWithTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Step: time.Second})
		r := newRunner(t, e.Handler(), Options{PollInterval: time.Second})
		var mu sync.Mutex
		var attached, fresh int
		ended := func(out *Outcome) {
			mu.Lock()
			defer mu.Unlock()
			if out.State != Succeeded {
				t.Errorf("told %s, want %s", out.State, Succeeded)
			}
			if out.Attached {
				attached++
			} else {
				fresh++
			}
		}
		req := Request{Tool: "t", Path: "demo/slow", Caller: "carol", Ended: ended}
		const sent = MaxEndedPerRun + 10
		for range sent {
			if _, _, out := r.Start(t.Context(), req); out != nil {
				t.Fatalf("Start: %s %s", out.State, text(out.Result))
			}
		}
		if n := e.Counts().Started; n != 1 {
			t.Fatalf("%d runs started, want 1 (the others join it)", n)
		}
		synctest.Wait()
		mu.Lock()
		if attached+fresh != 0 {
			t.Errorf("told %d requests before the run ended", attached+fresh)
		}
		mu.Unlock()

		time.Sleep(10 * time.Second) // the run's five steps, in the bubble
		synctest.Wait()
		mu.Lock()
		if fresh != 1 || attached != MaxEndedPerRun-1 {
			t.Errorf("told %d starting and %d joining requests, want 1 and %d", fresh, attached, MaxEndedPerRun-1)
		}
		mu.Unlock()

		// Within the dedup window, a re-sent call joins the run that
		// succeeded: told at once.
		if _, _, out := r.Start(t.Context(), req); out != nil {
			t.Fatalf("Start after the end: %s %s", out.State, text(out.Result))
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if attached != MaxEndedPerRun {
			t.Errorf("a join after the end: told %d joining requests in all, want %d", attached, MaxEndedPerRun)
		}
	})
}
