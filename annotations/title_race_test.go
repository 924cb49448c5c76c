package annotations

import (
	"sync"
	"testing"
)

// TestTitleConcurrent: Title is called from catalog builds that run at the
// same time — a reload's New beside the current gateway's relist of an MCP
// upstream, two upstreams' relists — and x/text's Casers are stateful, not
// to be shared between goroutines. Run with -race; without it, a shared
// Caser can also give one goroutine's title another's letters.
func TestTitleConcurrent(t *testing.T) {
	ids := map[string]string{}
	for _, id := range []string{"get_workflow_by_id", "listCoreV1NamespacedPod", "straße_ﬁle_ΣΊΣΥΦΟΣ"} {
		ids[id] = Title(id) // alone: what each must read (TestTitle checks these)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				for id, want := range ids {
					if got := Title(id); got != want {
						t.Errorf("Title(%q) = %q, want %q", id, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
