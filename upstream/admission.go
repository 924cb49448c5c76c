package upstream

// This file holds what a call must be admitted to before its answer is held:
// a concurrency slot of its upstream (max_concurrent) and room in the
// response memory budget (ResponseBudget, max_response_memory), both within
// one queue_timeout; and how an answer's body is read under them. The size
// of tools' schemas is schemasize.go's.

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Defaults of the bounds in [ClientOptions]. Issue 7 measured why they are
// needed: one 209 KB batch opened 2000 upstream connections, and one 10 KB
// batch of calls to a huge-answer operation took the gateway to 2.46 GB.
const (
	// DefaultMaxConcurrent is how many calls one Client has in flight at
	// once. It matches NewTransport's idle pool per host, so a busy gateway
	// reuses its connections instead of dialing more.
	DefaultMaxConcurrent = 64
	// DefaultQueueTimeout is how long a call waits for a free slot and for
	// room in the ResponseBudget, in all, before it is refused. It is short: a model
	// that is told "busy, try again" does better than one left waiting for
	// the whole call timeout.
	DefaultQueueTimeout = 5 * time.Second
	// DefaultMaxResponseMemory is the size of a ResponseBudget made with no
	// size: room for 16 answers at DefaultMaxResponseBytes, or thousands of
	// ordinary ones.
	DefaultMaxResponseMemory = 64 << 20
)

// limitError is a call refused by one of the gateway's own bounds (a busy
// upstream, a full ResponseBudget). Its text is the tool result as is.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// slots bounds the calls one Client has in flight. A buffered channel rather
// than golang.org/x/sync/semaphore: every slot weighs the same, len gives the
// in-flight count the busy message names, and a select waits on the slot, the
// caller's ctx and the queue deadline at once — no weighted accounting needed,
// and no new direct dependency.
type slots chan struct{}

// acquire takes a slot for the call of res, waiting no longer than what is
// left of its queue timeout (and than ctx allows); the wait counts against
// it. The returned func gives the slot back; it is safe to call more than
// once.
func (s slots) acquire(ctx context.Context, name string, res *reservation) (release func(), err error) {
	select {
	case s <- struct{}{}:
	default:
		start := time.Now()
		t := time.NewTimer(res.wait - res.waited)
		defer t.Stop()
		// Before any room is asked for: no other goroutine uses res yet.
		defer func() { res.waited += time.Since(start) }()
		select {
		case s <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, &limitError{fmt.Sprintf("upstream %s is busy: %d calls in flight, none finished within %s; try again", name, cap(s), res.wait)}
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-s }) }, nil
}

// ResponseBudget bounds the memory held for upstream answers at once, across
// every call of every Client that shares it. A call reserves room as it reads
// its answer — the Content-Length when the upstream declares one within the
// call's cap, else in doubling chunks — so a 2 KB answer takes 2 KB of the
// budget, not the 4 MiB its call may read; and it gives the room back when
// Call returns, after the answer has been mapped to a result, or, under an
// AnswerHold, once the answer has been written to the client. The result
// holds the answer's bytes, not copies of them; under an AnswerHold whose
// server encodes the result before writing it, the encodings count too (see
// AnswerCost).
//
// A call that finds no room waits, then is refused with a result that says
// so. Its queue timeout bounds all its waits together — for a slot, then for
// each growth of its answer's buffer — not each one: a call is told "busy"
// within its queue timeout of waiting, however many times it had to wait.
// Calls already reading are served before new ones, and new ones first come
// first served.
//
// Calls that read in chunks hold part of their answer while they wait for
// more, so they could all end up waiting on each other. The budget avoids
// that the way the banker's algorithm does: each call claims what it may come
// to hold (its declared length, else its cap), and room is granted only when,
// afterwards, the calls can still finish one after another, each with the
// room the ones before it give back. A call whose body runs past its declared
// length raises its claim, which the budget could not foresee; if that leaves
// every call holding room waiting, the one that started waiting last is
// refused at once, so the others finish.
//
// A ResponseBudget is safe for concurrent use.
type ResponseBudget struct {
	size int64

	mu       sync.Mutex
	used     int64
	holders  map[*reservation]struct{} // calls holding room
	blocked  int                       // of those, how many are waiting for more
	waiters  list.List                 // of *budgetWaiter, in arrival order
	peak     int64                     // high-water mark of used, for tests
	refusals int                       // calls refused to unstick the others, for tests
}

