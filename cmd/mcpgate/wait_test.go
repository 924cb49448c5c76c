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
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for %s", what)
		}
	}
}
