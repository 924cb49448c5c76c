package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/upstream"
)

func TestParse(t *testing.T) {
	good := `
listen: 127.0.0.1:9999
max_response_memory: 33554432
upstreams:
  - name: orchestrator
    openapi: ./openapi.json
    base_url: http://127.0.0.1:9000
    expose_tags: [agent-exposed, mcp]
    timeout: 5s
    max_concurrent: 8
    queue_timeout: 2s
    auth: {mode: forward}
  - openapi: https://example.com/openapi.yaml
    expose_all: true
    auth: {mode: none}
`
	cfg, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	written := *cfg
	cfg, err = cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if written.Upstreams[1].Name != "" || written.Upstreams[1].Timeout != 0 || written.Listen != "127.0.0.1:9999" {
		t.Errorf("Resolve changed the written config: %+v", written.Upstreams[1])
	}
	if cfg.Listen != "127.0.0.1:9999" || len(cfg.Upstreams) != 2 {
		t.Fatalf("cfg = %+v", cfg)
	}
	u := cfg.Upstreams[0]
	if u.Timeout != 5*time.Second || u.BaseURL != "http://127.0.0.1:9000" || len(u.ExposeTags) != 2 {
		t.Errorf("upstream 0 = %+v", u)
	}
	if u2 := cfg.Upstreams[1]; u2.Name != "api2" || u2.Timeout != DefaultTimeout || !u2.ExposeAll {
		t.Errorf("defaults not applied: %+v", u2)
	}
	if cfg.MaxResponseMemory != 32<<20 || u.MaxConcurrent != 8 || u.QueueTimeout != 2*time.Second {
		t.Errorf("limits: max_response_memory %d, max_concurrent %d, queue_timeout %s", cfg.MaxResponseMemory, u.MaxConcurrent, u.QueueTimeout)
	}
	if u2 := cfg.Upstreams[1]; u2.MaxConcurrent != upstream.DefaultMaxConcurrent || u2.QueueTimeout != upstream.DefaultQueueTimeout {
		t.Errorf("limit defaults not applied: max_concurrent %d, queue_timeout %s", u2.MaxConcurrent, u2.QueueTimeout)
	}
	if def, err := (&Config{Upstreams: []Upstream{{OpenAPI: "a"}}}).Resolve(); err != nil {
		t.Error(err)
	} else if def.MaxResponseMemory != upstream.DefaultMaxResponseMemory {
		t.Errorf("max_response_memory default not applied: %d", def.MaxResponseMemory)
	}
}

