package gateway

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestCancelPublishBoundsID: a notifications/cancelled that matches no call
// here is published to every replica; one whose request id is of any length
// up to max_body_bytes (4 MiB) must not be, or one client makes Redis send
// megabytes to every replica per POST (and past Redis' pubsub output
// buffer limit, 32 MiB by default, Redis drops every replica's
// subscription: no cancellation reaches any of them meanwhile). A usual id
// still goes out.
func TestCancelPublishBoundsID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInflight()
		var mu sync.Mutex
		var got []int
		in.publish = func(_ [32]byte, id string) {
			mu.Lock()
			got = append(got, len(id))
			mu.Unlock()
		}
		r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer alice")
		in.cancel(r, strings.Repeat("x", 1<<20))
		in.cancel(r, strings.Repeat("y", maxSharedRequestID-1)) // "s" + the id: maxSharedRequestID bytes
		in.cancel(r, float64(7))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 {
			t.Fatalf("published ids of lengths %v, want the two short ones only", got)
		}
		for _, n := range got {
			if n > maxSharedRequestID {
				t.Errorf("published an id of %d bytes, over %d", n, maxSharedRequestID)
			}
		}
	})
}

// TestFleetStaleClaim: a replica claims a run's record, then dies before it
// records the execution id (or its claim timed out at the client while
// Redis kept it). The record stays for the run's timeout plus the dedup
// window; a same call on another replica waited remoteStartWait (10 s) for
// the id, found its own claim refused, waited 10 s more and ran without a
// record — 20 s on every re-send for as long as the stale claim lived, and
// no dedup. A claim older than remoteStartWait (by Redis' clock) is taken
// over at once.
func TestFleetStaleClaim(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: 50 * time.Millisecond}, Playbooks{PollInterval: 100 * time.Millisecond,
		Timeout: time.Minute, DedupWindow: time.Minute})
	if _, got := post(t, f.url[0], call(1, "demo_slow", `{"label":"x"}`), alice); !succeeded(got) {
		t.Fatalf("the first call: %s", got)
	}
	c := redis.NewClient(&redis.Options{Addr: f.redis.Addr})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "fleet:run:noetl:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("run records %v %v", keys, err)
	}
	// Make it a claim without an execution id, made 11 s ago by Redis'
	// clock, that lives on (the run's timeout and the dedup window).
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.HDel(t.Context(), keys[0], "id", "state").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(t.Context(), keys[0], "claimed", now.Add(-11*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(t.Context(), keys[0], 2*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, got := post(t, f.url[1], call(2, "demo_slow", `{"label":"x"}`), alice); !succeeded(got) {
		t.Fatalf("the call after the stale claim: %s", got)
	}
	if d := time.Since(start); d >= 10*time.Second {
		t.Errorf("the call waited %s for a claim older than 10 s", d.Round(time.Millisecond))
	}
	if id, _ := c.HGet(t.Context(), keys[0], "id").Result(); id == "" {
		t.Error("the stale claim was not taken over: the new run has no record, so no dedup")
	}
}
