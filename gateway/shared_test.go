package gateway

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/redistest"
	"github.com/mcpgate/mcpgate/gateway/state"
)

// fleet is two replicas — two Gateways built from one config, sharing one
// real Redis — in front of one playbook engine.
type fleet struct {
	redis *redistest.Server
	e     *engine.Engine
	g     [2]*Gateway
	url   [2]string // each replica's /mcp
}

func newFleet(t *testing.T, eopts *engine.Options, pb Playbooks, set ...func(*Config)) *fleet {
	t.Helper()
	f := &fleet{redis: redistest.Start(t), e: engine.New(eopts)}
	cfg := &Config{
		Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: f.e.Handler(), Playbooks: &pb}},
		State:     StateConfig{Backend: "redis", Redis: RedisConfig{URL: f.redis.URL(), KeyPrefix: "fleet:"}},
		Tasks:     fleetTaskKey(t),
	}
	for _, s := range set {
		s(cfg)
	}
	for i := range f.g {
		g, err := New(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		f.g[i], f.url[i] = g, srv.URL+"/mcp"
	}
	return f
}

var alice = http.Header{"Authorization": {"Bearer alice"}}

// TestFleetResendAttaches: a call re-sent to another replica while its run
// goes on follows that run (one execute at the engine) and gets its result;
// the first replica's client hung up, and its linger counts the re-send on
// the other replica, so the run is not cancelled.
func TestFleetResendAttaches(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: 500 * time.Millisecond}, Playbooks{PollInterval: 100 * time.Millisecond})
	conn := rawPOST(t, f.url[0], call(1, "demo_slow", `{"label":"x"}`), alice, false)
	waitFor(t, "the run to start on replica A", func() bool { return f.e.Counts().Started == 1 })
	conn.Close() // A's client goes: the run lingers 2s, then is cancelled unless a re-send waits

	_, got := post(t, f.url[1], call(1, "demo_slow", `{"label":"x"}`), alice)
	if !succeeded(got) {
		t.Errorf("the re-send on replica B: %s", got)
	}
	if c := f.e.Counts(); c.Started != 1 || c.Cancelled != 0 {
		t.Errorf("engine saw %+v; want one run, not cancelled (the re-send on B kept it past A's linger)", c)
	}
	// Within the dedup window, a succeeded run's result goes to a re-send
	// on either replica without a new run.
	for i := range f.url {
		if _, got := post(t, f.url[i], call(2, "demo_slow", `{"label":"x"}`), alice); !succeeded(got) {
			t.Errorf("re-send %d after success: %s", i, got)
		}
	}
	if c := f.e.Counts(); c.Started != 1 {
		t.Errorf("engine started %d runs, want 1", c.Started)
	}
	// Another caller's same call is a run of its own.
	bob := rawPOST(t, f.url[1], call(3, "demo_slow", `{"label":"x"}`), http.Header{"Authorization": {"Bearer bob"}}, false)
	defer bob.Close()
	waitFor(t, "bob's own run (bob's call is not alice's)", func() bool { return f.e.Counts().Started == 2 })
}

// TestFleetCancel: notifications/cancelled sent to replica B cancels the
// call replica A holds, and A's run is cancelled upstream at once; another
// caller's cancellation cancels nothing.
func TestFleetCancel(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{PollInterval: 100 * time.Millisecond})
	conn := rawPOST(t, f.url[0], call(41, "demo_slow", `{"label":"x"}`), alice, false)
	defer conn.Close()
	waitFor(t, "the run to start on A", func() bool { return f.e.Counts().Started == 1 })

	sendCancel(t, f.url[1], "Bearer bob", "41")
	sendCancel(t, f.url[1], "Bearer alice", "41")
	waitFor(t, "the engine to see the cancel", func() bool { return f.e.Counts().Cancelled == 1 })
	got := readAnswer(t, conn)
	// Either the call saw its cancellation first, or the run's own end
	// (cancelled upstream) raced it: both say the run is cancelled.
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "the gateway cancels the run upstream") && !strings.Contains(got, "it was cancelled upstream") {
		t.Errorf("A's cancelled call: %s", got)
	}
}