// TestResolveLeavesConfig: Validate and Resolve change nothing a caller
// wrote, down to the upstreams, their playbooks block and the auth section
// (the parts resolving fills in); the resolved copy has the defaults, and
// resolving it again gives it back unchanged.
func TestResolveLeavesConfig(t *testing.T) {
	data := []byte(`
auth: {issuer: "https://issuer.example", audience: "https://gw.example/mcp"}
upstreams:
  - openapi: a.json
    base_url: http://127.0.0.1:1
    playbooks: {execute: POST /x, status: "GET /x/{id}", items: [{path: p}]}
`)
	cfg, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	pristine, _ := Parse(data)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, pristine) {
		t.Errorf("Validate/Resolve changed the config:\n got %+v\nwant %+v", cfg, pristine)
	}
	u := r.Upstreams[0]
	if r.Listen != DefaultListen || u.Name != "api" || u.Timeout != DefaultTimeout || u.Auth.Mode == "" ||
		u.Playbooks.MaxRunsPerCaller != DefaultMaxRunsPerCaller || r.Auth.List == "" || r.Metrics.Path != DefaultMetricsPath || r.Tasks.TTL != DefaultTaskTTL {
		t.Errorf("defaults not applied: %+v / %+v", r, u)
	}
	again, err := r.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, r) {
		t.Errorf("resolving a resolved config changed it:\n got %+v\nwant %+v", again, r)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown top key", "listen: x:1\nlistn: y\n", `line 2: unknown key "listn"`},
		{"unknown nested key", "upstreams:\n  - openapi: a\n    base_uri: b\n", `line 3: unknown key "base_uri"`},
		{"wrong type", "upstreams:\n  - openapi: a\n    expose_all: maybe\n", `line 3: upstreams[0].expose_all is "maybe", not true or false`},
		{"bad duration", "upstreams:\n  - openapi: a\n    timeout: soon\n", `line 3: upstreams[0].timeout is "soon", not a duration such as "30s"`},
		{"not a list", "upstreams: {openapi: a}\n", "line 1: upstreams is a mapping, not a list"},
		{"not an integer", "upstreams:\n  - openapi: a\n    max_concurrent: lots\n", `line 3: upstreams[0].max_concurrent is "lots", not an integer`},
		{"not a mapping", "upstreams:\n  - openapi: a\n    rename: [a, b]\n", "line 3: upstreams[0].rename is a list, not a mapping"},
		{"bad annotation", "upstreams:\n  - openapi: a\n    annotations: {x: {read_only: often}}\n", `line 3: upstreams[0].annotations.x.read_only is "often", not true or false`},
		{"no upstreams", "listen: 127.0.0.1:1\n", "at least one upstream"},
		{"no openapi", "upstreams:\n  - name: a\n", "openapi is required"},
		{"bad listen", "listen: nowhere\nupstreams:\n  - openapi: a\n", "not HOST:PORT"},
		{"duplicate name", "upstreams:\n  - {name: a, openapi: x}\n  - {name: a, openapi: y}\n", `name "a" is used twice`},
		{"both gates", "upstreams:\n  - {openapi: x, expose_all: true, expose_tags: [t]}\n", "exclude each other"},
		{"negative max_concurrent", "upstreams:\n  - {openapi: a, max_concurrent: -1}\n", "upstreams[0] (api): max_concurrent must not be negative"},
		{"negative queue_timeout", "upstreams:\n  - {openapi: a, queue_timeout: -1s}\n", "upstreams[0] (api): queue_timeout must not be negative"},
		{"bad queue_timeout", "upstreams:\n  - openapi: a\n    queue_timeout: later\n", `line 3: upstreams[0].queue_timeout is "later", not a duration such as "30s"`},
		{"negative max_response_memory", "max_response_memory: -1\nupstreams:\n  - openapi: a\n", "max_response_memory: must not be negative"},
		{"bad name style", "name_style: loose\nupstreams:\n  - openapi: a\n", "name_style"},
		{"bad catalog mode", "catalog: {mode: lazy}\nupstreams:\n  - openapi: a\n", `catalog.mode: "lazy" is not flat, search or auto`},
		{"negative threshold", "catalog: {mode: auto, search_threshold: -1}\nupstreams:\n  - openapi: a\n", "catalog.search_threshold: -1 is negative"},
		{"pinned twice", "catalog: {pinned: [a, b, a]}\nupstreams:\n  - openapi: a\n", `catalog.pinned: "a" is listed twice (items 0 and 2)`},
		{"pinned empty", "catalog: {pinned: [\"\"]}\nupstreams:\n  - openapi: a\n", "catalog.pinned[0]: empty tool name"},
		{"pinned unknown key", "catalog: {pin: [a]}\nupstreams:\n  - openapi: a\n", `unknown key "pin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				t.Fatal("want error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestApplyOverrides(t *testing.T) {
	cfg, _ := Parse([]byte("listen: 127.0.0.1:1\nupstreams:\n  - {openapi: file.json, expose_tags: [a]}\n"))
	err := cfg.Apply(Overrides{Listen: "127.0.0.1:2", OpenAPI: "other.json", BaseURL: "http://x", ExposeAll: true})
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams[0]
	if cfg.Listen != "127.0.0.1:2" || u.OpenAPI != "other.json" || u.BaseURL != "http://x" || !u.ExposeAll || u.ExposeTags != nil {
		t.Errorf("after Apply: %+v %+v", cfg, u)
	}

	empty := &Config{}
	if err := empty.Apply(Overrides{OpenAPI: "d.json", ExposeTags: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	if len(empty.Upstreams) != 1 || empty.Upstreams[0].ExposeTags[0] != "t" {
		t.Errorf("Apply on empty config: %+v", empty)
	}
	if err := (&Config{}).Apply(Overrides{BaseURL: "http://x"}); err == nil {
		t.Error("--upstream without --openapi: want error")
	}
	two := &Config{Upstreams: []Upstream{{OpenAPI: "a"}, {OpenAPI: "b"}}}
	if err := two.Apply(Overrides{OpenAPI: "c"}); err == nil {
		t.Error("--openapi with two upstreams: want error")
	}
}

// TestExampleConfigs keeps configs/ in step with the config format.
func TestExampleConfigs(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example configs")
	}
	for _, f := range files {
		cfg, err := Load(f)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, u := range cfg.Upstreams {
			if isFilePath(u.OpenAPI) {
				if _, err := os.Stat(u.OpenAPI); err != nil {
					t.Errorf("%s: upstream %s: %v", f, u.Name, err)
				}
			}
		}
	}
}

// TestMCPUpstream: an upstream with mcp is an MCP server: its prefix
// defaults to "<name>_" unless tool_prefix is given ("" included), a stdio
// child gets no credential, and the keys of an OpenAPI upstream are
// refused by name.
func TestMCPUpstream(t *testing.T) {
	cfg, err := Parse([]byte(`
upstreams:
  - name: fs
    mcp: {command: [npx, server-filesystem, /data], env: {ROOT: /data}}
    include: ["read_*", list_directory]
    annotations: {move_file: {destructive: true}}
  - name: conf
    mcp: {url: "http://127.0.0.1:3001/mcp", trust_hints: true}
    tool_prefix: ""
    auth: {mode: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	fs, conf := r.Upstreams[0], r.Upstreams[1]
	if fs.ToolPrefix != "fs_" || fs.Auth.Mode != "none" || fs.MCP.Timeout != 30*time.Second || !fs.IsMCPChild() {
		t.Errorf("fs resolved to prefix %q, auth %q, timeout %s", fs.ToolPrefix, fs.Auth.Mode, fs.MCP.Timeout)
	}
	if conf.ToolPrefix != "" || !conf.ToolPrefixSet || !conf.MCP.TrustHints || conf.IsMCPChild() {
		t.Errorf("conf resolved to prefix %q (set %v)", conf.ToolPrefix, conf.ToolPrefixSet)
	}
	if cfg.Upstreams[0].ToolPrefix != "" || cfg.Upstreams[0].MCP.Timeout != 0 {
		t.Error("Resolve changed the written config")
	}
	for _, tt := range []struct{ yaml, want string }{
		{"  - {name: x, mcp: {url: \"http://h/mcp\"}, openapi: a.json}", "upstreams[0] (x): mcp and openapi exclude each other"},
		{"  - {name: x, mcp: {url: \"http://h/mcp\"}, expose_all: true}", "upstreams[0] (x): mcp and expose_all exclude each other"},
		{"  - {name: x, mcp: {}}", "upstreams[0] (x): mcp: "},
		{"  - {name: x, mcp: {command: [srv]}, auth: {mode: forward}}", "upstreams[0] (x): auth.mode: a stdio child gets no credential (forward); give it what it needs in mcp.env"},
		{"  - {name: x, mcp: {url: \"http://h/mcp\"}, include: [\"\"]}", `upstreams[0] (x): include[0]: "" is not a tool-name glob`},
		{"  - {name: x, mcp: {url: \"http://h/mcp\"}, resources: [GET]}", "upstreams[0] (x): mcp and resources exclude each other"},
		{"  - {name: x, mcp: {url: \"http://h/mcp\"}, tool_prefix: a}\n  - {name: y, mcp: {url: \"http://i/mcp\"}}", "upstreams[0] (x): auth.mode is required when 2 remote upstreams are served"},
	} {
		cfg, err := Parse([]byte("upstreams:\n" + tt.yaml + "\n"))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %s…", tt.yaml, err, tt.want)
		}
	}
}

// TestMCPUpstreamTimeout: timeout, every upstream's key, bounds an MCP
// upstream's calls as mcp.timeout does (it was accepted and ignored); the
// two must agree when both are set; either way the resolved upstream holds
// one bound in both, and resolving it again reads it alike.
func TestMCPUpstreamTimeout(t *testing.T) {
	for _, tt := range []struct {
		keys string
		want time.Duration
		err  string
	}{
		{"", 30 * time.Second, ""},
		{"timeout: 300ms", 300 * time.Millisecond, ""},
		{"mcp: {url: \"http://h/mcp\", timeout: 2s}", 2 * time.Second, ""},
		{"timeout: 2s, mcp: {url: \"http://h/mcp\", timeout: 2s}", 2 * time.Second, ""},
		{"timeout: 300ms, mcp: {url: \"http://h/mcp\", timeout: 2s}", 0, "upstreams[0] (x): timeout (300ms) and mcp.timeout (2s) are one bound, a call's: set one of them"},
	} {
		u := "{name: x, mcp: {url: \"http://h/mcp\"}, " + tt.keys + "}"
		if strings.Contains(tt.keys, "mcp:") {
			u = "{name: x, " + tt.keys + "}"
		}
		cfg, err := Parse([]byte("upstreams:\n  - " + u + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := cfg.Resolve()
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: got %v, want %s", tt.keys, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.keys, err)
		}
		if got := r.Upstreams[0]; got.MCP.Timeout != tt.want || got.Timeout != tt.want {
			t.Errorf("%s: mcp.timeout %s, timeout %s; want both %s", tt.keys, got.MCP.Timeout, got.Timeout, tt.want)
		}
		if again, err := r.Resolve(); err != nil || again.Upstreams[0].MCP.Timeout != tt.want {
			t.Errorf("%s: resolved again: %v", tt.keys, err)
		}
	}
}

// TestCatalogMode: the catalog section's defaults, and when each mode
// lists in search mode.
func TestCatalogMode(t *testing.T) {
	cfg, err := Parse([]byte("upstreams:\n  - openapi: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Catalog; c.Mode != CatalogFlat || c.SearchThreshold != DefaultSearchThreshold || c.Search(10_000) {
		t.Errorf("defaults: %+v", c)
	}
	for _, tc := range []struct {
		c    CatalogConfig
		n    int
		want bool
	}{
		{CatalogConfig{Mode: CatalogSearch, SearchThreshold: 100}, 1, true},
		{CatalogConfig{Mode: CatalogAuto, SearchThreshold: 100}, 100, false},
		{CatalogConfig{Mode: CatalogAuto, SearchThreshold: 100}, 101, true},
		{CatalogConfig{Mode: CatalogFlat, SearchThreshold: 100}, 5000, false},
	} {
		if got := tc.c.Search(tc.n); got != tc.want {
			t.Errorf("%+v with %d tools: %v", tc.c, tc.n, got)
		}
	}
	many := "catalog:\n  pinned: [" + strings.Repeat("a,", MaxPinned) + "b]\nupstreams:\n  - openapi: a\n"
	if c, err := Parse([]byte(many)); err == nil {
		if _, err = c.Resolve(); err == nil || !strings.Contains(err.Error(), "at most 64") {
			t.Errorf("too many pinned: %v", err)
		}
	}
}

// TestResourceRules: an upstream's resources rules are parsed as include
// rules are, and a malformed one is a configuration error naming its place.
func TestResourceRules(t *testing.T) {
	cfg, err := Parse([]byte("upstreams:\n  - {name: pets, openapi: p.json, resources: [\"GET /pets/{petId}\", \"tag:catalog\", listPets]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rules, err := cfg.Upstreams[0].ResourceRules()
	if err != nil || len(rules) != 3 || rules[0].String() != "GET /pets/{petId}" {
		t.Errorf("ResourceRules = %v, %v", rules, err)
	}
	cfg, err = Parse([]byte("upstreams:\n  - {name: pets, openapi: p.json, resources: [\"GET /a\", \"FETCH /pets\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `upstreams[0] (pets): resources[1]: rule "FETCH /pets": FETCH is not an HTTP method`
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Validate = %v, want %s…", err, want)
	}
}
