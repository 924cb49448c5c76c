package playbook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

func TestExecutionID(t *testing.T) {
	for _, tt := range []struct {
		raw, id, err string
	}{
		{`619162855312458001`, "619162855312458001", ""},
		{`9007199254740993`, "9007199254740993", ""}, // 2^53+1: a float64 reads 2^53
		{`-42`, "-42", ""},
		{`0`, "0", ""},
		{` 7 `, "7", ""},
		{`"abc"`, "abc", ""},
		{`"a/b"`, "a/b", ""},
		{`"\u00e9\ud83d\ude80"`, "é🚀", ""},
		{`"619162855312458001"`, "619162855312458001", ""},
		{`1.5`, "", "1.5 is a number but not an integer"},
		{`1e3`, "", "1e3 is a number but not an integer"},
		{`1.0`, "", "not an integer"},
		{`-0.0`, "", "not an integer"},
		{`01`, "", "not an integer"},
		{`""`, "", "an empty string"},
		{`true`, "", "is a boolean (true)"},
		{`{"id":1}`, "", `is an object ({"id":1})`},
		{`[1]`, "", "is an array"},
		{`null`, "", "is null"},
		{``, "", "is empty"},
		// A decoder repairs these to U+FFFD: two runs' ids would read alike.
		{`"run-\ud800"`, "", `"run-\ud800" is not valid Unicode`},
		{`"run-\udbff"`, "", "is not valid Unicode"},
		{"\"run-\xff\"", "", "is not valid Unicode"},
		{`"` + strings.Repeat("a", MaxExecutionIDLen) + `"`, strings.Repeat("a", MaxExecutionIDLen), ""},
		{`"` + strings.Repeat("a", MaxExecutionIDLen+1) + `"`, "", "is 257 bytes long, over the 256"},
		{strings.Repeat("9", MaxExecutionIDLen+1), "", "a number of 257 digits, over the 256"},
	} {
		id, err := ExecutionID(json.RawMessage(tt.raw))
		if id != tt.id || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ExecutionID(%s) = %q, %v; want %q, %q", tt.raw, id, err, tt.id, tt.err)
		}
	}
}

// idEngine answers execute with a fixed execution_id literal and records the
// status and cancel requests; a run never finishes, so the runner polls it
// until the ceiling and then cancels it.
type idEngine struct {
	literal string

	mu       sync.Mutex
	statuses []string // escaped paths
	cancels  []string
}

func (e *idEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case r.Method == "POST" && p == "/api/execute":
		fmt.Fprintf(w, `{"execution_id": %s}`, e.literal)
	case r.Method == "GET" && strings.HasSuffix(p, "/status"):
		e.statuses = append(e.statuses, p)
		fmt.Fprint(w, `{"completed": false, "failed": false}`)
	case r.Method == "POST" && strings.HasSuffix(p, "/cancel"):
		e.cancels = append(e.cancels, p)
		fmt.Fprint(w, `{}`)
	default:
		http.NotFound(w, r)
	}
}

var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// checkIDRun runs a playbook against an engine that answers literal as its
// execution id, and checks, without the runner's own code, that every status
// and cancel request names exactly that id in one path segment — or, when
// the id is not a string or an integer, or would make a dot segment, that
// nothing but execute was sent and the result says why.
func checkIDRun(t *testing.T, literal string) {
	synctest.Test(t, func(t *testing.T) {
		e := &idEngine{literal: literal}
		r := newRunner(t, e, Options{PollInterval: time.Second, Timeout: 2500 * time.Millisecond})
		out := r.Run(t.Context(), Request{Tool: "t", Path: "p"})

		// The oracle: what the id is, read independently of ExecutionID.
		// A string that a decoder had to repair (U+FFFD for a lone surrogate
		// or a bad byte) is not the engine's id, so it must be refused.
		var want string
		valid := false
		if s := strings.TrimSpace(literal); integerLiteral.MatchString(s) {
			want, valid = s, true
		} else if json.Unmarshal([]byte(literal), &want) == nil && want != "" {
			valid = utf8.ValidString(literal) && !strings.ContainsRune(want, utf8.RuneError)
		}
		valid = valid && len(want) <= MaxExecutionIDLen
		dots := false
		for _, part := range strings.FieldsFunc(want, func(r rune) bool { return r == '/' || r == '\\' }) {
			dots = dots || part == "." || part == ".."
		}
		dots = dots || want == "." || want == ".."

		e.mu.Lock()
		defer e.mu.Unlock()
		if !valid || dots {
			if len(e.statuses)+len(e.cancels) > 0 {
				t.Fatalf("id %s: sent %v %v", literal, e.statuses, e.cancels)
			}
			// Failed: the engine started something the gateway cannot
			// name; NotStarted: it gave no id at all (null).
			if out.State != Failed && out.State != NotStarted || !out.Result.IsError || !strings.Contains(text(out.Result), "execution_id") {
				t.Fatalf("id %s: %s %q", literal, out.State, text(out.Result))
			}
			return
		}
		if out.State != TimedOut || out.ExecutionID != want || out.Result.Meta[MetaExecutionID] != want {
			t.Fatalf("id %s: %s, id %q, _meta %v: %s", literal, out.State, out.ExecutionID, out.Result.Meta, text(out.Result))
		}
		if len(e.statuses) != 3 || len(e.cancels) != 1 {
			t.Fatalf("id %s: %d polls, %d cancels", literal, len(e.statuses), len(e.cancels))
		}
		for _, p := range append(e.statuses, e.cancels...) {
			seg, ok := strings.CutPrefix(p, "/api/executions/")
			if ok {
				seg, ok = strings.CutSuffix(seg, "/status")
				if !ok {
					seg, ok = strings.CutSuffix(p[len("/api/executions/"):], "/cancel")
				}
			}
			got, err := url.PathUnescape(seg)
			if !ok || strings.Contains(seg, "/") || err != nil || got != want {
				t.Fatalf("id %s: request %s names %q, want %q", literal, p, got, want)
			}
		}
	})
}

