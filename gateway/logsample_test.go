package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/gateway/internal/logsample"
)

// TestFailureLogSampling reproduces issue 24's flood: an upstream that
// refuses every connection, and a burst of calls to it. Unsampled, each
// failed call writes its warning line; sampled, the burst writes the first
// one and, when its second is over, one line with the count of the rest.
// The lines are JSON and parse as such. Time is synctest's, so the burst
// is in one window however slow the machine.
func TestFailureLogSampling(t *testing.T) {
	const calls = 2000
	// Port 1: nothing listens there, as in the other tests of a refusing
	// upstream. A closed httptest server's port could be taken by another
	// package's test meanwhile, and the calls would then be answered.
	const deadURL = "http://127.0.0.1:1"
	for _, c := range []struct {
		name    string
		disable bool
		want    int // warning lines
	}{
		{"unsampled", true, calls},
		{"sampled", false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs syncBuffer
				logger := slog.New(slog.NewJSONHandler(&logs, nil))
				cfg := &Config{Upstreams: []Upstream{{Name: "down", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: deadURL}}}
				g, err := New(context.Background(), cfg, &Options{Logger: logger, DisableLogSampling: c.disable})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				<-g.Validated()
				h := g.Handler()
				body := rpc("1", "tools/call", `{"name":"get_thing","arguments":{"id":"1"}}`)
				for range calls {
					req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if !strings.Contains(w.Body.String(), "could not be reached") {
						t.Fatalf("answer %d: %s", w.Code, w.Body)
					}
				}
				time.Sleep(2 * time.Second) // the window ends: its summary is written
				synctest.Wait()
				var warnings, dropped int // of the calls
				for _, r := range logs.records(t) {
					if r["level"] != "WARN" || r["msg"] != "tool call" && r["msg"] != logsample.SummaryMessage {
						continue // the start-up's own warnings (no auth)
					}
					warnings++
					if r["msg"] == logsample.SummaryMessage {
						dropped = int(r["dropped"].(float64))
						if r["tool"] != "get_thing" || r["message"] != "tool call" || !strings.Contains(r["cause"].(string), "refused") {
							t.Errorf("summary %v", r)
						}
					}
				}
				t.Logf("%d calls to a refusing upstream: %d warning lines", calls, warnings)
				if warnings != c.want {
					t.Errorf("%d warning lines, want %d", warnings, c.want)
				}
				if !c.disable && dropped != calls-1 {
					t.Errorf("the summary counts %d dropped lines, want %d", dropped, calls-1)
				}
			})
		})
	}
}
