package playbook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/upstream"
)

var noetl = Routes{
	Execute: Route{"POST", "/api/execute"},
	Status:  Route{"GET", "/api/executions/{id}/status"},
	Cancel:  Route{"POST", "/api/executions/{id}/cancel"},
}

// newRunner serves e in-process (so that the whole run lives in a synctest
// bubble) behind a Runner with opts.
func newRunner(t *testing.T, h http.Handler, opts Options) *Runner {
	t.Helper()
	if opts.Routes.Execute.IsZero() {
		opts.Routes = noetl
	}
	r, err := New(upstream.NewInProcess(h, nil), &opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestRunOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		workload map[string]any
		opts     Options
		noCancel bool
		token    string

		state     State
		isError   bool
		text      []string // substrings
		elapsed   time.Duration
		polls     int
		cancelled int // runs the engine saw cancelled
	}{
		{name: "fast run answers at the first poll", path: "demo/fast", workload: map[string]any{"name": "Ada"},
			state: Succeeded, text: []string{"Hello, Ada!"}, elapsed: 0, polls: 1},
		{name: "slow run polls at the interval", path: "demo/slow",
			state: Succeeded, text: []string{"demo: counted 5 steps"}, elapsed: 6 * time.Second, polls: 5},
		{name: "failed run is an error result", path: "demo/fail",
			state: Failed, isError: true, text: []string{"playbook demo/fail failed", "step check failed: the demo fails on purpose"}, polls: 1},
		{name: "ceiling cancels upstream and says so", path: "demo/slow", opts: Options{Timeout: 4 * time.Second},
			state: TimedOut, isError: true, text: []string{"did not finish within 4s", "it was cancelled upstream"}, elapsed: 4 * time.Second, polls: 3, cancelled: 1},
		{name: "ceiling without a cancel route says the run may go on", path: "demo/slow", opts: Options{Timeout: 4 * time.Second}, noCancel: true,
			state: TimedOut, isError: true, text: []string{"did not finish within 4s", "no cancel route, so the run may go on"}, elapsed: 4 * time.Second, polls: 3},
		{name: "unknown playbook is not started", path: "nope",
			state: NotStarted, isError: true, text: []string{"could not be started", "HTTP 404", `no playbook \"nope\"`}},
		{name: "a refused credential is not started, with the status", path: "demo/fast", token: "wrong",
			state: NotStarted, isError: true, text: []string{"HTTP 401", "not authenticated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
				if tt.noCancel {
					tt.opts.Routes = noetl
					tt.opts.Routes.Cancel = Route{}
				}
				r := newRunner(t, e.Handler(), tt.opts)
				tok := "tok"
				if tt.token != "" {
					tok = tt.token
				}
				start := time.Now()
				out := r.Run(t.Context(), Request{Tool: "t", Path: tt.path, Workload: tt.workload, Cred: upstream.Credentials{BearerToken: tok}})
				if out.State != tt.state || out.Result.IsError != tt.isError {
					t.Fatalf("state %s, isError %v; want %s, %v (%s)", out.State, out.Result.IsError, tt.state, tt.isError, text(out.Result))
				}
				for _, s := range tt.text {
					if got, _ := json.Marshal(text(out.Result)); !strings.Contains(string(got), s) {
						t.Errorf("text %s lacks %q", got, s)
					}
				}
				if el := time.Since(start); el != tt.elapsed && tt.state != NotStarted && tt.state != Failed {
					t.Errorf("took %s, want %s", el, tt.elapsed)
				}
				if out.Polls != tt.polls {
					t.Errorf("polls = %d, want %d", out.Polls, tt.polls)
				}
				if c := e.Counts(); c.Cancelled != tt.cancelled {
					t.Errorf("engine saw %d cancels, want %d", c.Cancelled, tt.cancelled)
				}
				if tt.state != NotStarted {
					if out.ExecutionID == "" || out.Result.Meta[MetaExecutionID] != out.ExecutionID || out.Result.Meta[MetaPath] != tt.path {
						t.Errorf("execution id %q, _meta %v", out.ExecutionID, out.Result.Meta)
					}
				}
				if tt.token == "wrong" && out.HTTPStatus != 401 {
					t.Errorf("HTTPStatus = %d, want 401", out.HTTPStatus)
				}
			})
		})
	}
}

func TestProgressCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Step: time.Second})
		r := newRunner(t, e.Handler(), Options{})
		start := time.Now()
		var at []time.Duration
		var msgs []string
		out := r.Run(t.Context(), Request{Tool: "t", Path: "demo/slow", Progress: func(p Progress) {
			at = append(at, time.Since(start))
			frac := -1.0
			if p.Fraction != nil {
				frac = *p.Fraction
			}
			msgs = append(msgs, p.Message+"@"+jsonNum(frac))
			if p.Polls != len(at) {
				t.Errorf("poll %d reported as %d", len(at), p.Polls)
			}
		}})
		if out.State != Succeeded {
			t.Fatalf("state %s: %s", out.State, text(out.Result))
		}
		want := []time.Duration{0, 1500 * time.Millisecond, 3 * time.Second, 4500 * time.Millisecond, 6 * time.Second}
		if len(at) != len(want) {
			t.Fatalf("progress at %v, want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("progress %d at %s, want %s", i, at[i], want[i])
			}
		}
		if msgs[0] != "step 1 of 5@0" || msgs[2] != "step 4 of 5@0.6" || msgs[4] != "@1" {
			t.Errorf("messages %q", msgs)
		}
	})
}

// TestProgressBound: at the floor of the poll interval, a run's requests
// get at most one progress call per poll, 10 a second: never two within
// MinPollInterval, however many requests wait for the run.
func TestProgressBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Step: time.Millisecond})
		h := e.Handler()
		// Every status answers a new message, as a chatty engine would.
		slowStatus := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/status") {
				fmt.Fprintf(w, `{"completed":false,"failed":false,"message":"at %s"}`, time.Now())
				return
			}
			h.ServeHTTP(w, r)
		})
		r := newRunner(t, slowStatus, Options{PollInterval: MinPollInterval, Timeout: 3 * time.Second})
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				var last time.Time
				n := 0
				r.Run(t.Context(), Request{Tool: "t", Path: "demo/slow", Caller: "c", Progress: func(p Progress) {
					if now := time.Now(); n > 0 && now.Sub(last) < MinPollInterval {
						t.Errorf("request %d: progress %s after the last", i, now.Sub(last))
					}
					last = time.Now()
					n++
				}})
				if n < 25 || n > 31 {
					t.Errorf("request %d: %d progress calls in 3s, want 25 to 31", i, n)
				}
			})
		}
		wg.Wait()
	})
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

func TestTerminalPointer(t *testing.T) {
	// An engine that reports {"state": {"phase": "RUNNING"|"SUCCESS"|"ERROR"}}.
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		polls := map[string]int{}
		h := http.NewServeMux()
		h.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
			var b struct{ Path string }
			json.NewDecoder(r.Body).Decode(&b)
			json.NewEncoder(w).Encode(map[string]any{"execution_id": 42.0 + float64(len(b.Path))})
		})
		h.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			polls[r.PathValue("id")]++
			n := polls[r.PathValue("id")]
			mu.Unlock()
			phase := "RUNNING"
			if n >= 2 {
				phase = map[string]string{"45": "success", "46": "ERROR"}[r.PathValue("id")]
			}
			json.NewEncoder(w).Encode(map[string]any{"state": map[string]any{"phase": phase}, "output": "out " + phase})
		})
		opts := Options{Routes: Routes{Execute: Route{"POST", "/run"}, Status: Route{"GET", "/runs/{id}"}},
			Terminal: Terminal{Pointer: "/state/phase", Succeeded: []string{"SUCCESS"}, Failed: []string{"ERROR", "CANCELLED"}}}
		r := newRunner(t, h, opts)
		for _, tt := range []struct {
			path  string
			state State
			text  string
		}{{"abc", Succeeded, "out success"}, {"abcd", Failed, "out ERROR"}} {
			out := r.Run(t.Context(), Request{Tool: "t", Path: tt.path})
			if out.State != tt.state || out.ExecutionID != json.Number(jsonNum(42+float64(len(tt.path)))).String() || !strings.Contains(text(out.Result), tt.text) {
				t.Errorf("%s: %s %s %q", tt.path, out.State, out.ExecutionID, text(out.Result))
			}
		}
	})
}

