package gateway

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// TestCancelPublishBoundsID: a notifications/cancelled that matches no call
// here is published to every replica; one whose request id is of any length
// up to max_body_bytes (4 MiB) must not be, or one client makes Redis send
// megabytes to every replica per POST (and past Redis' pubsub output
// buffer limit, 32 MiB by default, Redis drops every replica's
// subscription: no cancellation reaches any of them meanwhile). A usual id
// still goes out.
func TestCancelPublishBoundsID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newInflight()
		var mu sync.Mutex
		var got []int
		in.publish = func(_ [32]byte, id string) {
			mu.Lock()
			got = append(got, len(id))
			mu.Unlock()
		}
		r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer alice")
		in.cancel(r, strings.Repeat("x", 1<<20))
		in.cancel(r, strings.Repeat("y", maxSharedRequestID-1)) // "s" + the id: maxSharedRequestID bytes
		in.cancel(r, float64(7))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 {
			t.Fatalf("published ids of lengths %v, want the two short ones only", got)
		}
		for _, n := range got {
			if n > maxSharedRequestID {
				t.Errorf("published an id of %d bytes, over %d", n, maxSharedRequestID)
			}
		}
	})
}
