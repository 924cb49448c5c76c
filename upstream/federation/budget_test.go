package federation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/upstream"
)

// TestForwardAnswerCounted: a forwarded call's answer is counted in the
// gateway's response budget (max_response_memory) with what decoding it
// takes, before it is decoded, and kept counted under the call's
// AnswerHold until the answer is written. A hostile upstream's answer of
// nested empty lists (about 70 bytes of heap a byte once decoded; a
// red-team review's finding) takes the whole budget: while one is held, the
// next is refused busy within the queue timeout, neither decoded nor sent
// again; once the first is written, the next is served.
func TestForwardAnswerCounted(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"content":[],"structuredContent":{"a":[`)
	for b.Len() < 256<<10 {
		b.WriteString(`[],`)
	}
	b.WriteString(`[]]}}`)
	hostileResult := b.Bytes()
	var calls atomic.Int32
	srv := rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, hostileResult)
	})
	const size = 8 << 20
	budget := upstream.NewResponseBudget(size)
	u := newUpstream(t, Config{URL: srv.URL}, &Options{ResponseBudget: budget, QueueTimeout: 200 * time.Millisecond})
	forward := func(h *upstream.AnswerHold) error {
		_, err := u.Forward(upstream.WithAnswerHold(t.Context(), h), "", "2025-06-18", &ForwardParams{Name: "x"}, nil)
		return err
	}

	first := &upstream.AnswerHold{}
	if err := forward(first); err != nil {
		t.Fatal(err)
	}
	if held, _ := budget.Held(); held != size {
		t.Errorf("an answer of %d bytes that decodes to far more: %d bytes counted while it waits to be written, want the whole budget (%d)", len(hostileResult), held, size)
	}
	start := time.Now()
	err := forward(&upstream.AnswerHold{})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "of upstream answers, its limit") {
		t.Errorf("a second answer while the first is held: %v, want busy", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("refused after %v, not within the queue timeout", took)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the upstream got %d calls, want 2: an answer refused room is not sent again", n)
	}
	first.Release() // written
	if held, _ := budget.Held(); held != 0 {
		t.Errorf("%d bytes still counted once the answer was written", held)
	}
	last := &upstream.AnswerHold{}
	if err := forward(last); err != nil {
		t.Errorf("an answer after the first was written: %v", err)
	}
	last.Release()

	// A small answer counts little, and nothing once written.
	small := rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hi"}]}}`, id)
	})
	u2 := newUpstream(t, Config{URL: small.URL}, &Options{ResponseBudget: budget})
	h := &upstream.AnswerHold{}
	if _, err := u2.Forward(upstream.WithAnswerHold(t.Context(), h), "", "2025-06-18", &ForwardParams{Name: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	if held, _ := budget.Held(); held <= 0 || held > 4<<10 {
		t.Errorf("a small answer: %d bytes counted", held)
	}
	h.Release()
	if held, _ := budget.Held(); held != 0 {
		t.Errorf("%d bytes still counted once the small answer was written", held)
	}
}
