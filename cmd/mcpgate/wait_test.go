package main

import (
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after 10 s: the
// condition, not a fixed sleep, is what a test waits for (gateway's tests
// have the same helper).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // how often cond is looked at
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after 10s waiting for %s", what)
		case <-tick.C:
		}
	}
}
