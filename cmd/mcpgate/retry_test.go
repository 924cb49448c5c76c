package main

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestRetrierKeepsItsDueTime: serve's loop resets the retry timer after
// every event. An event while a retry is pending keeps that retry's due
// time: it neither disarms the timer (a stopped timer that nothing re-armed
// until the next event) nor postpones it; a retry that fired waits longer
// next time, and every upstream loaded disarms it.
func TestRetrierKeepsItsDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &retrier{t: time.NewTimer(time.Hour)}
		rt.t.Stop()
		fired := func(within time.Duration) bool {
			select {
			case <-rt.C():
				return true
			case <-time.After(within):
				return false
			}
		}
		rt.reset(1, time.Now()) // an upstream not loaded: armed, retryMin ±20%
		// Another event (a SIGHUP, a reload) half-way to it: reset is told
		// the time it comes at, before the retry fires.
		rt.reset(1, time.Now().Add(retryMin/2))
		if !fired(retryMin * 13 / 10) {
			t.Fatal("the retry did not fire by its due time after another event")
		}
		rt.reset(1, time.Now()) // the retry's own event: back off
		if fired(time.Duration(float64(2*retryMin) * 0.79)) {
			t.Fatal("the second retry came before its doubled backoff")
		}
		if !fired(2 * retryMin) {
			t.Fatal("the second retry did not come")
		}
		rt.reset(0, time.Now()) // every upstream loaded
		if fired(time.Hour) {
			t.Fatal("a retry fired with every upstream loaded")
		}
	})
}
