package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// gauge reads one sample of the gateway's registry: the value of name with
// label upstream=up, or of the histogram's count with outcome when name
// is a histogram.
func gatherValue(t *testing.T, g *Gateway, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	m := sample(byName, name, labels)
	switch {
	case m == nil:
		return 0
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}

// TestPlaybookCallsInFlight is issue 24's "the in-flight gauge reads 0 with
// 1000 playbook calls waiting": 1000 calls of a playbook that does not end
// read 1000 in mcpgate_tool_calls_in_flight (and in
// mcpgate_playbook_runs_in_flight), where the upstream's slots, which the
// gauge read alone, hold a handful at most; once the clients hang up both
// return to 0, and each run's duration is observed once.
func TestPlaybookCallsInFlight(t *testing.T) {
	const calls = 1000
	e := engine.New(&engine.Options{Step: time.Hour}) // demo/slow never ends
	g, url := serveGateway(t, &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{MaxRuns: calls, PollInterval: time.Second}}}}, nil)
	up := map[string]string{"upstream": "noetl"}
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: calls}}
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(rpc("1", "tools/call", `{"name":"demo_slow","arguments":{}}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	waitWithin(t, time.Minute, "1000 calls in flight", func() bool { return gatherValue(t, g, "mcpgate_tool_calls_in_flight", up) == calls })
	// A call is counted when it starts, its run once the runner has it: on
	// a loaded machine the last few are still on their way.
	waitWithin(t, time.Minute, "1000 runs in flight", func() bool { return gatherValue(t, g, "mcpgate_playbook_runs_in_flight", up) == calls })
	if slots := g.clients["noetl"].InFlight(); slots >= calls {
		t.Errorf("the upstream's slots hold %d: the test does not show what the slots alone miss", slots)
	} else {
		t.Logf("%d playbook calls waiting: gauge %d; the upstream's slots (what it read before) %d", calls, calls, slots)
	}
	hangUp()
	wg.Wait()
	waitWithin(t, time.Minute, "the calls to end", func() bool { return gatherValue(t, g, "mcpgate_tool_calls_in_flight", up) == 0 })
	waitWithin(t, time.Minute, "the runs to be cancelled", func() bool { return gatherValue(t, g, "mcpgate_playbook_runs_in_flight", up) == 0 })
	// Each run is timed once. Most end cancelled; under load (-race) a run
	// whose status polls all waited past queue_timeout for one of the 64
	// slots ends failed instead, which is timed all the same.
	var timed, cancelled float64
	for _, outcome := range []string{"succeeded", "failed", "timeout", "cancelled", "not_started"} {
		n := gatherValue(t, g, "mcpgate_playbook_run_duration_seconds", map[string]string{"playbook": "demo_slow", "outcome": outcome})
		timed += n
		if outcome == "cancelled" {
			cancelled = n
		}
	}
	if timed != calls || cancelled == 0 {
		t.Errorf("run durations observed: %v (%v cancelled), want %d", timed, cancelled, calls)
	}
}
