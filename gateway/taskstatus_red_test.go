package gateway

import (
	"runtime"
	"testing"
	"time"
)

// TestTaskStatusJoinsCostNoGoroutine: a task-augmented call re-sent on a
// session joins the run its first sending started (the runner's dedup), and
// each join is to be told of the run's end. Being told must not cost a
// goroutine per join parked until the run ends (up to the runner's
// timeout, 24h at most): a caller re-sending one call would otherwise hold
// as many goroutines as it sends requests.
func TestTaskStatusJoinsCostNoGoroutine(t *testing.T) {
	te := taskGateway(t, time.Hour, time.Hour, TasksConfig{}, nil, true) // a run that outlives the test
	const carol = "Bearer carol"
	sid := openSession(t, te.url, carol)
	h := sessionHeader(sid, carol)
	const call = `{"name":"demo_slow","arguments":{"label":"again"},"task":{}}`
	if _, e := te.send(t, carol, "tools/call", call, h); e != nil {
		t.Fatal(e)
	}
	runtime.GC()
	before := runtime.NumGoroutine()
	const joins = 200
	for range joins {
		if _, e := te.send(t, carol, "tools/call", call, h); e != nil {
			t.Fatal(e)
		}
	}
	if n := te.e.Counts().Started; n != 1 {
		t.Fatalf("the engine started %d runs, want 1 (the re-sent calls join it)", n)
	}
	grown := runtime.NumGoroutine() - before
	t.Logf("%d goroutines more after %d joins of one run", grown, joins)
	if grown > joins/4 {
		t.Errorf("%d goroutines more after %d joins of one run: one per join", grown, joins)
	}
}
