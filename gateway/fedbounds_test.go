package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// TestFederatedMaxConcurrent: max_concurrent and queue_timeout bound an MCP
// upstream's calls as a REST upstream's, on the fast path and on go-sdk's:
// with one slot, one call is in flight while the others wait queue_timeout
// and are answered "busy", naming the bound, with nothing sent. (They were
// accepted and not applied: every caller's call went upstream at once.)
func TestFederatedMaxConcurrent(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast path", true: "go-sdk path"}[sdk], func(t *testing.T) {
			var inFlight, peak, sent atomic.Int32
			release := make(chan struct{})
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			up := newRawUpstream(t, func(method string, _ json.RawMessage) (any, []byte) {
				switch method {
				case "tools/list":
					return map[string]any{"tools": []any{map[string]any{"name": "slow", "inputSchema": map[string]any{"type": "object"}}}}, nil
				case "tools/call":
					sent.Add(1)
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					<-release
					inFlight.Add(-1)
					return map[string]any{"content": []any{}}, nil
				}
				return emptyLists(method), nil
			})
			cfg := &Config{Upstreams: []Upstream{{Name: "fs", MaxConcurrent: 1, QueueTimeout: 200 * time.Millisecond,
				MCP: &federation.Config{URL: up.srv.URL}}}}
			_, url := serveGateway(t, cfg, &Options{DisableFastPath: sdk})
			t.Cleanup(free) // first: a failing wait must not leave the calls held while the servers close
			const callers = 4
			var wg sync.WaitGroup
			var done atomic.Int32
			answers := make(chan string, callers)
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer done.Add(1)
					resp, body := post(t, url, call(i, "fs_slow", `{}`), http.Header{"Mcp-Protocol-Version": {"2025-06-18"}})
					answers <- resp.Status + " " + body
				}()
			}
			// The one admitted holds its slot until released: the others
			// are answered meanwhile.
			waitFor(t, "the callers past the one slot to be answered", func() bool { return done.Load() == callers-1 })
			free()
			wg.Wait()
			close(answers)
			if p := peak.Load(); p != 1 || sent.Load() != 1 {
				t.Errorf("max_concurrent 1: %d calls reached the upstream, %d at once", sent.Load(), p)
			}
			busy := 0
			for a := range answers {
				if strings.Contains(a, "upstream fs is busy: 1 calls in flight, none finished within 200ms; try again") && strings.Contains(a, `"isError":true`) {
					busy++
				}
			}
			if busy != callers-1 {
				t.Errorf("%d of %d answers say the upstream is busy", busy, callers-1)
			}
		})
	}
}