// TestFleetFollowerCancels: a follower on B that is the last request
// waiting anywhere, cancelled by its client, cancels the run A drives.
func TestFleetFollowerCancels(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{PollInterval: 100 * time.Millisecond})
	a := rawPOST(t, f.url[0], call(7, "demo_slow", `{"label":"y"}`), alice, false)
	waitFor(t, "the run to start on A", func() bool { return f.e.Counts().Started == 1 })
	b := rawPOST(t, f.url[1], call(8, "demo_slow", `{"label":"y"}`), alice, false)
	defer b.Close()
	waitFor(t, "B to follow the run", func() bool { return f.g[1].shared.Errors("join") == 0 && waiters(t, f) == 2 })
	a.Close() // A's client goes: B still waits, so A's linger must not cancel
	waitFor(t, "A to count its client out", func() bool { return waiters(t, f) == 1 })
	sendCancel(t, f.url[1], "Bearer alice", "8")
	waitFor(t, "the engine to see the cancel", func() bool { return f.e.Counts().Cancelled == 1 })
	if got := readAnswer(t, b); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "cancel") {
		t.Errorf("B's cancelled call: %s", got)
	}
	if c := f.e.Counts(); c.Started != 1 {
		t.Errorf("engine started %d runs, want 1", c.Started)
	}
}

// waiters reads the fleet's waiter count of the one run in Redis.
func waiters(t *testing.T, f *fleet) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: f.redis.Addr})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "fleet:run:noetl:*").Result()
	if err != nil || len(keys) != 1 {
		return -1
	}
	n, _ := c.HGet(t.Context(), keys[0], "waiters").Int64()
	return n
}

// TestFleetRunCaps: max_runs counts the runs of every replica.
func TestFleetRunCaps(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{MaxRuns: 1, Timeout: time.Minute})
	conn := rawPOST(t, f.url[0], call(1, "demo_slow", `{"label":"first"}`), alice, false)
	defer conn.Close()
	waitFor(t, "the first run to start", func() bool { return f.e.Counts().Started == 1 })
	_, got := post(t, f.url[1], call(2, "demo_fast", `{}`), http.Header{"Authorization": {"Bearer bob"}})
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "the gateway's replicas already have 1 runs in flight on this engine (max_runs is 1)") {
		t.Errorf("B over the fleet's cap: %s", got)
	}
	if c := f.e.Counts(); c.Started != 1 {
		t.Errorf("the engine started %d runs, want 1", c.Started)
	}
}

// TestFleetRedisOutage: with Redis killed, calls on both replicas still
// work (each alone) and mcpgate_state_errors_total counts the failures.
func TestFleetRedisOutage(t *testing.T) {
	f := newFleet(t, &engine.Options{Step: 10 * time.Millisecond}, Playbooks{PollInterval: 100 * time.Millisecond})
	f.redis.Kill()
	for i := range f.url {
		if _, got := post(t, f.url[i], call(1, "demo_fast", `{"name":"Ada"}`), alice); !strings.Contains(got, "Hello, Ada!") || !succeeded(got) {
			t.Errorf("replica %d without Redis: %s", i, got)
		}
	}
	if n := stateErrors(t, f.g[0]); n == 0 {
		t.Error("mcpgate_state_errors_total did not count the outage")
	}
}

// TestRedisDownAtStart: a gateway whose Redis does not answer at start-up
// serves (alone), and counts the failure.
func TestRedisDownAtStart(t *testing.T) {
	e := engine.New(nil)
	cfg := &Config{
		Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}},
		State:     StateConfig{Backend: "redis", Redis: RedisConfig{URL: "redis://127.0.0.1:1/0", Timeout: 100 * time.Millisecond}},
		Tasks:     fleetTaskKey(t),
	}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("New with a Redis that does not answer: %v", err)
	}
	defer g.Close()
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	if _, got := post(t, srv.URL+"/mcp", call(1, "demo_fast", `{"name":"Ada"}`), alice); !strings.Contains(got, "Hello, Ada!") || !succeeded(got) {
		t.Errorf("a call without Redis: %s", got)
	}
	if n := stateErrors(t, g); n == 0 {
		t.Error("mcpgate_state_errors_total did not count the start-up failure")
	}
}

