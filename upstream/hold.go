package upstream

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AnswerHold keeps the response-budget shares of the calls made under it
// until Release: a Call whose context carries a hold (WithAnswerHold) gives
// its share back when the hold is released, not when it returns.
//
// What a call reads stays in memory after Call returns — in the result, and
// then in the encoded answer — until the client has taken it. A server that
// releases the hold once the answer is written (or its write has failed)
// keeps everything a ResponseBudget bounds counted until then, so clients
// that do not read cannot make the gateway fetch more answers than the budget
// allows. Bound the writes too, or one client that stops reading holds its
// share for as long as its connection lives.
//
// What a server holds to write an answer — its encodings of the result —
// counts too, when it says what that is (Cost).
//
// The zero value is ready to use. Safe for concurrent use, but for Cost,
// which is set before any call is made under the hold.
type AnswerHold struct {
	// Cost is what the server holds, besides the result, while it writes
	// the answers of the calls made under the hold. Nil: nothing (a server
	// that writes an answer from the result's own bytes, through a buffer
	// of a fixed size).
	Cost *AnswerCost

	mu       sync.Mutex
	released bool
	first    *reservation   // a POST carries one call (batches are refused): no slice for it
	more     []*reservation // any further call made under the same context
}

type holdKey struct{}

// WithAnswerHold returns ctx carrying h.
func WithAnswerHold(ctx context.Context, h *AnswerHold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}

// AnswerHoldFrom returns the hold ctx carries, or nil.
func AnswerHoldFrom(ctx context.Context) *AnswerHold {
	h, _ := ctx.Value(holdKey{}).(*AnswerHold)
	return h
}

// keep takes r, whose call has read all it will, until Release, parked (see
// ResponseBudget.park). It reports false, keeping nothing, when h is nil or
// already released: the caller releases r itself.
func (h *AnswerHold) keep(r *reservation) bool {
	if h == nil || r.budget == nil {
		return false
	}
	h.mu.Lock()
	switch {
	case h.released:
		h.mu.Unlock()
		return false
	case h.first == nil:
		h.first = r
	default:
		h.more = append(h.more, r)
	}
	h.mu.Unlock()
	// A Release in between has released r already; parking it then is a
	// no-op.
	r.budget.park(r)
	return true
}

// Release gives back every share the hold keeps, and makes later calls under
// it give theirs back when they return. It may be called more than once.
func (h *AnswerHold) Release() {
	h.mu.Lock()
	first, more := h.first, h.more
	h.first, h.more, h.released = nil, nil, true
	h.mu.Unlock()
	if first != nil {
		first.release()
	}
	for _, r := range more {
		r.release()
	}
}

// An AnswerCost says what writing a call's answer holds in memory besides
// the result, so that a ResponseBudget counts it with the answer (issue 20:
// the budget counted upstream bytes while the answers' encodings, waiting
// for clients that did not read, held more than the bytes themselves). The
// result itself holds the answer's bytes and no more: its text content,
// structuredContent and binary content share them.
type AnswerCost struct {
	// PerByte bounds what the writer holds per byte of answer, for answers
	// whose encoding is no larger than that: while a call reads its
	// answer, it counts 1+PerByte bytes of the budget for each byte, so that
	// it does not fetch an answer whose encoding will not fit. Its answer is
	// cut at the budget's size divided by 1+PerByte.
	PerByte int64
	// Of returns what the writer holds while it writes res. Once the
	// result is made, the call's share becomes exactly its answer's bytes
	// plus Of(res): most often less than it counted while reading, and it
	// gives the rest back; when more (an answer that escapes to more than
	// PerByte bytes a byte), it waits for the difference as for any growth,
	// within what is left of its queue timeout, and is refused when no room
	// comes. Nil: nothing.
	Of func(res *mcp.CallToolResult) int64
}

// cost is h's Cost; nil when h is.
func (h *AnswerHold) cost() *AnswerCost {
	if h == nil {
		return nil
	}
	return h.Cost
}

// HoldAnswer counts, in b, an answer read outside Client (an MCP upstream's
// tools/call result, in data) with what decoding it takes (decodedSize),
// before it is decoded: waiting at most wait for room, then refused with the
// budget's "holding … of upstream answers" error, as a REST call is. Under
// ctx's AnswerHold the share is kept until the answer is written, and
// release gives back nothing; without one, release gives it back. An
// estimate over the whole budget takes the whole budget (one such answer at
// a time), as a REST answer's decoding does. A nil b counts nothing.
func (b *ResponseBudget) HoldAnswer(ctx context.Context, data []byte, wait time.Duration) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	r := &reservation{budget: b, wait: wait, limit: b.size}
	n := min(int64(len(data))+decodedSize(data), b.size)
	if err := r.growTo(ctx, n, n); err != nil {
		r.release()
		return nil, err
	}
	if AnswerHoldFrom(ctx).keep(r) {
		return func() {}, nil
	}
	return r.release, nil
}
