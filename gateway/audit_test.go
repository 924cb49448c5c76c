package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
)

func catalogOf(t *testing.T, doc []byte, name string, origins bool) *Catalog {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, BaseURL: "http://127.0.0.1:1"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := BuildCatalog(context.Background(), cfg, &CatalogOptions{IncludeOrigin: origins, AuditTexts: origins})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOrchestratorForms checks both ways orchestrator-core declares its agent
// surface — tags, and x-mcp-annotations sets — give its hints and titles, with
// exactly the tagged operations exposed.
func TestOrchestratorForms(t *testing.T) {
	tests := map[string]struct {
		title                  string
		ro, destr, idem, large bool
	}{
		"search_processes":              {"Search Processes", true, false, true, false},
		"search_subscriptions":          {"Search Subscriptions", true, false, true, false},
		"create_process":                {"Create Process", false, false, false, false},
		"resume_process":                {"Resume Process", false, false, true, false},
		"abort_process":                 {"Abort Process", false, true, true, false},
		"list_products":                 {"List Products", true, false, true, false},
		"get_subscription_by_id":        {"Get Subscription By Id", true, false, true, false},
		"get_subscription_domain_model": {"Get Subscription Domain Model", true, false, true, true},
	}
	for _, form := range []string{"tags", "xmcp"} {
		t.Run(form, func(t *testing.T) {
			cat := catalogOf(t, readTestdata(t, "orchestrator-"+form+".yaml"), "doc.yaml", false)
			if len(cat.Tools) != len(tests) {
				t.Errorf("%d tools, want %d (delete_process and health are not exposed)", len(cat.Tools), len(tests))
			}
			for _, tool := range cat.Tools {
				w, ok := tests[tool.Tool.Name]
				if !ok {
					t.Errorf("unexpected tool %s", tool.Tool.Name)
					continue
				}
				a := tool.Tool.Annotations
				got := [5]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint, tool.Derived.Large}
				if got != [5]bool{w.ro, w.destr, w.idem, false, w.large} {
					t.Errorf("%s: ro,destr,idem,ow,large = %v, want %v", tool.Tool.Name, got, [5]bool{w.ro, w.destr, w.idem, false, w.large})
				}
				if tool.Tool.Title != w.title {
					t.Errorf("%s: title %q, want %q", tool.Tool.Name, tool.Tool.Title, w.title)
				}
				p := tool.Derived.Provenance
				if form == "xmcp" && !strings.HasPrefix(p.ReadOnly, "x-mcp-annotations:") {
					t.Errorf("%s: readOnly from %s, want the x-mcp-annotations set", tool.Tool.Name, p.ReadOnly)
				}
				if form == "tags" && tool.Tool.Name == "search_processes" && p.ReadOnly != "tag:agent-readonly" {
					t.Errorf("search_processes: readOnly from %s", p.ReadOnly)
				}
				if form == "tags" && tool.Tool.Name == "abort_process" && p.Destructive != "tag:agent-destructive" {
					t.Errorf("abort_process: destructive from %s", p.Destructive)
				}
			}
		})
	}
}

// TestAuditGolden pins the audit of the tag form in every format.
func TestAuditGolden(t *testing.T) {
	doc := readTestdata(t, "orchestrator-tags.yaml")
	cat := catalogOf(t, doc, "orchestrator-tags.yaml", true)
	facts := cat.Facts()
	for i := range facts {
		facts[i].Source = "orchestrator-tags.yaml" // not the temp dir
	}
	report := annotations.NewReport(facts, nil)
	for _, format := range []string{"table", "json", "markdown", "sarif"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := report.Write(&buf, format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "audit-orchestrator-tags."+format+".golden")
			if *update {
				os.WriteFile(golden, buf.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gateway -run AuditGolden -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("audit differs from %s; rerun with -update and review the diff", golden)
			}
		})
	}
	// Findings point at the operation's line in the YAML source.
	if len(report.Findings) == 0 || report.Findings[0].Line == 0 {
		t.Fatalf("findings without lines: %+v", report.Findings)
	}
	var sarif struct {
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string                `json:"name"`
					Rules []struct{ ID string } `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }    `json:"artifactLocation"`
						Region           struct{ StartLine int } `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	var buf bytes.Buffer
	report.Write(&buf, "sarif")
	if err := json.Unmarshal(buf.Bytes(), &sarif); err != nil {
		t.Fatal(err)
	}
	if sarif.Version != "2.1.0" || len(sarif.Runs) != 1 || sarif.Runs[0].Tool.Driver.Name != "mcpgate" ||
		len(sarif.Runs[0].Tool.Driver.Rules) != len(annotations.LintRules) || len(sarif.Runs[0].Results) != len(report.Findings) {
		t.Fatalf("SARIF shape: %s", buf.String())
	}
	r := sarif.Runs[0].Results[0]
	if r.RuleID != "MCPG004" || r.Level != "warning" || r.Locations[0].PhysicalLocation.Region.StartLine == 0 ||
		r.Locations[0].PhysicalLocation.ArtifactLocation.URI != "orchestrator-tags.yaml" {
		t.Errorf("first SARIF result: %+v", r)
	}
}