func stateErrors(t *testing.T, g *Gateway) float64 {
	t.Helper()
	mfs, err := g.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "mcpgate_state_errors_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// succeeded reports whether a tools/call answer is a result that is not an
// error (a success leaves isError out).
func succeeded(answer string) bool {
	return strings.Contains(answer, `"result":{`) && !strings.Contains(answer, `"isError":true`)
}

// TestFleetSessionCap: max_sessions_per_caller counts a caller's stateful
// sessions on every replica, and a session closed on one frees its slot.
func TestFleetSessionCap(t *testing.T) {
	srv := redistest.Start(t)
	e := engine.New(nil)
	cfg := &Config{
		Stateful: true, MaxSessionsPerCaller: 1,
		Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}},
		State:     StateConfig{Backend: "redis", Redis: RedisConfig{URL: srv.URL()}},
		Tasks:     fleetTaskKey(t),
	}
	var urls [2]string
	for i := range urls {
		g, err := New(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		hs := httptest.NewServer(g.Handler())
		t.Cleanup(hs.Close)
		urls[i] = hs.URL + "/mcp"
	}
	resp, _ := post(t, urls[0], initialize, alice)
	id := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("alice's first session on A: HTTP %d", resp.StatusCode)
	}
	resp, got := post(t, urls[1], initialize, alice)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(got, "max_sessions_per_caller") {
		t.Errorf("alice's second session, on B: HTTP %d %s; want 429 (her session on A counts)", resp.StatusCode, got)
	}
	if resp, _ := post(t, urls[1], initialize, http.Header{"Authorization": {"Bearer bob"}}); resp.StatusCode != http.StatusOK {
		t.Errorf("bob's session on B: HTTP %d", resp.StatusCode)
	}
	h := alice.Clone()
	h.Set(sessionIDHeader, id)
	if resp, _ := do(t, http.MethodDelete, urls[0], nil, h); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE alice's session: HTTP %d", resp.StatusCode)
	}
	waitFor(t, "B to grant alice a session once A's is closed", func() bool {
		resp, _ := post(t, urls[1], initialize, alice)
		return resp.StatusCode == http.StatusOK
	})
}

// TestFleetSessionIdle: a session go-sdk closes for idleness frees its
// fleet slot by the sweep, without a new session on its own replica.
func TestFleetSessionIdle(t *testing.T) {
	sessionSweepEvery = 50 * time.Millisecond
	t.Cleanup(func() { sessionSweepEvery = state.LeaseTTL / 3 })
	srv := redistest.Start(t)
	e := engine.New(nil)
	var urls [2]string
	for i, timeout := range []time.Duration{300 * time.Millisecond, time.Hour} {
		cfg := &Config{
			Stateful: true, MaxSessionsPerCaller: 1, SessionTimeout: timeout,
			Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}},
			State:     StateConfig{Backend: "redis", Redis: RedisConfig{URL: srv.URL()}},
			Tasks:     fleetTaskKey(t),
		}
		g, err := New(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		hs := httptest.NewServer(g.Handler())
		t.Cleanup(hs.Close)
		urls[i] = hs.URL + "/mcp"
	}
	if resp, _ := post(t, urls[0], initialize, alice); resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's session on A: HTTP %d", resp.StatusCode)
	}
	if resp, _ := post(t, urls[1], initialize, alice); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("alice's second session, on B, while A's lives: HTTP %d, want 429", resp.StatusCode)
	}
	waitFor(t, "B to grant alice a session once A's has idled out", func() bool {
		resp, _ := post(t, urls[1], initialize, alice)
		return resp.StatusCode == http.StatusOK
	})
}

