package gateway

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/internal/redistest"
)

// TestReloadResendKeepsRun: a playbook call whose client hung up lingers
// (its run is cancelled only if no request waits for it when the linger
// ends); a re-send that arrives after a reload goes to the new gateway. It
// must keep the run the old gateway started, as a re-send on another
// replica does — not start a second one, and not see it cancelled by the
// old gateway, which is retired (and closed, its shared-state store too)
// as soon as it serves no request.
func TestReloadResendKeepsRun(t *testing.T) {
	for _, backend := range []string{"redis", "memory"} {
		t.Run(backend, func(t *testing.T) {
			e := engine.New(&engine.Options{Step: 500 * time.Millisecond})
			cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
				Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond}}}}
			if backend == "redis" {
				cfg.State = StateConfig{Backend: "redis", Redis: RedisConfig{URL: redistest.Start(t).URL(), KeyPrefix: "reload:"}}
				cfg.Tasks = fleetTaskKey(t)
			}
			gw := func() *Gateway {
				g, err := New(t.Context(), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			f := NewFront(gw())
			t.Cleanup(f.Close)
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			url := srv.URL + "/mcp"

			conn := rawPOST(t, url, call(1, "demo_slow", `{"label":"x"}`), alice, false)
			waitFor(t, "the run to start", func() bool { return e.Counts().Started == 1 })
			f.Replace(gw())
			conn.Close() // the client goes; the old gateway then serves nothing
			waitFor(t, "the old gateway to serve nothing", func() bool { return f.InFlight() == 0 })

			_, got := post(t, url, call(1, "demo_slow", `{"label":"x"}`), alice)
			if !succeeded(got) {
				t.Errorf("the re-send after the reload: %s", got)
			}
			if c := e.Counts(); c.Started != 1 || c.Cancelled != 0 {
				t.Errorf("engine saw %+v; want one run, not cancelled", c)
			}
			waitFor(t, "the old gateway to be closed once its run ended", func() bool { return f.Retired() == 0 })
			// Within the dedup window the result is still the first run's.
			if _, got := post(t, url, call(2, "demo_slow", `{"label":"x"}`), alice); !succeeded(got) {
				t.Errorf("a re-send within the dedup window: %s", got)
			}
			if c := e.Counts(); c.Started != 1 {
				t.Errorf("engine started %d runs, want 1", c.Started)
			}
		})
	}
}
