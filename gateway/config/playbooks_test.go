package config

import (
	"strings"
	"testing"
	"time"
)

func TestPlaybookConfig(t *testing.T) {
	good := `
upstreams:
  - name: noetl
    base_url: http://127.0.0.1:8082
    playbooks:
      execute: POST /api/execute
      status: GET /api/executions/{id}/status
      cancel: POST /api/executions/{id}/cancel
      poll_interval: 1.5s
      timeout: 90s
      items:
        - path: demo/fast
          name: demo_fast
          description: Says hello.
          workload: {name: world}
        - path: internal/tool
          exposes_as_mcp: false
`
	cfg, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := cfg.Upstreams[0].Playbooks
	routes, err := p.Routes()
	if err != nil {
		t.Fatal(err)
	}
	if p.PollInterval != 1500*time.Millisecond || p.Timeout != 90*time.Second || routes.Status.Path != "/api/executions/{id}/status" ||
		p.Items[1].Exposed() || !p.Items[0].Exposed() || p.Items[0].Workload["name"] != "world" {
		t.Errorf("parsed %+v", p)
	}
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"exposes_as_mcp must be a boolean", strings.Replace(good, "exposes_as_mcp: false", `exposes_as_mcp: "yes"`, 1),
			`line 17: upstreams[0].playbooks.items[1].exposes_as_mcp: "yes" is not a boolean (true or false)`},
		{"bare yes is not a boolean either", strings.Replace(good, "exposes_as_mcp: false", `exposes_as_mcp: yes`, 1),
			`line 17: upstreams[0].playbooks.items[1].exposes_as_mcp: "yes" is not a boolean`},
		{"unknown key", strings.Replace(good, "timeout: 90s", "timeout: 90s\n      ceiling: 9s", 1), `line 11: unknown key "ceiling"`},
		{"duration", strings.Replace(good, "timeout: 90s", "timeout: soon", 1), `line 10: upstreams[0].playbooks.timeout is "soon", not a duration such as "30s"`},
		{"bad route", strings.Replace(good, "execute: POST /api/execute", "execute: /api/execute", 1), `playbooks.execute: route "/api/execute" is not METHOD /path`},
		{"status without id", strings.Replace(good, "status: GET /api/executions/{id}/status", "status: GET /api/status", 1), `route GET /api/status has no {id}`},
		{"no routes without a document", strings.Replace(good, "      status: GET /api/executions/{id}/status\n", "", 1), `without openapi, playbooks.execute and playbooks.status are required`},
		{"no base url", strings.Replace(good, "    base_url: http://127.0.0.1:8082\n", "", 1), `a playbook engine without openapi needs base_url`},
		{"path twice", strings.Replace(good, "path: internal/tool", "path: demo/fast", 1), `playbooks.items[1]: path "demo/fast" is listed twice`},
		{"task neither optional nor required", strings.Replace(good, "path: internal/tool", "path: internal/tool\n          task: always", 1), `playbooks.items[1]: task "always" must be optional or required`},
		{"bad name", strings.Replace(good, "name: demo_fast", "name: demo.fast", 1), `name "demo.fast" is not a tool name clients accept`},
		{"negative poll", strings.Replace(good, "poll_interval: 1.5s", "poll_interval: -1s", 1), `playbooks.poll_interval: -1s must not be negative`},
		{"poll below the floor", strings.Replace(good, "poll_interval: 1.5s", "poll_interval: 1ns", 1), `upstreams[0] (noetl): playbooks.poll_interval: 1ns is below the floor of 100ms`},
		{"timeout above the ceiling", strings.Replace(good, "timeout: 90s", "timeout: 25h", 1), `upstreams[0] (noetl): playbooks.timeout: 25h0m0s is above the ceiling of 24h0m0s`},
		{"negative max_runs", strings.Replace(good, "timeout: 90s", "timeout: 90s\n      max_runs: -1", 1), `playbooks.max_runs: -1 must not be negative`},
		{"negative max_runs_per_caller", strings.Replace(good, "timeout: 90s", "timeout: 90s\n      max_runs_per_caller: -2", 1), `playbooks.max_runs_per_caller: -2 must not be negative`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestPlaybookRunCapDefaults: max_runs_per_caller is 32 when the gateway
// verifies tokens (a caller is a verified subject), none without.
func TestPlaybookRunCapDefaults(t *testing.T) {
	for _, verified := range []bool{false, true} {
		u := &Upstream{Name: "noetl", BaseURL: "http://127.0.0.1:1", Playbooks: &Playbooks{Execute: "POST /x", Status: "GET /x/{id}", Items: []PlaybookItem{{Path: "a"}}}}
		if err := validateUpstreamPlaybooks(0, u, verified); err != nil {
			t.Fatal(err)
		}
		want := 0
		if verified {
			want = DefaultMaxRunsPerCaller
		}
		if got := u.Playbooks.MaxRunsPerCaller; got != want {
			t.Errorf("verified=%v: max_runs_per_caller %d, want %d", verified, got, want)
		}
	}
}