// TestFleetTaskRecords: a task made on replica A is recorded, so that B's
// store lists it for its caller (and not for another); its cancellation on
// B is recorded too.
func TestFleetTaskRecords(t *testing.T) {
	t.Setenv("MCPGATE_TEST_TASK_KEY", strings.Repeat("k", 32))
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{PollInterval: 100 * time.Millisecond, Timeout: time.Minute},
		func(c *Config) { c.Tasks = TasksConfig{KeyEnv: "MCPGATE_TEST_TASK_KEY"} })
	a := &taskEnv{g: f.g[0], e: f.e, url: f.url[0]}
	b := &taskEnv{g: f.g[1], e: f.e, url: f.url[1]}
	id, _ := a.create(t, "Bearer alice", "demo_slow", `{"label":"t"}`)
	d := f.g[1].callers.Digest(caller.Of(nil, alice))
	who := hex.EncodeToString(d[:])
	list, err := f.g[1].TaskRecords().List(t.Context(), who, 0)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Status != "working" || list[0].Tool != "demo_slow" {
		t.Fatalf("alice's tasks on B: %+v, %v", list, err)
	}
	if strings.Contains(fmt.Sprint(list), "alice") {
		t.Errorf("a task record holds the caller's credential: %+v", list)
	}
	d = f.g[1].callers.Digest(caller.Of(nil, http.Header{"Authorization": {"Bearer bob"}}))
	if list, _ := f.g[1].TaskRecords().List(t.Context(), hex.EncodeToString(d[:]), 0); len(list) != 0 {
		t.Errorf("bob's tasks list alice's: %+v", list)
	}
	if task := b.must(t, "Bearer alice", "tasks/cancel", taskIDParams(id)); task["status"] != "cancelled" {
		t.Fatalf("tasks/cancel on B: %v", task)
	}
	if rec, err := f.g[0].TaskRecords().Get(t.Context(), who, id); err != nil || rec.Status != "cancelled" {
		t.Errorf("the record after tasks/cancel on B: %+v, %v", rec, err)
	}
}

// BenchmarkToolsCallState measures one stateless REST tools/call through the
// fast path with state: memory and state: redis (a real redis-server),
// interleaved call by call so that the load of a shared machine falls on
// both alike: the call's path is the same, so the two must cost alike
// (docs/state.md). It reports each backend's ns per call and their ratio
// (memory/redis: a throughput ratio, target ≥ 0.95).
//
//	go test ./gateway -run '^$' -bench ToolsCallState -benchmem -count 6
func BenchmarkToolsCallState(b *testing.B) {
	srv := redistest.Start(b)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"}}`)
	})
	body := rpc("7", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`)
	var hs [2]http.Handler
	for i, backend := range []string{"memory", "redis"} {
		cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: api}}}
		if backend == "redis" {
			cfg.State = StateConfig{Backend: "redis", Redis: RedisConfig{URL: srv.URL()}}
			cfg.Tasks = fleetTaskKey(b)
		}
		g, err := New(b.Context(), cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = g.Close() })
		hs[i] = g.Handler()
	}
	var spent [2]time.Duration
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for j := range hs {
			i := (j + n) % 2 // each goes first every other time: no order bias
			start := time.Now()
			serveOnce(b, hs[i], body)
			spent[i] += time.Since(start)
		}
		n++
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "memory-ns/call")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "redis-ns/call")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "redis/memory-throughput")
}

func TestPublishLimit(t *testing.T) {
	var l publishLimit
	now := time.Unix(1000, 0)
	n := 0
	for range maxCancelPublishes + 10 {
		if l.allow(now) {
			n++
		}
	}
	if n != maxCancelPublishes {
		t.Errorf("%d publishes allowed in one second, want %d", n, maxCancelPublishes)
	}
	if !l.allow(now.Add(time.Second)) {
		t.Error("the next second allowed none")
	}
}