func TestConfigErrors(t *testing.T) {
	c := upstream.NewInProcess(http.NotFoundHandler(), nil)
	for _, tt := range []struct {
		name string
		opts Options
		want string
	}{
		{"no execute", Options{Routes: Routes{Status: noetl.Status}}, "execute route is missing"},
		{"status without id", Options{Routes: Routes{Execute: noetl.Execute, Status: Route{"GET", "/s"}}}, "has no {id}"},
		{"pointer without sets", Options{Routes: noetl, Terminal: Terminal{Pointer: "/status"}}, "needs both succeeded and failed"},
		{"pointer syntax", Options{Routes: noetl, Terminal: Terminal{Pointer: "status", Succeeded: []string{"a"}, Failed: []string{"b"}}}, "must start with /"},
		{"poll below the floor", Options{Routes: noetl, PollInterval: time.Nanosecond}, "poll_interval 1ns is below the floor of 100ms"},
		{"timeout above the ceiling", Options{Routes: noetl, Timeout: 25 * time.Hour}, "timeout 25h0m0s is above the ceiling of 24h0m0s"},
		{"execute with a placeholder", Options{Routes: Routes{Execute: Route{"POST", "/run/{id}"}, Status: noetl.Status}}, "execute route POST /run/{id}: {id} is not filled by anything"},
		{"status with another placeholder", Options{Routes: Routes{Execute: noetl.Execute, Status: Route{"GET", "/r/{id}/{step}"}}}, "only {id} is filled in, not {step}"},
		{"a dot segment", Options{Routes: Routes{Execute: noetl.Execute, Status: Route{"GET", "/r/../{id}"}}}, `has a ".." segment`},
		{"unbalanced", Options{Routes: Routes{Execute: noetl.Execute, Status: Route{"GET", "/r/{id"}}}, "without its '}'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(c, &tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	for _, tt := range []struct{ in, want string }{
		{"POST /api/execute", ""}, {"get /x", "upper-case"}, {"POST", "not METHOD /path"}, {"GET x", "must start with /"},
	} {
		_, err := ParseRoute(tt.in)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRoute(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestCancelAndDedup covers the requests around one run: the client goes
// away, re-sends, sends twice at once, and different callers.
func TestCancelAndDedup(t *testing.T) {
	slow := Request{Tool: "demo_slow", Path: "demo/slow", Workload: map[string]any{"label": "x"}, Cred: upstream.Credentials{BearerToken: "tok"}, Caller: "c1"}

	t.Run("a hang-up, then notifications/cancelled: the linger is cut short", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Hour})
			r := newRunner(t, e.Handler(), Options{})
			ctx, hangUp := context.WithCancel(t.Context())
			time.AfterFunc(3*time.Second, hangUp)
			notified := make(chan struct{})
			req := slow
			req.Cancelled = notified
			if out := r.Run(ctx, req); out.State != Cancelled {
				t.Fatalf("%s: %s", out.State, text(out.Result))
			}
			time.Sleep(DefaultLinger / 4)
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 0 {
				t.Fatalf("a hang-up cancelled at once: %+v", c)
			}
			start := time.Now()
			close(notified) // the client's notifications/cancelled, after it hung up
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 || time.Since(start) != 0 {
				t.Fatalf("%s after the notification: %+v, want cancelled at once", time.Since(start), c)
			}
		})
	})
	t.Run("a re-send during the linger: a late notification of the first call cancels nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
			r := newRunner(t, e.Handler(), Options{})
			ctx, hangUp := context.WithCancel(t.Context())
			time.AfterFunc(500*time.Millisecond, hangUp)
			notified := make(chan struct{})
			req := slow
			req.Cancelled = notified
			r.Run(ctx, req)
			done := make(chan *Outcome)
			go func() { done <- r.Run(t.Context(), slow) }() // the re-send joins the run
			synctest.Wait()
			close(notified)
			if out := <-done; out.State != Succeeded || !out.Attached {
				t.Fatalf("the re-send: %s attached=%v: %s", out.State, out.Attached, text(out.Result))
			}
			if c := e.Counts(); c.Cancelled != 0 || c.Started != 1 {
				t.Fatalf("%+v, want one run, not cancelled", c)
			}
		})
	})
	t.Run("client cancel: error result at once, upstream cancel after the linger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Hour})
			r := newRunner(t, e.Handler(), Options{})
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(3*time.Second, cancel)
			start := time.Now()
			out := r.Run(ctx, slow)
			if out.State != Cancelled || !out.Result.IsError || time.Since(start) != 3*time.Second {
				t.Fatalf("%s after %s: %s", out.State, time.Since(start), text(out.Result))
			}
			if !strings.Contains(text(out.Result), "unless the same call is re-sent within 2s") {
				t.Errorf("text: %s", text(out.Result))
			}
			time.Sleep(DefaultLinger - time.Millisecond)
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 0 {
				t.Fatalf("cancelled during the linger: %+v", c)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 || c.Started != 1 {
				t.Fatalf("after the linger: %+v, want 1 started, 1 cancelled", c)
			}
			// synctest.Test returns only once every goroutine of the run
			// has ended: a leak fails it.
		})
	})

	t.Run("explicit cancel (ErrCallCancelled): upstream cancel at once, unless another request waits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Hour})
			r := newRunner(t, e.Handler(), Options{})
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(3*time.Second, func() { cancel(ErrCallCancelled) })
			out := r.Run(ctx, slow)
			if out.State != Cancelled || !strings.Contains(text(out.Result), "; the gateway cancels the run upstream") {
				t.Fatalf("%s: %s", out.State, text(out.Result))
			}
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 {
				t.Fatalf("right after an explicit cancel: %+v, want 1 cancelled (no linger)", c)
			}

			// A same request attached to the run still waits for it: one
			// waiter's cancel must not stop the run under the other.
			ctx2, cancel2 := context.WithCancelCause(t.Context())
			done := make(chan *Outcome)
			go func() { done <- r.Run(ctx2, slow) }()
			time.Sleep(time.Second)
			other := make(chan *Outcome)
			go func() { other <- r.Run(t.Context(), slow) }()
			time.Sleep(time.Second)
			cancel2(ErrCallCancelled)
			<-done
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 || c.Started != 2 {
				t.Fatalf("with another waiter: %+v, want 2 started, still 1 cancelled", c)
			}
			ctx3, cancel3 := context.WithCancelCause(t.Context())
			cancel3(ErrCallCancelled)
			go func() { r.Run(ctx3, slow) }() // attaches, leaves at once: the other still waits
			synctest.Wait()
			if c := e.Counts(); c.Cancelled != 1 {
				t.Fatalf("%+v", c)
			}
			if o := <-other; o.State != TimedOut {
				t.Errorf("the remaining waiter: %s: %s", o.State, text(o.Result))
			}
		})
	})

	t.Run("re-sent within the linger attaches and is not cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
			r := newRunner(t, e.Handler(), Options{})
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(2*time.Second, cancel)
			first := r.Run(ctx, slow)
			time.Sleep(time.Second)
			second := r.Run(t.Context(), slow)
			if second.State != Succeeded || !second.Attached || second.ExecutionID != first.ExecutionID {
				t.Fatalf("re-send: %s attached=%v id %s vs %s", second.State, second.Attached, second.ExecutionID, first.ExecutionID)
			}
			if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
				t.Errorf("engine %+v, want 1 started, 0 cancelled", c)
			}
		})
	})

	t.Run("concurrent, after the end, and past the window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
			r := newRunner(t, e.Handler(), Options{DedupWindow: 10 * time.Second})
			outs := make([]*Outcome, 3)
			var wg sync.WaitGroup
			for i := range outs {
				wg.Go(func() { outs[i] = r.Run(t.Context(), slow) })
			}
			wg.Wait()
			attached := 0
			for _, o := range outs {
				if o.ExecutionID != outs[0].ExecutionID || o.State != Succeeded {
					t.Errorf("outcome %s %s, want %s succeeded", o.ExecutionID, o.State, outs[0].ExecutionID)
				}
				if o.Attached {
					attached++
				}
			}
			if attached != 2 {
				t.Errorf("%d attached, want 2", attached)
			}
			time.Sleep(9 * time.Second)
			if o := r.Run(t.Context(), slow); !o.Attached || o.ExecutionID != outs[0].ExecutionID {
				t.Errorf("within the window: attached=%v", o.Attached)
			}
			other := slow
			other.Cred.BearerToken = "tok" // same token, other args
			other.Workload = map[string]any{"label": "y"}
			if o := r.Run(t.Context(), other); o.Attached {
				t.Error("other arguments attached to the run")
			}
			time.Sleep(11 * time.Second)
			if o := r.Run(t.Context(), slow); o.Attached || o.ExecutionID == outs[0].ExecutionID {
				t.Error("past the window: attached to the old run")
			}
			if c := e.Counts(); c.Started != 3 {
				t.Errorf("engine started %d runs, want 3", c.Started)
			}
		})
	})

	t.Run("only a success is handed on: a fresh call after a failure, a ceiling or a cancel starts a run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
			r := newRunner(t, e.Handler(), Options{Timeout: 2 * time.Second})
			fail := slow
			fail.Path = "demo/fail"
			if o := r.Run(t.Context(), fail); o.State != Failed {
				t.Fatalf("demo/fail: %s", o.State)
			}
			if o := r.Run(t.Context(), fail); o.Attached || o.State != Failed {
				t.Errorf("after a failure: attached=%v %s", o.Attached, o.State)
			}
			if o := r.Run(t.Context(), slow); o.State != TimedOut {
				t.Fatalf("demo/slow past the ceiling: %s", o.State)
			}
			if o := r.Run(t.Context(), slow); o.Attached {
				t.Error("after a ceiling: attached to the timed-out run")
			}
			if c := e.Counts(); c.Started != 4 {
				t.Errorf("engine started %d runs, want 4", c.Started)
			}
		})
		synctest.Test(t, func(t *testing.T) {
			// The cancel route takes a while: a fresh call meanwhile must
			// not join the run being cancelled.
			e := engine.New(&engine.Options{Token: "tok", Step: time.Hour})
			h := e.Handler()
			slowCancel := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/cancel") {
					time.Sleep(5 * time.Second)
				}
				h.ServeHTTP(w, r)
			})
			r := newRunner(t, slowCancel, Options{})
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(time.Second, func() { cancel(ErrCallCancelled) })
			first := r.Run(ctx, slow)
			if first.State != Cancelled {
				t.Fatalf("%s", first.State)
			}
			ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel2()
			second := r.Run(ctx2, slow)
			if second.Attached || second.ExecutionID == first.ExecutionID || second.ExecutionID == "" {
				t.Errorf("a fresh call during the cancel: attached=%v id %s (first %s): %s", second.Attached, second.ExecutionID, first.ExecutionID, text(second.Result))
			}
			time.Sleep(10 * time.Second)
			synctest.Wait()
			if c := e.Counts(); c.Started != 2 || c.Cancelled != 2 {
				t.Errorf("engine %+v, want 2 started, 2 cancelled", c)
			}
		})
	})

	t.Run("an anonymous caller's calls are never merged", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Token: "tok", Step: time.Second})
			r := newRunner(t, e.Handler(), Options{})
			anon := slow
			anon.Caller = ""
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					if o := r.Run(t.Context(), anon); o.Attached || o.State != Succeeded {
						t.Errorf("attached=%v %s", o.Attached, o.State)
					}
				})
			}
			wg.Wait()
			if o := r.Run(t.Context(), anon); o.Attached {
				t.Error("a re-send after the end attached")
			}
			if c := e.Counts(); c.Started != 3 {
				t.Errorf("engine started %d runs, want 3", c.Started)
			}
		})
	})

	t.Run("another caller never attaches", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := engine.New(&engine.Options{Step: time.Second})
			r := newRunner(t, e.Handler(), Options{})
			var wg sync.WaitGroup
			for _, tok := range []string{"alice", "bob"} {
				req := slow
				req.Cred.BearerToken = tok
				req.Caller = tok
				wg.Go(func() {
					if o := r.Run(t.Context(), req); o.Attached {
						t.Errorf("%s attached", tok)
					}
				})
			}
			wg.Wait()
			if c := e.Counts(); c.Started != 2 {
				t.Errorf("engine started %d runs, want 2", c.Started)
			}
			for k := range r.runs {
				if strings.Contains(k, "alice") || strings.Contains(k, "tok") {
					t.Errorf("key %q holds a credential", k)
				}
			}
		})
	})
}

