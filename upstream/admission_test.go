package upstream

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hugeDoc declares one operation answering JSON, the shape of get_huge.
const hugeDoc = `{"openapi":"3.0.3","info":{"title":"huge","version":"1"},
 "paths":{"/huge":{"get":{"operationId":"getHuge","responses":{"200":{"description":"ok",
  "content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`

func hugeBinding(t testing.TB) *Binding {
	t.Helper()
	doc, err := ParseDocument(context.Background(), []byte(hugeDoc))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Value("/huge")
	b, err := Bind("GET", "/huge", item, item.Get, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestMaxConcurrent sends many calls at once to an upstream that counts what
// it has in flight: it must never see more than MaxConcurrent; a call over
// the limit waits for a slot, is refused after QueueTimeout with nothing
// sent, or stops waiting when its ctx is cancelled.
func TestMaxConcurrent(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		queue       time.Duration
		hold        bool          // the upstream answers only when released
		delay       time.Duration // else it answers after delay
		calls       int           // besides the max calls that take every slot first when hold
		cancelAfter time.Duration // the waiting calls' ctx is cancelled after this
		wantOK      int
		wantBusy    int
		wantCancel  int
		wantSent    int
	}{
		{name: "excess refused after the queue timeout", max: 4, queue: 300 * time.Millisecond, hold: true,
			calls: 96, wantOK: 4, wantBusy: 96, wantSent: 4},
		{name: "excess waits for a slot", max: 4, queue: 20 * time.Second, delay: 10 * time.Millisecond,
			calls: 100, wantOK: 100, wantSent: 100},
		{name: "cancelled ctx stops the wait", max: 2, queue: 20 * time.Second, hold: true,
			calls: 20, cancelAfter: 50 * time.Millisecond, wantOK: 2, wantCancel: 20, wantSent: 2},
	}
	b := hugeBinding(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inflight, maxSeen, sent atomic.Int64
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				n := inflight.Add(1)
				defer inflight.Add(-1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				if tt.hold {
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
				} else {
					time.Sleep(tt.delay)
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"ok":true}`)
			}))
			defer srv.Close()
			defer func() {
				select {
				case <-release:
				default:
					close(release)
				}
			}()
			c, err := NewRemote(srv.URL, &ClientOptions{Name: "orchestrator", MaxConcurrent: tt.max, QueueTimeout: tt.queue})
			if err != nil {
				t.Fatal(err)
			}

			type outcome struct {
				res     *mcp.CallToolResult
				elapsed time.Duration
			}
			call := func(ctx context.Context, out chan<- outcome) {
				start := time.Now()
				res, _ := c.Call(ctx, b, map[string]any{}, Credentials{})
				out <- outcome{res, time.Since(start)}
			}
			holders := make(chan outcome, tt.max)
			if tt.hold {
				// Take every slot first, and wait until the upstream holds them.
				for range tt.max {
					go call(context.Background(), holders)
				}
				deadline := time.Now().Add(10 * time.Second)
				for inflight.Load() < int64(tt.max) {
					if time.Now().After(deadline) {
						t.Fatalf("the upstream holds %d calls, want %d", inflight.Load(), tt.max)
					}
					time.Sleep(time.Millisecond)
				}
			}
			waiting := make(chan outcome, tt.calls)
			for range tt.calls {
				ctx := context.Background()
				if tt.cancelAfter > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					time.AfterFunc(tt.cancelAfter, cancel)
				}
				go call(ctx, waiting)
			}
			var ok, busy, cancelled int
			tally := func(o outcome) {
				text := firstText(o.res)
				switch {
				case !o.res.IsError:
					ok++
				case strings.Contains(text, fmt.Sprintf("upstream orchestrator is busy: %d calls in flight, none finished within %s; try again", tt.max, tt.queue)):
					busy++
					if o.elapsed < tt.queue {
						t.Errorf("refused after %s, before the %s queue timeout", o.elapsed, tt.queue)
					}
				case strings.Contains(text, "cancelled"):
					cancelled++
					if o.elapsed > 5*time.Second {
						t.Errorf("a cancelled wait took %s", o.elapsed)
					}
				default:
					t.Errorf("unexpected result: %s", text)
				}
			}
			timeout := time.After(30 * time.Second)
			for range tt.calls {
				select {
				case o := <-waiting:
					tally(o)
				case <-timeout:
					t.Fatal("calls hang")
				}
			}
			close(release)
			if tt.hold {
				for range tt.max {
					tally(<-holders)
				}
			}
			if ok != tt.wantOK || busy != tt.wantBusy || cancelled != tt.wantCancel {
				t.Errorf("ok %d busy %d cancelled %d, want %d %d %d", ok, busy, cancelled, tt.wantOK, tt.wantBusy, tt.wantCancel)
			}
			if got := maxSeen.Load(); got > int64(tt.max) {
				t.Errorf("the upstream saw %d calls at once, over the limit of %d", got, tt.max)
			}
			if got := sent.Load(); got != int64(tt.wantSent) {
				t.Errorf("the upstream received %d requests, want %d", got, tt.wantSent)
			}
		})
	}
}

// hugeJSON is a JSON object of n bytes.
func hugeJSON(n int) []byte {
	const head, tail = `{"data":"`, `"}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// TestResponseBudget answers 32 concurrent calls with 4 MiB of JSON each,
// against a 16 MiB budget: the bytes held never exceed the budget, every call
// ends as a success or as the budget's isError, and nothing hangs.
func TestResponseBudget(t *testing.T) {
	const (
		calls  = 32
		answer = 4<<20 - 1024
		budget = 16 << 20
	)
	payload := hugeJSON(answer)
	serve := func(contentLength bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if contentLength {
				w.Header().Set("Content-Length", fmt.Sprint(len(payload)))
				w.Write(payload)
				return
			}
			// Chunked, in pieces, the way a streaming encoder answers.
			for p := payload; len(p) > 0; {
				n := min(len(p), 32<<10)
				w.Write(p[:n])
				w.(http.Flusher).Flush()
				p = p[n:]
			}
		}
	}
	tests := []struct {
		name      string
		client    func(t *testing.T, opts *ClientOptions) *Client
		wantAllOK bool // no call needs to wait on another's partial answer
	}{
		{name: "content-length", wantAllOK: true, client: func(t *testing.T, opts *ClientOptions) *Client {
			srv := httptest.NewServer(serve(true))
			t.Cleanup(srv.Close)
			c, _ := NewRemote(srv.URL, opts)
			return c
		}},
		{name: "chunked", wantAllOK: true, client: func(t *testing.T, opts *ClientOptions) *Client {
			srv := httptest.NewServer(serve(false))
			t.Cleanup(srv.Close)
			c, _ := NewRemote(srv.URL, opts)
			return c
		}},
		{name: "in-process", wantAllOK: true, client: func(t *testing.T, opts *ClientOptions) *Client {
			return NewInProcess(serve(true), opts)
		}},
	}
	b := hugeBinding(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := NewResponseBudget(budget)
			// The queue timeout is far beyond what the calls need: the test
			// is about memory and about calls never refused for waiting on
			// each other, not about speed (under -race on a busy 2-core CI
			// machine, the last of 8 waves of 4 MiB answers waited 20 s).
			c := tt.client(t, &ClientOptions{ResponseBudget: rb, QueueTimeout: 3 * time.Minute, Timeout: 3 * time.Minute})

			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var heapPeak atomic.Uint64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				var ms runtime.MemStats
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					runtime.ReadMemStats(&ms)
					heapPeak.Store(max(heapPeak.Load(), ms.HeapInuse))
				}
			}()

			var wg sync.WaitGroup
			var ok, refused atomic.Int64
			for range calls {
				wg.Go(func() {
					res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
					text := firstText(res)
					switch {
					case !res.IsError && res.StructuredContent != nil && len(text) == answer:
						ok.Add(1)
					case res.IsError && strings.Contains(text, "the gateway is holding 16 MiB of upstream answers, its limit") && strings.HasSuffix(text, "; try again"):
						refused.Add(1)
					default:
						t.Errorf("unexpected result: error %v, %.200s", res.IsError, text)
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(4 * time.Minute):
				t.Fatal("calls hang")
			}
			close(stop)
			<-sampled

			used, peak, refusals := rb.stats()
			t.Logf("%d ok, %d refused (%d to break a wait on each other); budget peak %.1f MiB; heap in use peak %.1f MiB over a %.1f MiB base",
				ok.Load(), refused.Load(), refusals, float64(peak)/(1<<20), float64(heapPeak.Load()-min(heapPeak.Load(), base.HeapInuse))/(1<<20), float64(base.HeapInuse)/(1<<20))
			if peak > budget {
				t.Errorf("budget peak %d bytes, over the %d budget", peak, budget)
			}
			if peak < answer {
				t.Errorf("budget peak %d bytes: the answers were not counted", peak)
			}
			if used != 0 {
				t.Errorf("%d bytes still held after every call returned", used)
			}
			if ok.Load() == 0 {
				t.Error("no call succeeded")
			}
			if tt.wantAllOK && refused.Load() != 0 {
				t.Errorf("%d calls refused, want none", refused.Load())
			}
		})
	}
}

// TestResponseBudgetWaits drives a budget directly: calls that hold part of
// it and all wait for more are not left to time out together; a call that
// waits while another still reads is refused at the queue timeout; a
// cancelled ctx stops the wait.
func TestResponseBudgetWaits(t *testing.T) {
	ctx := context.Background()
	long := 20 * time.Second

	t.Run("holders waiting on each other", func(t *testing.T) {
		rb := NewResponseBudget(100)
		a := &reservation{budget: rb, wait: long}
		bb := &reservation{budget: rb, wait: long}
		if err := a.grow(ctx, 60, 60); err != nil {
			t.Fatal(err)
		}
		if err := bb.grow(ctx, 40, 40); err != nil {
			t.Fatal(err)
		}
		aDone := make(chan error, 1)
		go func() { aDone <- a.grow(ctx, 90, 90) }()
		waitFor(t, func() bool { rb.mu.Lock(); defer rb.mu.Unlock(); return rb.blocked == 1 })
		start := time.Now()
		err := bb.grow(ctx, 50, 50) // both wait now: b, the last, is refused at once
		if err == nil || !strings.Contains(err.Error(), "every call holding part of it is waiting for more; try again") {
			t.Fatalf("b: %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("refused after %s", time.Since(start))
		}
		bb.release()
		if err := <-aDone; err != nil {
			t.Fatalf("a, after b let go: %v", err)
		}
		a.release()
		if used, peak, _ := rb.stats(); used != 0 || peak > 100 {
			t.Errorf("used %d, peak %d", used, peak)
		}
	})

	for _, tt := range []struct {
		name   string
		wait   time.Duration
		cancel bool
		want   string
	}{
		{name: "queue timeout", wait: 100 * time.Millisecond, want: "the gateway is holding 100 bytes of upstream answers, its limit, and none was released within 100ms; try again"},
		{name: "cancelled", wait: long, cancel: true, want: context.Canceled.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rb := NewResponseBudget(100)
			reader := &reservation{budget: rb, wait: long} // holds room, still reading
			if err := reader.grow(ctx, 80, 80); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if tt.cancel {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			waiter := &reservation{budget: rb, wait: tt.wait}
			start := time.Now()
			err := waiter.grow(wctx, 30, 30)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("waited %s", time.Since(start))
			}
			reader.release()
			waiter.release()
			// The budget is whole again: a new call gets all of it at once.
			if err := (&reservation{budget: rb, wait: tt.wait}).grow(ctx, 100, 100); err != nil {
				t.Errorf("after release: %v", err)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// TestLyingContentLength answers with a Content-Length that is not the body's
// length: the call reserves no more than its cap whatever is declared, never
// more than it reads past a short declaration, and gives it all back.
func TestLyingContentLength(t *testing.T) {
	const limit = 4 << 20
	mib := hugeJSON(1<<20 - 100)
	raw := func(header string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, bufrw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(bufrw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n%s\r\n", header)
			bufrw.Write(body)
			bufrw.Flush()
		}
	}
	// declaresLess rewrites a real answer's length to 10 bytes, as a faulty
	// proxy or RoundTripper could: the body goes on past it.
	declaresLess := func(rt http.RoundTripper) http.RoundTripper {
		return rewriteTransport(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil {
				resp.ContentLength = 10
			}
			return resp, err
		})
	}
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		transport func(http.RoundTripper) http.RoundTripper
		wantError string // substring of the isError text; "" means success
		wantText  int    // length of the text content on success; -1: not checked
		maxPeak   int64
	}{
		{name: "claims 1 GiB, sends 7 bytes", handler: raw("Content-Length: 1073741824\r\n", []byte(`{"a":1}`)),
			wantError: "the upstream's answer ended early (502 Bad Gateway)", maxPeak: firstChunk},
		{name: "claims 100 bytes, sends 7", handler: raw("Content-Length: 100\r\n", []byte(`{"a":1}`)),
			wantError: "the upstream's answer ended early (502 Bad Gateway)", maxPeak: 100},
		{name: "claims 10 bytes, sends 1 MiB", handler: raw("Content-Length: 10\r\n", mib),
			wantText: -1, maxPeak: 10},
		{name: "claims 5 MiB over the 4 MiB cap, sends 5 MiB", handler: raw("Content-Length: 5242880\r\n", hugeJSON(5<<20)),
			wantText: -1, maxPeak: limit},
		{name: "length rewritten below a 1 MiB body", transport: declaresLess,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(mib)
			},
			wantText: len(mib), maxPeak: 1 << 20},
	}
	b := hugeBinding(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			rb := NewResponseBudget(16 << 20)
			opts := &ClientOptions{ResponseBudget: rb, MaxResponseBytes: limit, Timeout: 10 * time.Second}
			if tt.transport != nil {
				opts.Transport = tt.transport(NewTransport())
			}
			c, _ := NewRemote(srv.URL, opts)
			res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
			text := firstText(res)
			switch {
			case tt.wantError != "":
				if !res.IsError || !strings.Contains(text, tt.wantError) {
					t.Errorf("got error %v %q, want an error with %q", res.IsError, text, tt.wantError)
				}
			case res.IsError && tt.wantText >= 0:
				t.Errorf("got error %q", text)
			case tt.wantText >= 0 && len(text) != tt.wantText:
				t.Errorf("text is %d bytes, want %d", len(text), tt.wantText)
			}
			used, peak, _ := rb.stats()
			if peak > tt.maxPeak {
				t.Errorf("budget peak %d bytes, want at most %d", peak, tt.maxPeak)
			}
			if used != 0 {
				t.Errorf("%d bytes still held after the call", used)
			}
		})
	}
}

type rewriteTransport func(*http.Request) (*http.Response, error)

func (f rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestGrantableIsTheBankersCheck compares grantable, with its shortcut for a
// budget that covers every need, against the banker's check written out in
// full, over random states of a budget: the two must agree on every one.
func TestGrantableIsTheBankersCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	banker := func(b *ResponseBudget, wr *reservation, n int64) bool {
		free := b.size - b.used - n
		if free < 0 {
			return false
		}
		var needs [][2]int64 // need, held
		for r := range b.holders {
			if r != wr {
				needs = append(needs, [2]int64{r.claim - r.held, r.held})
			}
		}
		needs = append(needs, [2]int64{wr.claim - wr.held - n, wr.held + n})
		slices.SortFunc(needs, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
		for _, c := range needs {
			if c[0] > free {
				return false
			}
			free += c[1]
		}
		return true
	}
	for i := range 20000 {
		b := NewResponseBudget(int64(1 + rng.IntN(1000)))
		var rs []*reservation
		for range rng.IntN(6) {
			r := &reservation{budget: b}
			r.held = rng.Int64N(b.size/4 + 1)
			if b.used+r.held > b.size {
				break
			}
			r.claim = min(r.held+rng.Int64N(b.size/2+1), b.size)
			if r.held > 0 {
				b.holders[r] = struct{}{}
				b.used += r.held
			}
			rs = append(rs, r)
		}
		wr := &reservation{budget: b}
		if len(rs) > 0 && rng.IntN(2) == 0 {
			wr = rs[rng.IntN(len(rs))] // a holder asking for more
		}
		n := 1 + rng.Int64N(b.size/3+1)
		wr.claim = min(max(wr.claim, wr.held+n), b.size)
		if got, want := b.grantable(wr, n), banker(b, wr, n); got != want {
			t.Fatalf("state %d: grantable = %v, the banker's check %v (size %d, used %d, n %d)", i, got, want, b.size, b.used, n)
		}
	}
}

// TestAnswerHoldParks: a kept share counts as the bytes it holds and no
// more: a call whose answer had no Content-Length claimed up to its limit
// (here the whole budget) while it read, and must not go on claiming it
// while kept, or no other call would be safe to serve.
func TestAnswerHoldParks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"a":1}`))
		w.(http.Flusher).Flush() // chunked: no Content-Length
	}))
	t.Cleanup(srv.Close)
	rb := NewResponseBudget(1 << 20) // the calls' 4 MiB cap is cut to it
	c, err := NewRemote(srv.URL, &ClientOptions{ResponseBudget: rb, QueueTimeout: 300 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := hugeBinding(t)
	hold := new(AnswerHold)
	if res, _ := c.Call(WithAnswerHold(context.Background(), hold), b, map[string]any{}, Credentials{}); res.IsError {
		t.Fatalf("first call: %s", firstText(res))
	}
	used, _, _ := rb.stats()
	if used == 0 {
		t.Fatal("nothing kept")
	}
	if res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{}); res.IsError {
		t.Errorf("a small answer refused while %d of %d bytes are kept: %s", used, rb.size, firstText(res))
	}
	hold.Release()
	if used, _, _ := rb.stats(); used != 0 {
		t.Errorf("%d bytes held after Release", used)
	}
}

// TestAnswerHold: under an AnswerHold a call's share of the budget stays
// taken after Call returns, so the next call waits for it, until Release;
// a call made after Release gives its share back when it returns.
func TestAnswerHold(t *testing.T) {
	payload := hugeJSON(600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(payload)
	}))
	t.Cleanup(srv.Close)
	rb := NewResponseBudget(1000)
	c, err := NewRemote(srv.URL, &ClientOptions{ResponseBudget: rb, QueueTimeout: 200 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := hugeBinding(t)
	hold := new(AnswerHold)
	ctx := WithAnswerHold(context.Background(), hold)
	if res, _ := c.Call(ctx, b, map[string]any{}, Credentials{}); res.IsError {
		t.Fatalf("first call: %s", firstText(res))
	}
	if used, _, _ := rb.stats(); used < int64(len(payload)) {
		t.Fatalf("%d bytes held after the call returned under a hold, want its answer's %d", used, len(payload))
	}
	// The budget cannot take a second answer while the first is held.
	res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
	if !res.IsError || !strings.Contains(firstText(res), "none was released within 200ms") {
		t.Fatalf("second call while the first answer is held: error %v, %s", res.IsError, firstText(res))
	}
	hold.Release()
	hold.Release() // twice is fine
	if used, _, _ := rb.stats(); used != 0 {
		t.Fatalf("%d bytes held after Release", used)
	}
	// Released: a later call under it gives its share back as it returns.
	if res, _ := c.Call(ctx, b, map[string]any{}, Credentials{}); res.IsError {
		t.Fatalf("call after Release: %s", firstText(res))
	}
	if used, _, _ := rb.stats(); used != 0 {
		t.Errorf("%d bytes held after a call under a released hold", used)
	}
}

// chunkReader reads n bytes of 'x', at most chunk at a time: an answer
// that comes without a Content-Length, so that readBody grows its buffer
// again and again.
type chunkReader struct{ n, chunk int }

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.chunk, r.n)
	for i := range k {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// parked returns a share of rb holding n bytes whose call has read all it
// will (see ResponseBudget.park): room taken until released.
func parked(t *testing.T, rb *ResponseBudget, n int64) *reservation {
	t.Helper()
	r := &reservation{budget: rb, wait: time.Second}
	if err := r.grow(context.Background(), n, n); err != nil {
		t.Fatal(err)
	}
	rb.park(r)
	return r
}

// TestQueueTimeoutInAll: a call's queue timeout bounds all its waits
// together — for a slot, then for each growth of its answer's buffer — so
// that it is told "busy" within queue_timeout of waiting, not once per
// wait (issue 20 saw 15.2 s for a 5 s queue_timeout). In a synctest bubble,
// so the clock is exact: each case's call ends when its 5 s are spent.
func TestQueueTimeoutInAll(t *testing.T) {
	const queue = 5 * time.Second
	busy := "none was released within 5s; try again"

	t.Run("growths", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// 64 KiB free: the first 64 KiB of the answer fit. Room for
			// its second growth (+64 KiB) comes after 4 s of waiting, for
			// its third (+128 KiB) after 4 s more: past the 5 s in all.
			rb := NewResponseBudget(2 << 20)
			first := parked(t, rb, 64<<10)
			second := parked(t, rb, 128<<10)
			parked(t, rb, 2<<20-64<<10-64<<10-128<<10)
			released := make(chan struct{})
			go func() {
				defer close(released)
				time.Sleep(4 * time.Second)
				first.release()
				time.Sleep(4 * time.Second)
				second.release()
			}()
			res := &reservation{budget: rb, wait: queue, limit: 1 << 20}
			start := time.Now()
			_, _, err := readBody(context.Background(), &chunkReader{n: 1 << 20, chunk: 16 << 10}, res.limit, -1, res)
			if err == nil || !strings.HasSuffix(err.Error(), busy) {
				t.Errorf("got %v, want the budget's refusal", err)
			}
			if waited := time.Since(start); waited != queue {
				t.Errorf("refused after %s of waiting, want the queue timeout, %s, in all", waited, queue)
			}
			res.release()
			<-released
		})
	})

	t.Run("slot then room", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// One slot, taken for 3 s by a small answer; then the answer of
			// the call that waited for it finds no room: 2 s are left of
			// its queue timeout, not 5.
			rb := NewResponseBudget(1 << 20)
			full := parked(t, rb, 1<<20-64<<10)
			var calls atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if calls.Add(1) == 1 {
					time.Sleep(3 * time.Second)
					io.WriteString(w, `{}`)
					return
				}
				w.Write(hugeJSON(200 << 10))
			})
			c := NewInProcess(h, &ClientOptions{ResponseBudget: rb, MaxConcurrent: 1, QueueTimeout: queue})
			b := hugeBinding(t)
			first := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
				first <- res
			}()
			synctest.Wait() // the first call holds the slot
			start := time.Now()
			res, rep := c.Call(context.Background(), b, map[string]any{}, Credentials{})
			if !res.IsError || rep.Outcome != OutcomeBusy || !strings.HasSuffix(firstText(res), busy) {
				t.Fatalf("second call: %s, error %v: %s", rep.Outcome, res.IsError, firstText(res))
			}
			if waited := time.Since(start); waited != queue {
				t.Errorf("refused after %s of waiting, want the queue timeout, %s, in all", waited, queue)
			}
			if res := <-first; res.IsError {
				t.Errorf("first call: %s", firstText(res))
			}
			full.release()
		})
	})
}

// TestAnswerCost: under an AnswerHold with a Cost, a call counts each byte
// of its answer 1+PerByte times while it reads it (and its answer is cut
// where that fills the budget); once the result is made, its share is the
// answer's bytes plus what Of says the writer holds — less, given back, or
// more, waited for and refused when no room comes within the queue
// timeout. In a synctest bubble: the refusal comes at the exact timeout.
func TestAnswerCost(t *testing.T) {
	payload := hugeJSON(100 << 10)
	for _, tt := range []struct {
		name     string
		perByte  int64
		of       int64
		budget   int64
		other    int64 // held by a kept answer that is never written
		wantRead int64 // counted while the answer is read
		wantKept int64 // counted once the result is made; 0: refused
		wantCut  bool
	}{
		{name: "less than counted", perByte: 3, of: 1000, budget: 1 << 20,
			wantRead: 4 * int64(len(payload)), wantKept: int64(len(payload)) + 1000},
		{name: "more than counted", perByte: 1, of: 300 << 10, budget: 1 << 20,
			wantRead: 2 * int64(len(payload)), wantKept: int64(len(payload)) + 300<<10},
		{name: "more than there is room for", perByte: 1, of: 300 << 10, budget: 1 << 20, other: 700 << 10,
			wantRead: 2 * int64(len(payload))},
		{name: "cut where its weight fills the budget", perByte: 15, budget: 1 << 20,
			wantRead: 16 * (64 << 10), wantKept: 64 << 10, wantCut: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rb := NewResponseBudget(tt.budget)
				if tt.other > 0 {
					defer parked(t, rb, tt.other).release()
				}
				var read int64
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Write(payload)
					read, _ = rb.Held()
				})
				c := NewInProcess(h, &ClientOptions{ResponseBudget: rb, QueueTimeout: 5 * time.Second})
				hold := &AnswerHold{Cost: &AnswerCost{PerByte: tt.perByte, Of: func(*mcp.CallToolResult) int64 { return tt.of }}}
				start := time.Now()
				res, rep := c.Call(WithAnswerHold(context.Background(), hold), hugeBinding(t), map[string]any{}, Credentials{})
				if read-tt.other != tt.wantRead {
					t.Errorf("counted %d while reading, want %d", read-tt.other, tt.wantRead)
				}
				kept, _ := rb.Held()
				switch {
				case tt.wantKept == 0:
					if rep.Outcome != OutcomeBusy || !strings.HasSuffix(firstText(res), "none was released within 5s; try again") {
						t.Errorf("%s: %s", rep.Outcome, firstText(res))
					}
					if waited := time.Since(start); waited != 5*time.Second {
						t.Errorf("refused after %s, want the queue timeout", waited)
					}
					if kept != tt.other {
						t.Errorf("%d bytes kept after the refusal, want none of its own", kept-tt.other)
					}
				case kept-tt.other != tt.wantKept:
					t.Errorf("%d bytes kept, want %d", kept-tt.other, tt.wantKept)
				case tt.wantCut != (res.Meta["mcpgate/truncated"] == true):
					t.Errorf("cut: %v, want %v: %.100s", res.Meta, tt.wantCut, firstText(res))
				}
				hold.Release()
				if used, _ := rb.Held(); used != tt.other {
					t.Errorf("%d bytes held after Release", used-tt.other)
				}
			})
		})
	}
}

// listingDoc declares an operation whose answer's schema names its
// properties: checking an answer means decoding it.
const listingDoc = `{"openapi":"3.0.3","info":{"title":"l","version":"1"},
 "paths":{"/items":{"get":{"operationId":"listItems","responses":{"200":{"description":"ok",
  "content":{"application/json":{"schema":{"type":"object","properties":{"items":{"type":"array"}}}}}}}}}}}`

// TestDecodeCounted: an answer decoded to be checked against its output
// schema counts its decoded size (decodedSize) while it is decoded, and
// gives it back once the result is made; one whose schema checks only that
// it is an object is not decoded at all, and counts nothing more. In a
// synctest bubble: a decode that cannot get room is refused at the exact
// queue timeout.
func TestDecodeCounted(t *testing.T) {
	payload := listingJSON(100 << 10)
	doc, err := ParseDocument(context.Background(), []byte(listingDoc))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Value("/items")
	listing, err := Bind("GET", "/items", item, item.Get, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		b       *Binding
		other   int64 // held by a kept answer that is never written
		wantMax int64 // most the call counted; 0: refused
	}{
		{name: "decoded", b: listing, wantMax: int64(len(payload)) + decodedSize(payload)},
		{name: "decoded, no room for it", b: listing, other: 1<<20 - 200<<10},
		{name: "object only", b: hugeBinding(t), other: 1<<20 - 200<<10, wantMax: int64(len(payload))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rb := NewResponseBudget(4 << 20)
				if tt.other > 0 {
					rb = NewResponseBudget(1 << 20)
					defer parked(t, rb, tt.other).release()
				}
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Write(payload)
				})
				c := NewInProcess(h, &ClientOptions{ResponseBudget: rb, QueueTimeout: 5 * time.Second})
				hold := new(AnswerHold)
				start := time.Now()
				res, rep := c.Call(WithAnswerHold(context.Background(), hold), tt.b, map[string]any{}, Credentials{})
				_, peak, _ := rb.stats()
				kept, _ := rb.Held()
				if tt.wantMax == 0 {
					if rep.Outcome != OutcomeBusy || !strings.HasSuffix(firstText(res), "none was released within 5s; try again") {
						t.Errorf("%s: %s", rep.Outcome, firstText(res))
					}
					if waited := time.Since(start); waited != 5*time.Second {
						t.Errorf("refused after %s, want the queue timeout", waited)
					}
					return
				}
				if res.IsError {
					t.Fatalf("%s: %s", rep.Outcome, firstText(res))
				}
				if peak-tt.other != tt.wantMax {
					t.Errorf("counted %d at most, want %d", peak-tt.other, tt.wantMax)
				}
				if kept-tt.other != int64(len(payload)) {
					t.Errorf("%d bytes kept, want the answer's %d", kept-tt.other, len(payload))
				}
				hold.Release()
			})
		})
	}
}

// TestReleaseRefusesWaits: a wait for room that belongs to a call that has
// ended (an in-process handler still writing on its own goroutine) is
// refused when the call is released, not granted later by another call's
// release: room granted to an ended call would never be given back, and
// enough of those leave the gateway busy for good.
func TestReleaseRefusesWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewResponseBudget(100)
		other := &reservation{budget: b, wait: time.Minute, limit: 100}
		if err := other.grow(t.Context(), 100, 100); err != nil {
			t.Fatal(err)
		}
		r := &reservation{budget: b, wait: time.Minute, limit: 100}
		got := make(chan error, 1)
		go func() { got <- r.grow(context.Background(), 50, 50) }()
		synctest.Wait() // r waits for room
		r.release()     // its call ends
		other.release() // room comes back
		if err := <-got; err == nil {
			t.Error("the wait of a released call was granted")
		}
		if used, waiting := b.Held(); used != 0 || waiting != 0 {
			t.Errorf("after both released: %d bytes held, %d waiting", used, waiting)
		}
	})
}