// NewResponseBudget returns a budget of maxBytes, to share between the
// Clients of one gateway (see ClientOptions.ResponseBudget). maxBytes <= 0
// means DefaultMaxResponseMemory. No single answer is read beyond the whole
// budget: a Client cuts its answers there.
func NewResponseBudget(maxBytes int64) *ResponseBudget {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseMemory
	}
	return &ResponseBudget{size: maxBytes, holders: map[*reservation]struct{}{}}
}

type budgetWaiter struct {
	r     *reservation
	n     int64
	ready chan error // buffered: nil when granted, else why it was refused
}

// acquire reserves n more bytes for r, which may hold some already. The
// budget's lock guards r's held and claim.
func (b *ResponseBudget) acquire(ctx context.Context, r *reservation, n int64) error {
	b.mu.Lock()
	if r.done {
		b.mu.Unlock()
		return errors.New("the call has ended")
	}
	if r.held+n > b.size {
		// Cannot happen through Client, which cuts answers at the size; kept
		// so that no call waits for room that does not exist.
		b.mu.Unlock()
		return b.fullError(fmt.Sprintf("an answer needs more than all %s", formatBytes(b.size)))
	}
	r.claim = min(max(r.claim, r.held+n), b.size)
	if b.waiters.Len() == 0 && b.grantable(r, n) {
		// Nobody queued ahead and room enough: the common case, without a
		// waiter, its channel and its list element.
		b.take(r, n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{r: r, n: n, ready: make(chan error, 1)}
	elem := b.waiters.PushBack(w)
	holder := r.held > 0
	if holder {
		b.blocked++
	}
	b.grant()
	b.unstick()
	b.mu.Unlock()

	select {
	case err := <-w.ready:
		return err // granted at once (nil) or refused
	default:
	}
	// What is left of the call's queue timeout: its earlier waits (for a
	// slot, for its buffer's earlier growths) count, so that a call that
	// grows its buffer many times is not kept waiting many times as long.
	// (Only the goroutine reading the call's answer touches waited.)
	start := time.Now()
	t := time.NewTimer(r.wait - r.waited)
	defer t.Stop()
	defer func() { r.waited += time.Since(start) }()
	var err error
	select {
	case err = <-w.ready:
		return err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = b.fullError("none was released within " + r.wait.String())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case decided := <-w.ready:
		// Decided while we gave up: take the decision.
		return decided
	default:
	}
	b.waiters.Remove(elem)
	if holder {
		b.blocked--
	}
	// The call that left may be the one others queued behind.
	b.grant()
	b.unstick()
	return err
}

// release gives back all that r holds, and refuses what r still waits for:
// a wait of r's (an in-process handler's write, on its own goroutine) that
// were granted after its call ended would hold room nobody gives back.
func (b *ResponseBudget) release(r *reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.done = true
	for e := b.waiters.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*budgetWaiter); w.r == r {
			b.waiters.Remove(e)
			if r.held > 0 {
				b.blocked--
			}
			w.ready <- errors.New("the call has ended")
		}
		e = next
	}
	if r.held == 0 {
		return
	}
	b.used -= r.held
	r.held = 0
	delete(b.holders, r)
	b.grant()
	b.unstick()
}

// park marks r as done reading: its call has read all it will and keeps what
// it holds until release (see AnswerHold). It claims no more than it holds
// and cannot grow, so the safety check sees a holder that needs nothing and
// gives all it holds back (as it will, once its answer is written), not one
// that may still read up to its limit: a call kept after an answer of
// unknown length would otherwise make every other call look unsafe. It never
// waits, so while it is kept unstick does not refuse anyone: its release is
// the progress the others wait for.
func (b *ResponseBudget) park(r *reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.done = true
	r.claim = r.held
	b.grant()
}

// grant serves the waiters that can be served: calls already reading, in any
// order, since each one that finishes frees room; then new calls in arrival
// order, stopping at the first that cannot be, so that a large one is not
// starved by smaller ones behind it.
func (b *ResponseBudget) grant() {
	for again := true; again; {
		again = false
		for e := b.waiters.Front(); e != nil; e = e.Next() {
			w := e.Value.(*budgetWaiter)
			if w.r.held > 0 && b.grantable(w.r, w.n) {
				b.give(e)
				again = true
				break
			}
		}
	}
	for e := b.waiters.Front(); e != nil; {
		next := e.Next()
		w := e.Value.(*budgetWaiter)
		if w.r.held > 0 {
			e = next
			continue
		}
		if !b.grantable(w.r, w.n) {
			return
		}
		b.give(e)
		e = next
	}
}

func (b *ResponseBudget) give(e *list.Element) {
	w := b.waiters.Remove(e).(*budgetWaiter)
	if w.r.held > 0 {
		b.blocked--
	}
	b.take(w.r, w.n)
	w.ready <- nil
}

