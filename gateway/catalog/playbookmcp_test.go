package catalog

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// TestPlaybookMCPCheck: every unresolved reference and duplicate of a
// section is one problem naming the field and the name; a sound section
// has none.
func TestPlaybookMCPCheck(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"sound", `
mcp:
  models: [{name: m}]
  tools: [{name: t, type: http}]
  resources: [{name: r, type: postgres}]
  prompts: [{name: p, template: "x"}]
  turns: [{name: one, model: m, user: [{use: "resource:r"}, {use: "prompt:p"}, {text: hi}], tools_allowed: [t]}]
`, nil},
		{"no section", "workload: {a: 1}\n", nil},
		{"unresolved", `
mcp:
  models: [{name: m}]
  tools: [{name: t}]
  turns: [{name: one, model: gpt, user: [{use: "resource:kb"}, {use: "prompt:nope"}, {use: "kb"}, {use: "model:m"}], tools_allowed: [t, search_docs]}]
`, []string{
			`mcp.turns[0].model names model "gpt", which mcp.models does not declare`,
			`mcp.turns[0].tools_allowed[1] names tool "search_docs", which mcp.tools does not declare`,
			`mcp.turns[0].user[0].use names resource "kb", which mcp.resources does not declare`,
			`mcp.turns[0].user[1].use names prompt "nope", which mcp.prompts does not declare`,
			`mcp.turns[0].user[2].use "kb" is not resource:NAME or prompt:NAME`,
			`mcp.turns[0].user[3].use "model:m" is not resource:NAME or prompt:NAME`,
		}},
		{"duplicates and blanks", `
mcp:
  tools: [{name: a}, {name: a}, {type: http}]
  resources: [{name: r}, {name: r}]
  prompts: [{name: p, template: x}, {name: p, template: y}, {name: q}]
`, []string{
			`mcp.tools[1].name "a" is declared twice in mcp.tools`,
			`mcp.tools[2] has no name`,
			`mcp.resources[1].name "r" is declared twice in mcp.resources`,
			`mcp.prompts[1].name "p" is declared twice in mcp.prompts`,
			`mcp.prompts[2].template prompt "q" has no template`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parsePlaybookMCP(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if m != nil {
				for _, p := range m.check() {
					got = append(got, p.field+" "+p.message)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	if _, err := parsePlaybookMCP("mcp: [1, 2]\n"); err == nil || !strings.Contains(err.Error(), "its mcp section does not decode") {
		t.Errorf("a list for mcp: %v", err)
	}
}

// TestPlaybookHTTPResource: only an http GET with an http(s) URL whose
// origin the playbook fixes is a resource; every other entry says why not.
func TestPlaybookHTTPResource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		e      mcpEntry
		reason string
	}{
		{"get", mcpEntry{Type: "http", Spec: map[string]any{"method": "GET", "url": "https://api.example.com/kb?q={{ input.q }}"}}, ""},
		{"no method", mcpEntry{Type: "http", Spec: map[string]any{"url": "https://api.example.com/kb/{{ input.id }}"}}, ""},
		{"endpoint", mcpEntry{Type: "http", Spec: map[string]any{"endpoint": "http://127.0.0.1:9/x"}}, ""},
		{"post", mcpEntry{Type: "http", Spec: map[string]any{"method": "post", "url": "https://x/y"}}, "spec is a POST, not a GET"},
		{"postgres", mcpEntry{Type: "postgres", Spec: map[string]any{"sql": "SELECT 1"}}, "a postgres resource runs inside the engine"},
		{"untyped", mcpEntry{}, "a (untyped) resource runs inside the engine"},
		{"no url", mcpEntry{Type: "http", Spec: map[string]any{}}, "its spec has no url"},
		{"expression", mcpEntry{Type: "http", Spec: map[string]any{"url": "https://x/{{ secrets.kb }}"}}, "its url:"},
		{"not http", mcpEntry{Type: "http", Spec: map[string]any{"url": "file:///etc/passwd"}}, "is not an http(s) URL"},
		{"placeholder origin", mcpEntry{Type: "http", Spec: map[string]any{"url": "{{ input.base }}/kb"}}, "is not an http(s) URL"},
		{"placeholder host", mcpEntry{Type: "http", Spec: map[string]any{"url": "https://{{ input.host }}/kb"}}, "in its URL's host"},
		{"placeholder port", mcpEntry{Type: "http", Spec: map[string]any{"url": "https://kb.example.com:{{ input.port }}/kb"}}, "in its URL's host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, reason := httpResource(tc.e)
			if tc.reason == "" {
				if r == nil {
					t.Fatalf("not a resource: %s", reason)
				}
				return
			}
			if r != nil || !strings.Contains(reason, tc.reason) {
				t.Errorf("got %v %q, want %q", r != nil, reason, tc.reason)
			}
		})
	}
}

// TestAddPlaybookMCP: a playbook's prompts are served under the
// playbook tool's name, rendered as configured prompts are, locked with
// their source; problems are warnings and MCPG022 findings naming the
// playbook; every tool and resource is accounted for.
func TestAddPlaybookMCP(t *testing.T) {
	c := &Catalog{}
	c.Prompts = []*Prompt{{Prompt: &mcp.Prompt{Name: "run_kb_taken"}, Source: "config"}}
	tool := &Tool{Tool: &mcp.Tool{Name: "run_kb"}}
	src := `
mcp:
  tools: [{name: search_docs, type: http, spec: {method: GET, url: "https://search/api?q={{ input.query }}"}}]
  resources:
    - {name: articles, type: postgres, spec: {sql: "SELECT 1"}}
    - {name: page, type: http, description: A KB page, spec: {url: "https://kb.example.com/pages/{{ input.id }}"}}
  prompts:
    - name: summarize
      template: |
        Summarize the following text:
        {{ input.text }}
    - {name: taken, template: x}
    - {name: bad, template: "{{ input.a | upper }}"}
  turns: [{name: t1, tools_allowed: [search_docs, missing]}]
`
	c.addPlaybookMCP(&config.Upstream{Name: "noetl"}, tool, config.PlaybookItem{Path: "kb/run", Source: src}, false)
	var names []string
	for _, p := range c.Prompts {
		names = append(names, p.Prompt.Name+" "+p.Source)
	}
	if strings.Join(names, ", ") != "run_kb_taken config, run_kb_summarize playbook:kb/run" {
		t.Errorf("prompts: %v", names)
	}
	text, err := c.Prompts[1].Render(map[string]string{"text": "NoETL"})
	if err != nil || text != "Summarize the following text:\nNoETL\n" {
		t.Errorf("render: %q %v", text, err)
	}
	if _, err := c.Prompts[1].Render(nil); err == nil || !strings.Contains(err.Error(), `argument "text" is required`) {
		t.Errorf("missing argument: %v", err)
	}
	if len(c.PlaybookResources) != 1 || c.PlaybookResources[0].Name != "run_kb_page" {
		t.Errorf("resources: %+v", c.PlaybookResources)
	}
	var findings []string
	for _, f := range c.Skipped {
		if f.Rule != annotations.RulePlaybookMCP || f.Source != "playbook kb/run" {
			t.Errorf("finding %+v", f)
		}
		findings = append(findings, f.Message)
	}
	want := []string{
		`playbook kb/run: mcp.turns[0].tools_allowed[1] names tool "missing", which mcp.tools does not declare`,
		`playbook kb/run: mcp.prompts[1].name serves as "run_kb_taken", a name another prompt has`,
		`playbook kb/run: mcp.prompts[2].template `,
	}
	if len(findings) != len(want) {
		t.Fatalf("findings:\n%s", strings.Join(findings, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(findings[i], want[i]) {
			t.Errorf("finding %d: %q, want %q…", i, findings[i], want[i])
		}
	}
	if len(c.Warnings) != len(want) {
		t.Errorf("warnings: %v", c.Warnings)
	}
	var parts []string
	for _, p := range c.PlaybookParts {
		parts = append(parts, p.Section+"."+p.Name+" → "+orDash(p.Served))
	}
	if got := strings.Join(parts, "; "); got != "tools.search_docs → -; resources.articles → -; resources.page → https://kb.example.com/pages/{{ input.id }}; prompts.summarize → run_kb_summarize; prompts.taken → -; prompts.bad → -" {
		t.Errorf("parts: %s", got)
	}
	locked := c.LockedPrompts(&config.Config{})
	if len(locked) != 2 || locked[1].Source != "playbook:kb/run" || locked[1].TemplateSHA256 == "" {
		t.Errorf("locked: %+v", locked)
	}
}
