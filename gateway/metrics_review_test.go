package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestReviewPlaybookRunsCounted: an operator watches playbook runs on
// /metrics. A client runs demo/fast through the NoETL-compatible endpoint
// and through /mcp. metrics.playbookRun is never called by the runner or
// either front end, and the NoETL endpoint does not go through logCall, so
// mcpgate_playbook_runs_total stays empty and the NoETL call appears in no
// series at all. Each finished run should be counted once by playbook and
// outcome (issue 9 §5: "playbook runs by outcome").
func TestReviewPlaybookRunsCounted(t *testing.T) {
	_, _, srv := playbookGateway(t, &engine.Options{Step: 10 * time.Millisecond},
		&Playbooks{PollInterval: 100 * time.Millisecond, DedupWindow: -1, Items: []PlaybookItem{{Path: "demo/fast", Workload: map[string]any{"name": "world"}}}})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":"Ada"}}}`
	playbookRPC(t, srv.URL, "demo/fast", "", call)
	sendRaw(t, srv.URL+"/mcp", call, nil)
	mfs, body := scrape(t, srv.URL+"/metrics")
	var runs float64
	if mf := mfs["mcpgate_playbook_runs_total"]; mf != nil {
		for _, m := range mf.Metric {
			runs += m.GetCounter().GetValue()
		}
	}
	if runs != 2 {
		t.Errorf("mcpgate_playbook_runs_total sums to %v after two finished runs, want 2\n%s", runs, grepLines(body, "mcpgate_"))
	}
}

func grepLines(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
