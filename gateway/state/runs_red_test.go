package state

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// TestClaimLostAfterTakeover: a replica whose claim was taken over (it
// stalled past playbook.StaleClaimAfter before recording its run's id) can
// no longer write the record: its late Update and Drop are refused with
// playbook.ErrClaimLost, and the record keeps the run of the replica that
// took over (red-team finding 4 of issue 24).
func TestClaimLostAfterTakeover(t *testing.T) {
	s, srv := openRedis(t)
	e := s.Engine("noetl")
	ctx := t.Context()
	begun := time.Now().Truncate(time.Millisecond)
	a := playbook.RunRecord{Path: "demo/slow", Begun: begun, Claim: "claim-a"}
	if ok, err := e.Claim(ctx, "k", a, time.Minute); !ok || err != nil {
		t.Fatalf("A's claim: %v, %v", ok, err)
	}
	// A stalls: its claim ages past StaleClaimAfter by Redis' clock.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	old := time.Now().Add(-playbook.StaleClaimAfter - time.Second).UnixMilli()
	if err := c.HSet(ctx, "t:run:noetl:k", "claimed", strconv.FormatInt(old, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	b := playbook.RunRecord{Path: "demo/slow", Begun: begun, Claim: "claim-b"}
	if ok, err := e.Claim(ctx, "k", b, time.Minute); !ok || err != nil {
		t.Fatalf("B's takeover of the stale claim: %v, %v", ok, err)
	}
	b.ExecutionID = "run-b"
	if err := e.Update(ctx, "k", b, time.Minute); err != nil {
		t.Fatalf("B's update: %v", err)
	}
	a.ExecutionID = "run-a"
	if err := e.Update(ctx, "k", a, time.Minute); !errors.Is(err, playbook.ErrClaimLost) {
		t.Errorf("A's late update: %v, want ErrClaimLost", err)
	}
	if err := e.Drop(ctx, "k", a.Claim); !errors.Is(err, playbook.ErrClaimLost) {
		t.Errorf("A's late drop: %v, want ErrClaimLost", err)
	}
	if rec, err := e.Record(ctx, "k"); err != nil || rec == nil || rec.ExecutionID != "run-b" {
		t.Fatalf("the record after A's late writes: %+v, %v; want B's run", rec, err)
	}
	if s.Errors("update") != 0 || s.Errors("drop") != 0 {
		t.Errorf("a refused write counted as a store failure: update %d, drop %d", s.Errors("update"), s.Errors("drop"))
	}
	// The holder of the claim still drops it; "" drops any record.
	if err := e.Drop(ctx, "k", b.Claim); err != nil {
		t.Errorf("B's drop: %v", err)
	}
	if rec, _ := e.Record(ctx, "k"); rec != nil {
		t.Errorf("after B's drop: %+v", rec)
	}
}
