package config

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// Playbooks makes a workflow engine's playbooks tools: each exposed
// playbook is a tool that starts a run through the execute route, polls the
// status route and returns the run's result (see package
// upstream/playbook). The routes default to what the engine's OpenAPI
// document marks with x-mcp-playbook: execute|status|cancel|catalog; routes
// set here win. With a catalog route, the playbooks are discovered from the
// engine, and Items refine or hide them.
//
//	playbooks:
//	  execute: POST /api/execute                  # body {"path","workload"} -> {"execution_id"}
//	  status: GET /api/executions/{id}/status     # -> {"completed": bool, "failed": bool, ...}
//	  cancel: POST /api/executions/{id}/cancel    # optional
//	  poll_interval: 1.5s
//	  timeout: 90s
//	  items:
//	    - path: demo/fast
//	      workload: {name: world}
type Playbooks struct {
	// Execute starts a run: "METHOD /path", sent {"path", "workload"},
	// answering {"execution_id"}. Default: the document's operation marked
	// x-mcp-playbook: execute.
	Execute string `yaml:"execute"`
	// Status reports a run: "METHOD /path/{id}". Default: the document's
	// x-mcp-playbook: status.
	Status string `yaml:"status"`
	// Cancel stops a run; optional. Without it, a run past its ceiling or
	// abandoned by its client goes on, and results say so. Default: the
	// document's x-mcp-playbook: cancel.
	Cancel string `yaml:"cancel"`
	// Catalog lists the engine's playbooks (GET, answering {"playbooks":
	// [{path, description, workload, metadata: {exposes_as_mcp}}]}); read
	// once at start-up, without credentials. Default: the document's
	// x-mcp-playbook: catalog; none: only Items are tools.
	Catalog string `yaml:"catalog"`
	// PollInterval is the time between status polls, and so between a
	// call's progress notifications. Default 1.5s; at least 100ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Timeout is a run's ceiling: past it the run is cancelled. Default
	// 90s; at most 24h.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRuns bounds this engine's runs in flight at once, task runs
	// included; a call that would start one more is answered isError
	// ("the engine is busy"; on the NoETL endpoint a JSON-RPC error naming
	// the bound) and nothing is sent to the engine. Default 256; must not
	// be negative.
	MaxRuns int `yaml:"max_runs"`
	// MaxRunsPerCaller bounds the runs in flight one caller started on
	// this engine, the same way. A caller is the verified token's subject.
	// Default: 32 when the gateway verifies tokens (auth); no bound
	// without auth, where a caller is only the Authorization header it
	// chose to send (set it to count by that header all the same; callers
	// that send none then share one count). Must not be negative.
	MaxRunsPerCaller int `yaml:"max_runs_per_caller"`
	// DedupWindow is how long a run that succeeded answers a re-sent call
	// (same caller, tool and arguments); while a run goes on, a re-send
	// attaches to it. A run that failed, timed out or was cancelled is
	// never handed to a new call, and calls with no credential at all
	// (every such caller looks the same) are never merged. Default 30s;
	// negative: off.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// Terminal says how a status is terminal. Default NoETL's "completed"
	// and "failed" booleans; for engines reporting {"status": "RUNNING" |
	// ...}: {pointer: /status, succeeded: [COMPLETED], failed: [FAILED]}.
	Terminal playbook.Terminal `yaml:"terminal"`
	// Items are the playbooks: with a catalog, they refine or hide the
	// engine's (matched by path); without one, they are all there is.
	Items []PlaybookItem `yaml:"items"`
}

