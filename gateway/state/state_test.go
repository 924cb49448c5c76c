package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/gateway/internal/redistest"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

func openRedis(t *testing.T) (*Redis, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	s, err := Open(t.Context(), Options{URL: srv.URL(), KeyPrefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, srv
}

// TestOpen: a URL that does not parse is an error; a Redis that does not
// answer at start-up is an outage (counted, operations fail fast), not an
// error, so that a replica serves alone rather than crash-loops.
func TestOpen(t *testing.T) {
	if _, err := Open(t.Context(), Options{URL: "http://x"}); err == nil || !strings.HasPrefix(err.Error(), "state.redis.url: ") {
		t.Errorf("Open(http://x): %v, want an error naming state.redis.url", err)
	}
	s, err := Open(t.Context(), Options{URL: "redis://127.0.0.1:1/0", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open of a Redis that does not answer: %v", err)
	}
	defer s.Close()
	if s.Errors("connect") != 1 {
		t.Errorf("connect failures counted: %d, want 1", s.Errors("connect"))
	}
	if _, err := s.Engine("e").Record(t.Context(), "k"); err == nil {
		t.Error("an operation against no Redis reported no error")
	}
}

// TestTasks: the memory and Redis stores keep, list and expire task records
// alike, keep callers apart, and refuse a record that names no one.
func TestTasks(t *testing.T) {
	r, _ := openRedis(t)
	for _, tt := range []struct {
		name  string
		store Tasks
	}{{"memory", NewMemoryTasks()}, {"redis", r.Tasks()}} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			put := func(id, caller string, created time.Time, ttl time.Duration, status string) {
				t.Helper()
				if err := tt.store.Put(ctx, TaskRecord{ID: id, Caller: caller, Tool: "demo_slow", Status: status, Created: created, Updated: created, TTL: ttl}); err != nil {
					t.Fatal(err)
				}
			}
			put("a1", "alice", now.Add(-2*time.Second), time.Hour, "working")
			put("a2", "alice", now.Add(-time.Second), time.Hour, "working")
			put("b1", "bob", now, time.Hour, "working")
			put("old", "alice", now.Add(-time.Hour), time.Millisecond, "completed") // already expired
			put("a1", "alice", now.Add(-2*time.Second), time.Hour, "completed")     // a change of status
			list, err := tt.store.List(ctx, "alice", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(list); got != "a2 a1" {
				t.Errorf("alice's tasks: %s, want a2 a1 (newest first, expired left out)", got)
			}
			if list[1].Status != "completed" {
				t.Errorf("a1's status %q, want the last put's", list[1].Status)
			}
			if list, _ := tt.store.List(ctx, "alice", 1); ids(list) != "a2" {
				t.Errorf("limit 1: %s", ids(list))
			}
			if got, err := tt.store.Get(ctx, "bob", "b1"); err != nil || got.Caller != "bob" || !got.Created.Equal(now) {
				t.Errorf("Get(b1): %+v, %v", got, err)
			}
			if _, err := tt.store.Get(ctx, "alice", "old"); !errors.Is(err, ErrNoTask) {
				t.Errorf("Get(expired): %v, want ErrNoTask", err)
			}
			if err := tt.store.Put(ctx, TaskRecord{ID: "b1", Caller: "mallory", TTL: time.Hour, Created: now}); err == nil {
				t.Error("a caller overwrote another caller's task record")
			}
			if err := tt.store.Put(ctx, TaskRecord{ID: "x", TTL: time.Hour}); err == nil {
				t.Error("a record without a caller was kept")
			}
		})
	}
}

func ids(ts []TaskRecord) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += " "
		}
		s += t.ID
	}
	return s
}

