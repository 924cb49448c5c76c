package upstream

import (
	"context"
	"sync"
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
// The zero value is ready to use. Safe for concurrent use.
type AnswerHold struct {
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