// PlaybookItem is one playbook.
type PlaybookItem struct {
	// Path is the playbook's path on the engine. Required.
	Path string `yaml:"path" json:"path"`
	// Name is the tool's name. Default: the path made client-safe
	// ("demo/fast" → "demo_fast"), with the upstream's tool_prefix.
	Name string `yaml:"name" json:"name,omitempty"`
	// Description is what a model reads. Default: "Runs playbook PATH."
	Description string `yaml:"description" json:"description,omitempty"`
	// Workload holds the defaults of the run's inputs: its keys become the
	// tool's input schema, typed after their values; a null or empty value
	// is an optional, unconstrained input.
	Workload map[string]any `yaml:"workload" json:"workload,omitempty"`
	// ExposesAsMCP false hides the playbook everywhere: tools/list, audit,
	// lockfile, and the NoETL-compatible endpoint. Must be a boolean.
	// Default true.
	ExposesAsMCP *bool `yaml:"exposes_as_mcp" json:"-"`
	// Destructive sets the destructive hint. Default false: a playbook is
	// a write (not read-only, not idempotent), not a destruction.
	Destructive bool `yaml:"destructive" json:"-"`
	// Inputs refine workload keys: secret (the default is never shown),
	// description, enum.
	Inputs map[string]PlaybookInput `yaml:"inputs" json:"-"`
	// Task says whether a call must be a task: "optional" (the default: a
	// plain call runs to its end in one answer, a task-augmented one is a
	// task) or "required" (a client that can have a task must: at
	// 2025-11-25 a plain call is refused with -32601, at 2026-07-28 a
	// client that did not declare the tasks extension gets -32021; older
	// versions, stdio and the NoETL endpoint, which have no tasks, still
	// run it as a plain call).
	Task string `yaml:"task" json:"-"`
	// Source is the playbook's YAML source, as the engine's catalog gave
	// it (content or source); "" for a configured item. Its mcp: section
	// is read for prompts and resources (catalog's playbookmcp.go).
	Source string `yaml:"-" json:"-"`
}

// PlaybookInput refines one workload key (the config's form of a
// playbook file's "# ui:secret", "# ui:enum=[a,b]" and "# ui:description="
// directives).
type PlaybookInput struct {
	// Secret keeps the default out of the input schema (it is still sent
	// when the caller gives no value).
	Secret bool `yaml:"secret"`
	// Description is the input's description.
	Description string `yaml:"description"`
	// Enum lists the values allowed.
	Enum []any `yaml:"enum"`
}

// Exposed reports whether the item is a tool.
func (p *PlaybookItem) Exposed() bool { return p.ExposesAsMCP == nil || *p.ExposesAsMCP }

// strictToolName is compiled on first use (a playbook engine's catalog):
// its {1,64} made it 1 ms of every process's start.
var strictToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// Routes parses the routes set here (execute, status, cancel). A route
// left out is zero: it may still come from the engine's document, where
// the gateway looks for operations marked x-mcp-playbook.
func (p *Playbooks) Routes() (playbook.Routes, error) {
	var routes playbook.Routes
	for _, r := range []struct {
		key  string
		text string
		to   *playbook.Route
	}{{"execute", p.Execute, &routes.Execute}, {"status", p.Status, &routes.Status}, {"cancel", p.Cancel, &routes.Cancel}} {
		if r.text == "" {
			continue
		}
		rt, err := playbook.ParseRoute(r.text)
		if err != nil {
			return playbook.Routes{}, fmt.Errorf("playbooks.%s: %v", r.key, err)
		}
		*r.to = rt
	}
	for _, r := range []playbook.Route{routes.Status, routes.Cancel} {
		if !r.IsZero() && !strings.Contains(r.Path, "{id}") {
			return playbook.Routes{}, fmt.Errorf("playbooks: route %s has no {id}", r)
		}
	}
	return routes, nil
}