// TestAuditLint: a DELETE tagged read-only fails the audit.
func TestAuditLint(t *testing.T) {
	doc := strings.Replace(string(readTestdata(t, "orchestrator-tags.yaml")),
		"operationId: delete_process\n      summary: Delete a process\n      tags: [processes]",
		"operationId: delete_process\n      summary: Delete a process\n      tags: [processes, agent-exposed, agent-readonly]", 1)
	report := annotations.NewReport(catalogOf(t, []byte(doc), "doc.yaml", true).Facts(), nil)
	rules := map[string]bool{}
	for _, f := range report.Findings {
		if f.Tool == "delete_process" {
			rules[f.Rule] = true
		}
	}
	if !rules["MCPG002"] || !rules["MCPG005"] {
		t.Errorf("delete_process findings: %v, want MCPG002 and MCPG005", rules)
	}
	if report.ExitCode("error") != 1 || report.ExitCode("never") != 0 {
		t.Errorf("exit codes %d/%d", report.ExitCode("error"), report.ExitCode("never"))
	}
}

// TestLock: a spec edit that drops a destructive tag, or adds an exposed
// operation, drifts from the lock, and serve --lock holds those tools back.
func TestLock(t *testing.T) {
	orig := string(readTestdata(t, "orchestrator-tags.yaml"))
	lock := annotations.NewLock(catalogOf(t, []byte(orig), "doc.yaml", false).Facts())
	if d := annotations.Compare(lock, catalogOf(t, []byte(orig), "doc.yaml", false).Facts()); !d.Empty() {
		t.Fatalf("the same document drifted: %+v", d)
	}
	edited := strings.Replace(orig, "tags: [processes, agent-exposed, agent-destructive]", "tags: [processes, agent-exposed]", 1)
	edited = strings.Replace(edited, "operationId: health\n      summary: Health check\n      tags: [health]",
		"operationId: health\n      summary: Health check\n      tags: [health, agent-exposed]", 1)
	if edited == orig {
		t.Fatal("edit did not apply")
	}
	path := filepath.Join(t.TempDir(), "edited.yaml")
	os.WriteFile(path, []byte(edited), 0o600)
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, BaseURL: "http://127.0.0.1:1"}}}
	g, err := New(context.Background(), cfg, &Options{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	d := g.Drift()
	if len(d.Added) != 1 || d.Added[0] != "health" {
		t.Errorf("added = %v", d.Added)
	}
	if len(d.Changed) != 1 || d.Changed[0].Tool != "abort_process" || d.Changed[0].Field != "destructiveHint" || !d.Changed[0].Critical {
		t.Errorf("changed = %+v", d.Changed)
	}
	if g.Served() != len(lock.Tools)-1 {
		t.Errorf("served %d tools, want %d: abort_process and health held back", g.Served(), len(lock.Tools)-1)
	}
	var buf bytes.Buffer
	d.WriteText(&buf)
	if !strings.Contains(buf.String(), "+ health") || !strings.Contains(buf.String(), "~ abort_process: destructiveHint true → false [CRITICAL]") {
		t.Errorf("diff:\n%s", buf.String())
	}
}

// TestAuditCallPathFindings: an operation whose path template has a
// placeholder no parameter declares is skipped with a warning and an audit
// finding naming it; header parameters a model must never set are not
// arguments, and the audit says so.
func TestAuditCallPathFindings(t *testing.T) {
	doc := `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /items/{id}/parts/{part}:
    get:
      operationId: get_part
      tags: [agent-exposed]
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /items:
    get:
      operationId: list_items
      summary: List items
      tags: [agent-exposed]
      parameters:
        - {name: Cookie, in: header, schema: {type: string}}
        - {name: X-Forwarded-For, in: header, schema: {type: string}}
        - {name: X-Trace, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
`
	cat := catalogOf(t, []byte(doc), "doc.yaml", true)
	if len(cat.Tools) != 1 || cat.Tools[0].Tool.Name != "list_items" {
		t.Fatalf("tools: %d, want only list_items", len(cat.Tools))
	}
	if !slices.ContainsFunc(cat.Warnings, func(w string) bool { return strings.Contains(w, "{part}, which no path parameter declares") }) {
		t.Errorf("no warning names {part}: %q", cat.Warnings)
	}
	props := cat.Tools[0].Tool.InputSchema.(map[string]any)["properties"].(map[string]any)
	if _, ok := props["X-Trace"]; !ok || len(props) != 1 {
		t.Errorf("arguments %v, want only X-Trace", props)
	}
	report := annotations.NewReport(cat.Facts(), nil, cat.Skipped...)
	var got []string
	for _, f := range report.Findings {
		if f.Rule == "MCPG010" || f.Rule == annotations.RuleOperationSkipped {
			got = append(got, fmt.Sprintf("%s line %d: %s", f.Rule, f.Line, f.Message))
		}
	}
	want := []string{
		`MCPG011 line 5: GET /items/{id}/parts/{part} is not served: path template "/items/{id}/parts/{part}" has {part}, which no path parameter declares`,
		`MCPG010 line 11: list_items: header parameters Cookie, X-Forwarded-For are not arguments: a model must never set them`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings\n got %q\nwant %q", got, want)
	}
}

// TestLockStableUnderUnrelatedChanges: removing operations from Stripe's
// document changes how much room the catalog budget leaves the others, and
// so which tools are cut to fit, but never another tool's lock entry, which
// records what its own operation declares.
func TestLockStableUnderUnrelatedChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Stripe's catalog twice")
	}
	data, err := os.ReadFile(filepath.Join(corpusDir, "stripe-spec3-2022.json"))
	if err != nil {
		t.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
	}
	build := func(doc []byte) (*annotations.Lock, *Catalog) {
		cfg := &Config{Upstreams: []Upstream{{OpenAPI: "stripe.json", Document: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		cat, err := BuildCatalog(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return annotations.NewLock(cat.Facts()), cat
	}
	before, cat := build(data)
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	paths := doc["paths"].(map[string]any)
	removed := 0
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if strings.HasPrefix(p, "/v1/issuing/") || strings.HasPrefix(p, "/v1/terminal/") || strings.HasPrefix(p, "/v1/accounts") || strings.HasPrefix(p, "/v1/quotes") {
			delete(paths, p)
			removed++
		}
	}
	if removed < 40 {
		t.Fatalf("removed %d paths, want at least 40", removed)
	}
	edited, _ := json.Marshal(doc)
	after, cat2 := build(edited)
	t.Logf("%d paths removed; %d → %d tools; %d degraded before, %d after", removed, len(cat.Tools), len(cat2.Tools), countDegraded(cat), countDegraded(cat2))
	entries := map[string]annotations.LockedTool{}
	for _, e := range before.Tools {
		entries[e.Name] = e
	}
	same := 0
	for _, e := range after.Tools {
		if b, ok := entries[e.Name]; ok {
			same++
			if b != e {
				t.Errorf("%s: lock entry changed\nbefore %+v\nafter  %+v", e.Name, b, e)
			}
		}
	}
	if same == 0 {
		t.Fatal("no tool in common")
	}
}

func countDegraded(c *Catalog) int {
	n := 0
	for _, t := range c.Tools {
		if len(t.Binding.Degraded) > 0 {
			n++
		}
	}
	return n
}

// TestAuditSecurityAndOr: an operation that needs two schemes at once and
// one that accepts either must not read alike in any audit format.
func TestAuditSecurityAndOr(t *testing.T) {
	doc := `openapi: 3.0.3
info: {title: t, version: "1"}
components:
  securitySchemes:
    api_key: {type: apiKey, in: header, name: X-Key}
    oauth: {type: oauth2, flows: {clientCredentials: {tokenUrl: "https://idp.test/token", scopes: {read: r}}}}
paths:
  /both:
    get:
      operationId: both
      tags: [agent-exposed]
      security: [{api_key: [], oauth: [read]}]
      responses: {"200": {description: ok}}
  /either:
    get:
      operationId: either
      tags: [agent-exposed]
      security: [{api_key: []}, {oauth: [read]}]
      responses: {"200": {description: ok}}
  /optional:
    get:
      operationId: optional
      tags: [agent-exposed]
      security: [{}, {api_key: [], oauth: [read]}]
      responses: {"200": {description: ok}}
`
	report := annotations.NewReport(catalogOf(t, []byte(doc), "doc.yaml", false).Facts(), nil)
	for _, tt := range []struct{ format, both, either, optional string }{
		{"table", "api_key AND oauth[read]", "api_key OR oauth[read]", "anonymous OR (api_key AND oauth[read])"},
		{"markdown", "api_key AND oauth[read]", "api_key OR oauth[read]", "anonymous OR (api_key AND oauth[read])"},
		{"json",
			`"security": [[{"scheme": "api_key"},{"scheme": "oauth","scopes": ["read"]}]]`,
			`"security": [[{"scheme": "api_key"}],[{"scheme": "oauth","scopes": ["read"]}]]`,
			`"security": [[],[{"scheme": "api_key"},{"scheme": "oauth","scopes": ["read"]}]]`},
	} {
		var buf bytes.Buffer
		if err := report.Write(&buf, tt.format); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if tt.format == "json" {
			out = strings.Join(strings.Fields(out), " ")
			out = strings.NewReplacer("[ ", "[", " ]", "]", "{ ", "{", " }", "}", ", ", ",").Replace(out)
		}
		for _, want := range []string{tt.both, tt.either, tt.optional} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", tt.format, want, out)
			}
		}
	}
}