// take grants r n more bytes.
func (b *ResponseBudget) take(r *reservation, n int64) {
	r.held += n
	b.holders[r] = struct{}{}
	b.used += n
	b.peak = max(b.peak, b.used)
}

// grantable reports whether n more bytes for r fit, and leave the calls
// holding room able to finish one after another (the banker's safety check):
// taking them by what they still need, least first, each must fit in what is
// free once the ones before it have given theirs back.
func (b *ResponseBudget) grantable(wr *reservation, n int64) bool {
	free := b.size - b.used - n
	if free < 0 {
		return false
	}
	// When what is free covers the largest need, any call can finish first,
	// and free only grows as each gives back: safe without sorting (the
	// common case, a budget far larger than the answers in flight).
	most := wr.claim - wr.held - n
	for r := range b.holders {
		if r != wr {
			most = max(most, r.claim-r.held)
		}
	}
	if most <= free {
		return true
	}
	type call struct{ need, held int64 }
	calls := make([]call, 0, len(b.holders)+1)
	for r := range b.holders {
		if r != wr {
			calls = append(calls, call{r.claim - r.held, r.held})
		}
	}
	calls = append(calls, call{wr.claim - wr.held - n, wr.held + n})
	slices.SortFunc(calls, func(x, y call) int { return cmp.Compare(x.need, y.need) })
	for _, c := range calls {
		if c.need > free {
			return false
		}
		free += c.held
	}
	return true
}

// unstick refuses a call when every call holding room waits for more and none
// can be served: none of them can give any back until one gives up, and
// waiting out the queue timeout would stall them all. It refuses the holder
// that started waiting last, so the earliest are served first. The safety
// check keeps this from happening unless a body ran past its declared length.
// Call after grant.
func (b *ResponseBudget) unstick() {
	if len(b.holders) == 0 || b.blocked < len(b.holders) {
		return
	}
	for e := b.waiters.Back(); e != nil; e = e.Prev() {
		w := e.Value.(*budgetWaiter)
		if w.r.held == 0 {
			continue
		}
		b.waiters.Remove(e)
		b.blocked--
		b.refusals++
		w.ready <- b.fullError("every call holding part of it is waiting for more")
		return
	}
}

func (b *ResponseBudget) fullError(why string) error {
	return &limitError{fmt.Sprintf("the gateway is holding %s of upstream answers, its limit, and %s; try again", formatBytes(b.size), why)}
}

// Held reports the bytes the budget counts now, and how many calls are
// waiting for room: for tests and metrics.
func (b *ResponseBudget) Held() (bytes int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.waiters.Len()
}

// stats reports the bytes held now and at most, and how many calls unstick
// refused, for tests.
func (b *ResponseBudget) stats() (used, peak int64, refusals int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.refusals
}

// reservation is one call's share of a ResponseBudget. Its budget's lock
// guards held and claim.
type reservation struct {
	budget *ResponseBudget // nil: no shared bound
	weight int64           // bytes counted per byte read: 1 + AnswerCost.PerByte; 0 is 1
	read   int64           // bytes of answer it has room for (grow's n)
	wait   time.Duration   // the queue timeout: the call's waits, for a slot and for room, in all
	waited time.Duration   // of it, what the call has waited so far
	limit  int64           // the call's cap on its answer
	held   int64           // bytes reserved
	claim  int64           // bytes it may come to hold: see ResponseBudget
	done   bool            // released: an in-process handler that outlived its call gets no more
	send   bool            // Send's: its slot is counted in Client.SendsInFlight too

	// claimWeight, when more than weight, is the bytes claimed for each byte
	// it may read (see ResponseBudget): with the room it will ask for to
	// decode its answer (decodeClaim), so that the budget does not let more
	// calls read answers than can then be decoded.
	claimWeight int64
}

// grow makes the call's share room for n bytes of answer, claiming room
// for up to expect in all (raised to n when n is more). Each byte counts
// weight bytes: the answer, and what its writer will hold to write it.
func (r *reservation) grow(ctx context.Context, n, expect int64) error {
	if r == nil || r.budget == nil {
		return nil
	}
	w := max(r.weight, 1)
	if err := r.growTo(ctx, n*w, expect*max(w, r.claimWeight)); err != nil {
		return err
	}
	r.read = max(r.read, n)
	return nil
}

// ensure makes the call's share at least the room it has for its answer's
// bytes plus extra, for what it makes of the answer (a decoded copy). It
// waits for what it lacks, as a growth does, and gives nothing back.
func (r *reservation) ensure(ctx context.Context, extra int64) error {
	if r == nil || r.budget == nil {
		return nil
	}
	r.budget.mu.Lock()
	target := r.read + extra
	held := r.held
	r.budget.mu.Unlock()
	if target <= held {
		return nil
	}
	return r.growTo(ctx, target, target)
}