// validate checks the block.
func (p *Playbooks) validate() error {
	if _, err := p.Routes(); err != nil {
		return err
	}
	if p.Catalog != "" {
		rt, err := playbook.ParseRoute(p.Catalog)
		if err != nil {
			return fmt.Errorf("playbooks.catalog: %v", err)
		}
		if rt.Method != "GET" {
			return fmt.Errorf("playbooks.catalog: %s must be a GET route", p.Catalog)
		}
	}
	switch {
	case p.PollInterval < 0:
		return fmt.Errorf("playbooks.poll_interval: %s must not be negative", p.PollInterval)
	case p.PollInterval > 0 && p.PollInterval < playbook.MinPollInterval:
		return fmt.Errorf("playbooks.poll_interval: %s is below the floor of %s (each poll is a request to the engine)", p.PollInterval, playbook.MinPollInterval)
	case p.Timeout < 0:
		return fmt.Errorf("playbooks.timeout: %s must not be negative", p.Timeout)
	case p.Timeout > playbook.MaxTimeout:
		return fmt.Errorf("playbooks.timeout: %s is above the ceiling of %s", p.Timeout, playbook.MaxTimeout)
	case p.PollInterval > 0 && p.Timeout > 0 && p.PollInterval > p.Timeout:
		return fmt.Errorf("playbooks.poll_interval: %s is longer than the timeout %s", p.PollInterval, p.Timeout)
	case p.MaxRuns < 0:
		return fmt.Errorf("playbooks.max_runs: %d must not be negative", p.MaxRuns)
	case p.MaxRunsPerCaller < 0:
		return fmt.Errorf("playbooks.max_runs_per_caller: %d must not be negative", p.MaxRunsPerCaller)
	}
	if err := p.Terminal.Validate(); err != nil {
		return fmt.Errorf("playbooks.%v", err)
	}
	seen := map[string]bool{}
	for i, it := range p.Items {
		switch {
		case strings.TrimSpace(it.Path) == "":
			return fmt.Errorf("playbooks.items[%d]: path is required", i)
		case seen[it.Path]:
			return fmt.Errorf("playbooks.items[%d]: path %q is listed twice", i, it.Path)
		case it.Task != "" && it.Task != "optional" && it.Task != "required":
			return fmt.Errorf("playbooks.items[%d]: task %q must be optional or required", i, it.Task)
		case strings.ContainsFunc(it.Path, unicode.IsControl):
			// The path is in errors, logs and the endpoint's URL.
			return fmt.Errorf("playbooks.items[%d]: path %q has a control character", i, it.Path)
		case it.Name != "" && !strictToolName().MatchString(it.Name):
			return fmt.Errorf("playbooks.items[%d]: name %q is not a tool name clients accept (^[a-zA-Z0-9_-]{1,64}$)", i, it.Name)
		}
		seen[it.Path] = true
		for k := range it.Inputs {
			if _, ok := it.Workload[k]; !ok && it.Workload != nil {
				return fmt.Errorf("playbooks.items[%d] (%s): inputs: %q is not a workload key", i, it.Path, k)
			}
		}
	}
	return nil
}

// DefaultMaxRunsPerCaller is Playbooks.MaxRunsPerCaller's default when the
// gateway verifies tokens.
const DefaultMaxRunsPerCaller = 32

// validateUpstreamPlaybooks is Validate's part for u.Playbooks; verified
// says that Config.Auth is set.
func validateUpstreamPlaybooks(i int, u *Upstream, verified bool) error {
	if u.Playbooks == nil {
		return nil
	}
	if err := u.Playbooks.validate(); err != nil {
		return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
	}
	if u.Playbooks.MaxRunsPerCaller == 0 && verified {
		u.Playbooks.MaxRunsPerCaller = DefaultMaxRunsPerCaller
	}
	if u.OpenAPI == "" && u.Document == nil {
		// No document to find routes in, nor a base URL.
		switch {
		case u.BaseURL == "" && u.Handler == nil:
			return fmt.Errorf("upstreams[%d] (%s): a playbook engine without openapi needs base_url", i, u.Name)
		case u.Playbooks.Execute == "" || u.Playbooks.Status == "":
			return fmt.Errorf("upstreams[%d] (%s): without openapi, playbooks.execute and playbooks.status are required", i, u.Name)
		case len(u.Playbooks.Items) == 0 && u.Playbooks.Catalog == "":
			return fmt.Errorf("upstreams[%d] (%s): playbooks has no items and no catalog route", i, u.Name)
		}
	}
	return nil
}

// strictBoolKeys are the keys whose values must be YAML booleans: yaml.v3
// takes YAML 1.1's yes/no/on/off (even quoted) into a Go bool, and a
// "yes" that quietly means true is how a hidden playbook gets exposed (a
// "no" that means false, how hidden characters get served).
var strictBoolKeys = map[string]bool{"exposes_as_mcp": true, "destructive": true, "secret": true, "sanitize_text": true}

// checkStrictBools reports the first of strictBoolKeys whose value is not
// true or false, naming its line and key.
func checkStrictBools(n *yaml.Node, path string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkStrictBools(c, path); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if strictBoolKeys[k.Value] && v.Kind == yaml.ScalarNode && v.Tag != "!!bool" {
				return fmt.Errorf("line %d: %s: %q is not a boolean (true or false)", v.Line, p, v.Value)
			}
			if err := checkStrictBools(v, p); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := checkStrictBools(c, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
