package upstream

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestInProcessEndlessWriterIsStopped: an in-process handler that
// streams until its client goes away (io.Copy from a log tail, an export
// cursor, an event stream: it stops when Write fails, as it would on a real
// connection) never stops behind NewInProcess. bufferedResponse.Write, once
// the answer is cut at its cap, keeps reporting success, and handlerTransport
// runs the handler synchronously, so neither the cap nor the call's Timeout
// ends the call: Call never returns and the call's concurrency slot is never
// given back. A remote upstream would see its connection closed at the cap
// (readBody stops and the body is closed) and at the timeout.
func TestInProcessEndlessWriterIsStopped(t *testing.T) {
	doc := loadTestDoc(t, "results.yaml")
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	stopped := make(chan struct{})
	quit := make(chan struct{}) // closed when the test ends, so the spinning handler does not outlive it
	defer close(quit)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(stopped)
		w.Header().Set("Content-Type", "text/plain")
		for {
			select {
			case <-quit:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return // what a streaming handler does when its client is gone
			}
		}
	})
	c := NewInProcess(h, &ClientOptions{Timeout: 500 * time.Millisecond, MaxResponseBytes: 1 << 20})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Call(context.Background(), bindWith(t, doc, "getThing", &BindOptions{NoOutputSchema: true}), map[string]any{"id": 1}, Credentials{})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Errorf("Call has not returned 5s after its 500ms timeout: the handler's writes past the 1 MiB cap still succeed")
	}
	select {
	case <-stopped:
	case <-time.After(100 * time.Millisecond):
		t.Errorf("the in-process handler is still writing")
	}
}