// TestAuditLinesForJSON: findings name the operation's line in JSON documents
// too (GitHub's, the demo's), and SARIF results carry the region.
func TestAuditLinesForJSON(t *testing.T) {
	doc := `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/items/{id}": {
      "delete": {
        "operationId": "remove_item",
        "tags": ["agent-exposed", "agent-readonly"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "gone"}}
      }
    }
  }
}`
	cat := catalogOf(t, []byte(doc), "doc.json", true)
	report := annotations.NewReport(cat.Facts(), nil)
	if len(report.Findings) == 0 {
		t.Fatal("no findings")
	}
	for _, f := range report.Findings {
		if f.Line != 6 {
			t.Errorf("%s: line %d, want 6 (the operation's key)", f.Rule, f.Line)
		}
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, "sarif"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"startLine": 6`) {
		t.Errorf("SARIF has no region with line 6:\n%s", buf.String())
	}
}

// TestNameClash: two upstreams that declare the same operationId (and one
// upstream renaming a tool onto a name in use) get a start-up warning naming
// both and the name each got, and a warning finding (MCPG019), not the
// MCPG007 note a merely invalid name gets.
func TestNameClash(t *testing.T) {
	cfg := &Config{Upstreams: []Upstream{
		{Name: "alpha", OpenAPI: "a.json", Document: []byte(frontDoc), BaseURL: "http://127.0.0.1:1", Auth: auth.Upstream{Mode: auth.ModeNone}},
		{Name: "beta", OpenAPI: "b.json", Document: []byte(frontDoc), BaseURL: "http://127.0.0.1:2", Auth: auth.Upstream{Mode: auth.ModeNone}, Rename: map[string]string{"nap": "wait"}},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := BuildCatalog(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	byOp := map[string]*Tool{}
	for _, tl := range cat.Tools {
		byOp[tl.Upstream+" "+tl.Operation.Path] = tl
	}
	betaThing, betaNap := byOp["beta /things/{id}"], byOp["beta /nap"]
	if byOp["alpha /things/{id}"].Tool.Name != "get_thing" || betaThing.Tool.Name == "get_thing" || betaThing.NameTakenBy != "alpha/get_thing" {
		t.Fatalf("names: alpha %s, beta %s (taken by %q)", byOp["alpha /things/{id}"].Tool.Name, betaThing.Tool.Name, betaThing.NameTakenBy)
	}
	wantWarnings := []string{
		fmt.Sprintf(`tool name "get_thing" is declared by upstreams alpha and beta: alpha (GET /things/{id}) keeps it, and beta (GET /things/{id}) is served as %q; rename one (rename, x-mcp-name or tool_prefix)`, betaThing.Tool.Name),
		fmt.Sprintf(`tool name "wait" is declared by upstreams alpha and beta: alpha (GET /wait) keeps it, and beta (GET /nap) is served as %q`, betaNap.Tool.Name),
	}
	for _, w := range wantWarnings {
		if !slices.ContainsFunc(cat.Warnings, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("no warning %q in %q", w, cat.Warnings)
		}
	}
	var clashes []string
	for _, f := range annotations.Lint(cat.Facts()) {
		switch f.Rule {
		case "MCPG019":
			if f.Severity != annotations.SeverityWarning {
				t.Errorf("%s is a %s", f.Rule, f.Severity)
			}
			clashes = append(clashes, f.Message)
		case "MCPG007":
			t.Errorf("a clash is also reported as MCPG007: %s", f.Message)
		}
	}
	slices.Sort(clashes)
	var want []string
	for _, tl := range []*Tool{betaThing, betaNap, byOp["beta /wait"]} {
		want = append(want, fmt.Sprintf(`%s: name %q is taken by alpha/%s: this tool is served as %q`, tl.Tool.Name, tl.SourceName, tl.SourceName, tl.Tool.Name))
	}
	slices.Sort(want)
	if !slices.Equal(clashes, want) {
		t.Errorf("MCPG019 findings:\n%q\nwant\n%q", clashes, want)
	}
}