// TestLeases: run slots count every holder of the store, refuse at each
// bound with the count, and are given back by release and by Close.
func TestLeases(t *testing.T) {
	a, srv := openRedis(t)
	b, err := Open(t.Context(), Options{URL: srv.URL(), KeyPrefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	ea, eb := a.Engine("noetl"), b.Engine("noetl")
	ctx := t.Context()
	admit := func(e playbook.Shared, caller string) (func(), string) {
		t.Helper()
		rel, refused, n, err := e.Admit(ctx, caller, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		return rel, fmt.Sprintf("%d/%d", refused, n)
	}
	r1, _ := admit(ea, "alice")
	_, _ = admit(eb, "alice")
	if _, got := admit(eb, "alice"); got != "2/2" {
		t.Errorf("alice's third run across two replicas: %s, want refused by the per-caller bound at 2", got)
	}
	_, _ = admit(ea, "bob")
	if _, got := admit(ea, "carol"); got != "1/3" {
		t.Errorf("a fourth run: %s, want refused by max_runs at 3", got)
	}
	// Renewing pushes every held lease's expiry out, in one pipeline, even
	// when the server has dropped its cached scripts (a restart).
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	before, _ := c.ZRangeWithScores(ctx, "t:runs:noetl", 0, -1).Result()
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	a.renew()
	after, _ := c.ZRangeWithScores(ctx, "t:runs:noetl", 0, -1).Result()
	if a.Errors("renew") != 0 || len(after) != 3 || len(before) != 3 {
		t.Fatalf("renew: %d errors; leases %v → %v", a.Errors("renew"), before, after)
	}
	for i := range after {
		if m := after[i].Member.(string); strings.HasPrefix(m, a.Replica()) && after[i].Score < before[i].Score {
			t.Errorf("lease %s was not renewed: %v → %v", m, before[i].Score, after[i].Score)
		}
	}
	r1()
	r1() // once
	if _, got := admit(ea, "carol"); got != "0/0" {
		t.Errorf("after a release: %s, want admitted", got)
	}
	_ = b.Close() // a replica that stops gives its slots back
	if _, got := admit(ea, "alice"); got != "0/0" {
		t.Errorf("after the other replica closed: %s, want admitted", got)
	}
}

// TestRunRecords: claim, follow and count waiters.
func TestRunRecords(t *testing.T) {
	a, _ := openRedis(t)
	e := a.Engine("noetl")
	ctx := t.Context()
	begun := time.Now().Truncate(time.Millisecond)
	if ok, err := e.Claim(ctx, "k", playbook.RunRecord{Path: "demo/slow", Begun: begun}, time.Minute); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, _ := e.Claim(ctx, "k", playbook.RunRecord{Path: "demo/slow", Begun: begun}, time.Minute); ok {
		t.Fatal("a second claim of one key was granted")
	}
	if err := e.Update(ctx, "k", playbook.RunRecord{ExecutionID: "42", Path: "demo/slow", Begun: begun}, time.Minute); err != nil {
		t.Fatal(err)
	}
	rec, err := e.Record(ctx, "k")
	if err != nil || rec == nil || rec.ExecutionID != "42" || !rec.Begun.Equal(begun) || rec.Waiters != 1 {
		t.Fatalf("record %+v, %v", rec, err)
	}
	for _, step := range []struct {
		f    func(context.Context, string) (int64, error)
		want int64
	}{{e.Join, 2}, {e.Leave, 1}, {e.Waiters, 1}, {e.Leave, 0}} {
		if n, err := step.f(ctx, "k"); n != step.want || err != nil {
			t.Errorf("count %d, %v; want %d", n, err, step.want)
		}
	}
	if err := e.Drop(ctx, "k", ""); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.Join(ctx, "k"); n != 0 {
		t.Errorf("joining a dropped run counted %d", n)
	}
	if rec, err := e.Record(ctx, "k"); rec != nil || err != nil {
		t.Errorf("dropped record: %+v, %v", rec, err)
	}
}

// TestOutage: with Redis gone, operations fail fast with an error the
// caller can go alone on, each counted by op.
func TestOutage(t *testing.T) {
	srv := redistest.Start(t)
	var logs syncBuffer
	a, err := Open(t.Context(), Options{URL: srv.URL(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	e := a.Engine("noetl")
	srv.Kill()
	start := time.Now()
	var errs int
	for range 50 {
		if _, err := e.Record(t.Context(), "k"); err != nil {
			errs++
		}
	}
	if errs != 50 || a.Errors("record") != 50 {
		t.Errorf("%d errors, %d counted; want 50", errs, a.Errors("record"))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("50 operations against a dead Redis took %v: the store should be taken as down after the first", d)
	}
	if _, _, _, err := e.Admit(t.Context(), "alice", 1, 1); err == nil {
		t.Error("Admit against a dead Redis reported no error")
	}
	if n := strings.Count(logs.String(), "shared state: redis failed"); n != 1 {
		t.Errorf("%d warning lines for 51 failures within %s, want 1:\n%s", n, WarnEvery, logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMemoryTasksSweep: records of callers that never come back are dropped
// once their ttl has passed, by the sweep every sweepEvery puts.
func TestMemoryTasksSweep(t *testing.T) {
	m := NewMemoryTasks()
	now := time.Now()
	m.now = func() time.Time { return now }
	for i := range sweepEvery - 1 {
		_ = m.Put(t.Context(), TaskRecord{ID: fmt.Sprint(i), Caller: fmt.Sprint("c", i), Created: now, TTL: time.Minute})
	}
	now = now.Add(time.Hour)
	_ = m.Put(t.Context(), TaskRecord{ID: "last", Caller: "z", Created: now, TTL: time.Minute})
	if len(m.byID) != 1 || len(m.byCaller) != 1 {
		t.Errorf("after the sweep: %d records of %d callers, want 1 of 1", len(m.byID), len(m.byCaller))
	}
}