// TestOverTheNetwork runs against a real HTTP engine, and checks that
// cancelled runs leave no goroutine behind.
func TestOverTheNetwork(t *testing.T) {
	remote := func(step time.Duration) (*engine.Engine, *Runner, interface{ CloseIdleConnections() }, *httptest.Server) {
		e := engine.New(&engine.Options{Step: step})
		srv := httptest.NewServer(e.Handler())
		t.Cleanup(srv.Close)
		tr := upstream.NewTransport()
		c, err := upstream.NewRemote(srv.URL, &upstream.ClientOptions{Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(c, &Options{Routes: noetl, PollInterval: MinPollInterval, Linger: -1})
		if err != nil {
			t.Fatal(err)
		}
		return e, r, tr, srv
	}
	// Five steps of 100 ms, polled every 100 ms: the first poll (at once)
	// finds it running, and a loaded machine spaces the rest out, so it
	// takes two polls or more, not five.
	_, r, _, _ := remote(100 * time.Millisecond)
	if out := r.Run(t.Context(), Request{Tool: "t", Path: "demo/slow"}); out.State != Succeeded || out.Polls < 2 {
		t.Fatalf("slow: %s after %d polls: %s", out.State, out.Polls, text(out.Result))
	}
	// The cancelled runs last an hour: the engine counts a cancel only of
	// a run still going, and a loaded machine once took longer than the
	// 500 ms of a run of 100 ms steps between its start and the cancel.
	e, r, tr, srv := remote(time.Hour)
	before := runtime.NumGoroutine()
	for i := range 20 {
		// Left once the engine has started it (on a loaded machine a fixed
		// timeout can end the call before the run exists, and then there
		// is nothing to cancel upstream).
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for e.Counts().Started < 1+i && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		out := r.Run(ctx, Request{Tool: "t", Path: "demo/slow", Workload: map[string]any{"i": i}})
		cancel()
		if out.State != Cancelled {
			t.Fatalf("run %d: %s", i, out.State)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.Counts().Cancelled < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := e.Counts(); c.Cancelled != 20 {
		t.Fatalf("engine saw %d cancels, want 20", c.Cancelled)
	}
	tr.CloseIdleConnections()
	srv.CloseClientConnections()
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines after 20 cancelled runs, %d before", n, before)
	}
}