func TestExecutionIDsSentBack(t *testing.T) {
	for _, lit := range []string{
		`619162855312458001`, `9007199254740993`, `-9223372036854775808`, `18446744073709551616`, `0`,
		`"abc"`, `"a/b"`, `"%2F"`, `"a%2Fb"`, `"x y?#"`, `"é"`,
		`"."`, `".."`, `"../x"`, `"a/.."`, `"..\\x"`, `"%2e%2e"`,
		`1.5`, `1e3`, `true`, `{}`, `null`, `""`,
	} {
		t.Run(lit, func(t *testing.T) { checkIDRun(t, lit) })
	}
}

func FuzzExecutionIDsSentBack(f *testing.F) {
	for _, s := range []string{`619162855312458001`, `-1`, `1e3`, `"a/b"`, `"%2F.."`, `".."`, `"."`, `"\u002e\u002e"`, `9007199254740993.0`, `"run-\ud800"`, "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, literal string) {
		if !json.Valid([]byte(literal)) {
			t.Skip()
		}
		checkIDRun(t, literal)
	})
}

// TestNumericIDsEndToEnd runs, cancels and answers runs of an engine whose
// ids are integers above 2^53: each run is polled and cancelled under its
// own id (the engine answers 404 to any other).
func TestNumericIDsEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{NumericIDs: true, Step: time.Second})
		r := newRunner(t, e.Handler(), Options{Timeout: 3 * time.Second})
		first := r.Run(t.Context(), Request{Tool: "t", Path: "demo/slow"})
		if first.State != TimedOut || first.ExecutionID != "619162855312458001" || !strings.Contains(text(first.Result), "it was cancelled upstream") {
			t.Fatalf("%s %s: %s", first.State, first.ExecutionID, text(first.Result))
		}
		fast := r.Run(t.Context(), Request{Tool: "t", Path: "demo/fast"})
		if fast.State != Succeeded || fast.ExecutionID != "619162855312458002" {
			t.Fatalf("%s %s: %s", fast.State, fast.ExecutionID, text(fast.Result))
		}
		// The status is shown with the engine's own number, not a float.
		if sc, _ := json.Marshal(fast.Result.StructuredContent); !strings.Contains(string(sc), `"execution_id":619162855312458002`) {
			t.Errorf("structuredContent %s", sc)
		}
		if c := e.Counts(); c.Started != 2 || c.Cancelled != 1 {
			t.Errorf("engine %+v", c)
		}
	})
}

