package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/internal/caller"
)

// TestAnonymousCancelFleetAsOneProcess pins the rule for callers without
// credentials (red-team finding 2 of issue 24; docs/state.md "Anonymous
// callers"): an anonymous notifications/cancelled reaches the anonymous
// calls of its request id on every replica, as it does in one process —
// the fleet adds nothing to what one process already allows — and never a
// call of a caller who sent an Authorization header, here or elsewhere.
func TestAnonymousCancelFleetAsOneProcess(t *testing.T) {
	anon := caller.Of(nil, nil)
	carol := caller.Of(nil, http.Header{"Authorization": {"Bearer carol"}})
	// One registry, as one process (or one replica receiving a published
	// cancellation) sees it: the anonymous cancel and its digest match the
	// anonymous call and only it.
	for _, how := range []string{"here", "published by another replica"} {
		t.Run(how, func(t *testing.T) {
			in := newInflight()
			var published []string
			in.publish = func(_ [32]byte, id string) { published = append(published, id) }
			ctxA, doneA := in.trackKey(t.Context(), inflightKey{caller: anon, id: "41"})
			defer doneA()
			ctxC, doneC := in.trackKey(t.Context(), inflightKey{caller: carol, id: "41"})
			defer doneC()
			var n int
			if how == "here" {
				n = in.cancelKey(inflightKey{caller: anon, id: "41"})
			} else {
				n = in.cancelDigest(in.digests.Digest(anon), "41")
			}
			if n != 1 || ctxA.Err() == nil || ctxC.Err() != nil {
				t.Errorf("anonymous cancel of 41: %d cancelled, anonymous call ended %v, carol's ended %v; want 1, true, false",
					n, ctxA.Err() != nil, ctxC.Err() != nil)
			}
			if len(published) != 0 {
				t.Errorf("a cancel that matched here was published: %v", published)
			}
		})
	}
	// Across replicas, end to end: an anonymous call on A is cancelled by
	// an anonymous cancellation sent to B, as it would be sent to A.
	f := newFleet(t, &engine.Options{Step: time.Hour}, Playbooks{PollInterval: 100 * time.Millisecond})
	conn := rawPOST(t, f.url[0], call(41, "demo_slow", `{"label":"anon"}`), http.Header{}, false)
	defer conn.Close()
	waitFor(t, "the anonymous run to start on A", func() bool { return f.e.Counts().Started == 1 })
	sendCancel(t, f.url[1], "", "41")
	waitFor(t, "the engine to see the anonymous run cancelled", func() bool { return f.e.Counts().Cancelled == 1 })
	if got := readAnswer(t, conn); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "cancel") {
		t.Errorf("the anonymous call on A: %s", got)
	}
}