// settle makes the call's share what its answer really holds, once its
// result is made: the room it has for the answer's bytes (counted with
// their weight while it read), plus extra for what the writer will hold to
// write it. It gives back what it counted beyond that (the weight, the
// room to decode the answer), or waits for what it lacks, as a growth does.
func (r *reservation) settle(ctx context.Context, extra int64) error {
	if r == nil || r.budget == nil {
		return nil
	}
	b := r.budget
	b.mu.Lock()
	target := r.read + extra
	if target > r.held {
		b.mu.Unlock()
		return r.growTo(ctx, target, target)
	}
	if !r.done && target < r.held {
		b.used -= r.held - target
		r.held = target
		r.claim = min(r.claim, target)
		if target == 0 {
			delete(b.holders, r)
		}
		b.grant()
		b.unstick()
	}
	b.mu.Unlock()
	return nil
}

// growTo makes the call's share at least n bytes of the budget, claiming up
// to expect in all (raised to n when n is more).
func (r *reservation) growTo(ctx context.Context, n, expect int64) error {
	r.budget.mu.Lock()
	held := r.held
	r.claim = min(max(r.claim, expect), r.budget.size)
	r.budget.mu.Unlock()
	if n <= held {
		return nil
	}
	return r.budget.acquire(ctx, r, n-held)
}

func (r *reservation) release() {
	if r.budget != nil {
		r.budget.release(r)
	}
}

type reservationKey struct{}

// withReservation hands r to an in-process handler's response writer, which
// buffers the answer and so must count it (see bufferedResponse).
func withReservation(ctx context.Context, r *reservation) context.Context {
	return context.WithValue(ctx, reservationKey{}, r)
}

func reservationFrom(ctx context.Context) *reservation {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	return r
}

// firstChunk is the room a call reserves first when the upstream declares no
// length: most answers fit, and a large one doubles from there.
const firstChunk = 64 << 10

// decodeClaim is what a call whose answer will be decoded to be checked
// claims for each byte, besides the byte: decodedSize's estimate for a
// listing (TestDecodedSize). An answer that decodes to more still gets the
// room, as a body that runs past its declared length does.
const decodeClaim = 14

// countDecodeFrom is the least answer whose decoding is counted against the
// budget (see decodedSize). A smaller one decodes to a few dozen KiB at most,
// rarely more than a few hundred, for a moment, on the call's own goroutine:
// what is not counted is bounded by the calls in flight (MaxConcurrent),
// and a count would cost every small call a scan and a lock.
const countDecodeFrom = 4 << 10

// readBody reads at most limit bytes of r and reports whether there was more.
// Its buffer grows only with room reserved from res first (the buffer's whole
// capacity counts): to contentLength when it is known and within limit, else
// in doubling chunks. A declared length is a hint, not a promise: a body that
// goes on past it is read in chunks like any other (and claims up to limit
// from then on), and one that stops short keeps what it reserved until Call
// returns.
func readBody(ctx context.Context, r io.Reader, limit, contentLength int64, res *reservation) ([]byte, bool, error) {
	next, expect := min(int64(firstChunk), limit), limit
	if contentLength >= 0 && contentLength <= limit {
		next, expect = contentLength, contentLength
	}
	var buf []byte
	if next > 0 {
		if err := res.grow(ctx, next, expect); err != nil {
			return nil, false, err
		}
		buf = make([]byte, 0, next)
	}
	for {
		if len(buf) == cap(buf) {
			// Full: one byte more says whether to grow, before reserving.
			var one [1]byte
			n, err := io.ReadFull(r, one[:])
			if n == 0 {
				if err == io.EOF {
					return buf, false, nil
				}
				return nil, false, err
			}
			if int64(len(buf)) >= limit {
				return buf, true, nil
			}
			size := min(max(2*int64(cap(buf)), firstChunk), limit)
			if err := res.grow(ctx, size, limit); err != nil {
				return nil, false, err
			}
			nb := make([]byte, len(buf), size)
			copy(nb, buf)
			buf = append(nb, one[0])
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// limitMessage returns the tool-result text of err when a bound refused the
// call, or "" when err is something else.
func limitMessage(err error) string {
	var le *limitError
	if errors.As(err, &le) {
		return le.msg
	}
	return ""
}

// formatBytes writes n as "64 MiB", "512 KiB" or "100 bytes", whichever is
// exact.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