// TestRunCaps: runs over Options.MaxRuns or MaxRunsPerCaller are refused
// before anything reaches the engine; a re-send that joins a run going on
// starts none and is not refused; task runs (Start) count; the room comes
// back when a run ends.
func TestRunCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Step: time.Hour})
		r := newRunner(t, e.Handler(), Options{MaxRuns: 3, MaxRunsPerCaller: 2})
		req := func(caller string, i int) Request {
			return Request{Tool: "t", Path: "demo/slow", Caller: caller, Workload: map[string]any{"label": fmt.Sprint(i)}}
		}
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		go r.Run(ctx, req("alice", 1))
		if id, _, out := r.Start(ctx, req("alice", 2)); id == "" {
			t.Fatalf("a task run: %s", text(out.Result))
		}
		synctest.Wait()
		out := r.Run(ctx, req("alice", 3))
		if out.State != Busy || out.Cap != "max_runs_per_caller" || out.Limit != 2 || !out.Result.IsError ||
			!strings.Contains(text(out.Result), "this caller already has 2 runs in flight on this engine (max_runs_per_caller is 2); nothing was sent to the engine") {
			t.Fatalf("over the caller's cap: %s %s: %s", out.State, out.Cap, text(out.Result))
		}
		// Joining alice's first run starts nothing: not refused.
		joined := make(chan *Outcome, 1)
		jctx, jstop := context.WithCancel(t.Context())
		go func() { joined <- r.Run(jctx, req("alice", 1)) }()
		synctest.Wait()
		select {
		case o := <-joined:
			t.Fatalf("the re-send was answered: %s %s", o.State, text(o.Result))
		default:
		}
		go r.Run(ctx, req("bob", 1))
		synctest.Wait()
		if out := r.Run(ctx, req("carol", 1)); out.State != Busy || out.Cap != "max_runs" ||
			!strings.Contains(text(out.Result), "the gateway already has 3 runs in flight on this engine (max_runs is 3)") {
			t.Fatalf("over the engine's cap: %s %s: %s", out.State, out.Cap, text(out.Result))
		}
		if _, _, out := r.Start(ctx, req("carol", 2)); out == nil || out.State != Busy {
			t.Fatal("a task over the cap was started")
		}
		if c := e.Counts(); c.Started != 3 {
			t.Fatalf("engine started %d runs, want 3", c.Started)
		}
		// alice's first run ends (both of its waiters leave; the linger
		// passes and it is cancelled): carol's call fits.
		jstop()
		stop()
		synctest.Wait()
		time.Sleep(DefaultLinger)
		synctest.Wait()
		out = r.Run(t.Context(), Request{Tool: "t", Path: "demo/fast", Caller: "carol"})
		if out.State != Succeeded {
			t.Fatalf("after the runs ended: %s: %s", out.State, text(out.Result))
		}
		// The task run is still held (a task outlives its request) until
		// the ceiling: it counts for alice.
		r.mu.Lock()
		n := r.byCaller["alice"]
		r.mu.Unlock()
		if n != 1 {
			t.Errorf("alice has %d runs counted, want 1 (the task's)", n)
		}
		time.Sleep(DefaultTimeout) // the task's run reaches its ceiling
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.active != 0 || len(r.byCaller) != 0 {
			t.Errorf("after every run ended: %d active, by caller %v", r.active, r.byCaller)
		}
	})
}

// TestCancelPlannedOnlyForTheLast: a call that leaves a run another request
// or a task still holds is told the run goes on, not that it is cancelled,
// and its outcome plans no cancel; the last one out plans it.
func TestCancelPlannedOnlyForTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Step: time.Hour})
		r := newRunner(t, e.Handler(), Options{Timeout: time.Hour})
		req := Request{Tool: "t", Path: "demo/slow", Caller: "alice", Workload: map[string]any{"label": "x"}}
		if id, _, out := r.Start(t.Context(), req); id == "" {
			t.Fatalf("start: %s", text(out.Result))
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan *Outcome, 1)
		go func() { done <- r.Run(ctx, req) }()
		synctest.Wait()
		cancel(ErrCallCancelled)
		out := <-done
		if !out.Attached || out.CancelPlanned || !strings.Contains(text(out.Result), "the run goes on for another request or task that waits for it") {
			t.Errorf("leaving a run a task holds: attached=%v planned=%v %q", out.Attached, out.CancelPlanned, text(out.Result))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if c := e.Counts(); c.Cancelled != 0 {
			t.Errorf("the run the task holds was cancelled: %+v", c)
		}

		other := Request{Tool: "t", Path: "demo/slow", Caller: "bob"}
		ctx2, cancel2 := context.WithCancelCause(t.Context())
		go func() { done <- r.Run(ctx2, other) }()
		synctest.Wait()
		cancel2(ErrCallCancelled)
		if out := <-done; !out.CancelPlanned || !strings.Contains(text(out.Result), "the gateway cancels the run upstream") {
			t.Errorf("the last one out: planned=%v %q", out.CancelPlanned, text(out.Result))
		}
		time.Sleep(time.Hour) // the task's run reaches its ceiling
		synctest.Wait()
	})
}

// TestRunSlotsBalance: every way a run ends — a bad id, not started, timed
// out, succeeded — gives its slot back exactly once.
func TestRunSlotsBalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, lit := range []string{`"ok"`, `".."`, `1.5`, `null`, `{}`} {
			e := &idEngine{literal: lit}
			r := newRunner(t, e, Options{PollInterval: time.Second, Timeout: 2500 * time.Millisecond, MaxRunsPerCaller: 1})
			for range 3 {
				r.Run(t.Context(), Request{Tool: "t", Path: "p", Caller: "c"})
				synctest.Wait()
				r.mu.Lock()
				a, n := r.active, len(r.byCaller)
				r.mu.Unlock()
				if a != 0 || n != 0 {
					t.Fatalf("%s: %d runs counted, %d callers", lit, a, n)
				}
			}
		}
	})
}
