package playbook

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/upstream"
)

// TestRelease: a drain's Release answers the waiting requests with their
// execution id and leaves the run going upstream — no cancel, no linger —
// and a request waiting after Release is answered at once the same way.
func TestRelease(t *testing.T) {
	slow := Request{Tool: "demo_slow", Path: "demo/slow", Workload: map[string]any{"label": "x"}, Cred: upstream.Credentials{BearerToken: "tok"}, Caller: "c1"}
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Token: "tok", Step: time.Hour})
		r := newRunner(t, e.Handler(), Options{Timeout: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		outs := make(chan *Outcome, 2)
		go func() { outs <- r.Run(ctx, slow) }()
		go func() { outs <- r.Run(ctx, slow) }() // attaches to the same run
		time.Sleep(3 * time.Second)
		synctest.Wait()
		r.Release()
		for range 2 {
			out := <-outs
			msg := text(out.Result)
			if out.State != Released || !out.Result.IsError || out.ExecutionID == "" {
				t.Fatalf("%s %q: %s", out.State, out.ExecutionID, msg)
			}
			for _, want := range []string{"shutting down", "execution " + out.ExecutionID, "the run goes on, it is not cancelled", "state.backend: redis"} {
				if !strings.Contains(msg, want) {
					t.Errorf("text lacks %q: %s", want, msg)
				}
			}
		}
		// Well past the linger: nothing was cancelled upstream.
		time.Sleep(10 * DefaultLinger)
		synctest.Wait()
		if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
			t.Fatalf("engine: %+v, want 1 started, 0 cancelled", c)
		}
		// A request after Release is answered at once.
		start := time.Now()
		if out := r.Run(ctx, slow); out.State != Released || time.Since(start) != 0 {
			t.Fatalf("after Release: %s after %s", out.State, time.Since(start))
		}
		r.Release() // twice is fine
		// The run goes on to its ceiling, which ends it (and the bubble).
		time.Sleep(time.Minute)
		synctest.Wait()
	})
}
