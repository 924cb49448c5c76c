package catalog

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/config"
)

func TestParseDirectives(t *testing.T) {
	for _, tt := range []struct {
		name    string
		comment string
		def     any
		want    config.PlaybookInput
		problem string // a substring of the one problem expected; "" for none
	}{
		{"none", "", "x", config.PlaybookInput{}, ""},
		{"plain comment", "# the region we deploy to", "x", config.PlaybookInput{}, ""},
		{"secret", "# ui:secret", "s3cr3t", config.PlaybookInput{Secret: true}, ""},
		{"secret, then a plain comment", "# ui:secret # rotate monthly", "s3cr3t", config.PlaybookInput{Secret: true}, ""},
		{"no space after #", "#ui:secret", "s", config.PlaybookInput{Secret: true}, ""},
		{"description", "# ui:description=Whom to greet.", "world", config.PlaybookInput{Description: "Whom to greet."}, ""},
		{"description quoted, with a #", `# ui:description="Issue #12, fixed"`, "x", config.PlaybookInput{Description: "Issue #12, fixed"}, ""},
		{"string enum", "# ui:enum=[eu-west, us-east]", "eu-west", config.PlaybookInput{Enum: []any{"eu-west", "us-east"}}, ""},
		{"string enum keeps text", `# ui:enum=['1.0', 2.0, yes]`, "1.0", config.PlaybookInput{Enum: []any{"1.0", "2.0", "yes"}}, ""},
		{"integer enum", "# ui:enum=[1, 3, 5]", 3, config.PlaybookInput{Enum: []any{1, 3, 5}}, ""},
		{"number default takes integers", "# ui:enum=[0.5, 1]", 0.5, config.PlaybookInput{Enum: []any{0.5, 1}}, ""},
		{"enum with an empty default", "# ui:enum=[read, write]", "", config.PlaybookInput{Enum: []any{"read", "write"}}, ""},
		{"enum with a null default is typed as YAML", "# ui:enum=[1, two]", nil, config.PlaybookInput{Enum: []any{1, "two"}}, ""},
		{"enum, then a plain comment", "# ui:enum=[a, b] # see docs", "a", config.PlaybookInput{Enum: []any{"a", "b"}}, ""},
		{"three at once", "# ui:secret # ui:enum=[a,b] # ui:description=The key", "a",
			config.PlaybookInput{Secret: true, Enum: []any{"a", "b"}, Description: "The key"}, ""},
		{"credential is NoETL's, ignored quietly", "# ui:credential=pg_*", "x", config.PlaybookInput{}, ""},

		{"unknown directive", "# ui:hidden", "x", config.PlaybookInput{}, "unknown directive ui:hidden"},
		{"secret with a value", "# ui:secret=false", "x", config.PlaybookInput{}, "ui:secret takes no value"},
		{"enum without brackets", "# ui:enum=a,b", "a", config.PlaybookInput{}, "needs a list in brackets"},
		{"enum unclosed", "# ui:enum=[a,b", "a", config.PlaybookInput{}, "needs a list in brackets"},
		{"enum with junk after", "# ui:enum=[a,b] c", "a", config.PlaybookInput{}, "needs a list in brackets"},
		{"enum empty item", "# ui:enum=[a,,b]", "a", config.PlaybookInput{}, "empty item"},
		{"enum empty", "# ui:enum=[]", "a", config.PlaybookInput{}, "empty item"},
		{"enum type mismatch", "# ui:enum=[1, two]", 1, config.PlaybookInput{}, "item two is a string, the default a integer"},
		{"enum without the default", "# ui:enum=[a, b]", "c", config.PlaybookInput{}, "the default c is not among the ui:enum values"},
		{"enum without a value", "# ui:enum", "a", config.PlaybookInput{}, "needs a list in brackets"},
		{"empty description", "# ui:description=", "a", config.PlaybookInput{}, "ui:description needs text"},
		{"no name", "# ui:=x", "a", config.PlaybookInput{}, "is not a directive"},
		{"junk after a name", "# ui:secret please", "a", config.PlaybookInput{}, "expected = or the end"},
		{"a bad one spares the good", "# ui:enum=[x] # ui:secret", "a", config.PlaybookInput{Secret: true}, "not among"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := parseDirectives(tt.comment, tt.def)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseDirectives(%q) = %+v, want %+v", tt.comment, got, tt.want)
			}
			switch {
			case tt.problem == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tt.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tt.problem)):
				t.Errorf("problems %q, want one holding %q", problems, tt.problem)
			}
		})
	}
}

func TestSourceWorkload(t *testing.T) {
	src := `apiVersion: noetl.io/v1
kind: Playbook
workload:
  api_key: s3cr3t          # ui:secret
  region: eu-west          # ui:enum=[eu-west, us-east]
  retries: 3               # ui:enum=[1, three]
  target:                  # ui:description=Where it goes.
    host: db
  plain: x
workflow: []
`
	defaults, inputs, warnings := sourceWorkload("ops/deploy", src)
	wantDefaults := map[string]any{"api_key": "s3cr3t", "region": "eu-west", "retries": 3, "target": map[string]any{"host": "db"}, "plain": "x"}
	if !reflect.DeepEqual(defaults, wantDefaults) {
		t.Errorf("defaults %v, want %v", defaults, wantDefaults)
	}
	wantInputs := map[string]config.PlaybookInput{
		"api_key": {Secret: true},
		"region":  {Enum: []any{"eu-west", "us-east"}},
		"target":  {Description: "Where it goes."},
	}
	if !reflect.DeepEqual(inputs, wantInputs) {
		t.Errorf("inputs %+v, want %+v", inputs, wantInputs)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], `playbook ops/deploy: workload key retries: "ui:enum=[1, three]": ui:enum item three is a string`) ||
		!strings.HasSuffix(warnings[0], "; ignored") {
		t.Errorf("warnings %q", warnings)
	}

	for _, tt := range []struct{ name, src, warning string }{
		{"not YAML", "workload: [", "playbook p: its source is not YAML"},
		{"workload not a mapping", "workload: [a]", "playbook p: its source's workload is not a mapping"},
		{"no workload", "kind: Playbook", ""},
		{"not a mapping at all", "- a", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, in, w := sourceWorkload("p", tt.src)
			if d != nil || in != nil {
				t.Errorf("defaults %v, inputs %v", d, in)
			}
			if tt.warning == "" && len(w) > 0 || tt.warning != "" && (len(w) != 1 || !strings.Contains(w[0], tt.warning)) {
				t.Errorf("warnings %q, want %q", w, tt.warning)
			}
		})
	}

	// The example engine's sources say what its catalog entries say.
	for _, p := range engine.Playbooks() {
		d, _, w := sourceWorkload(p.Path, p.Content)
		if len(w) > 0 || !reflect.DeepEqual(d, p.Workload) {
			t.Errorf("%s: the source's workload %v (warnings %q), the entry's %v", p.Path, d, w, p.Workload)
		}
	}
}

// TestCatalogDirectives reads the example engine's catalog, whose entries
// carry their playbook's YAML source: the directives shape the input schema
// (internal/tool exposed by config here, to see its schema), the config's
// inputs win over them, and a secret's default appears nowhere.
func TestCatalogDirectives(t *testing.T) {
	cat := engineCatalog(t, &config.Playbooks{Items: []config.PlaybookItem{
		{Path: "internal/tool", ExposesAsMCP: new(true)},
		{Path: "demo/fail", Inputs: map[string]config.PlaybookInput{"reason": {Description: "From the config."}}},
	}})
	schemas := map[string]string{}
	for _, tl := range cat.Tools {
		raw, _ := json.Marshal(tl.Tool.InputSchema)
		schemas[tl.Tool.Name] = string(raw)
	}
	for name, want := range map[string]string{
		"internal_tool": `{"type":"object","properties":{"api_key":{"type":"string","description":"(secret: its default is configured and not shown)"},` +
			`"scope":{"description":"What the housekeeping may touch.","enum":["read","write"]}}}`,
		"demo_fast": `{"type":"object","properties":{"name":{"type":"string","default":"world","description":"Whom to greet."}}}`,
		"demo_fail": `{"type":"object","properties":{"reason":{"type":"string","default":"the demo fails on purpose","description":"From the config."}}}`,
	} {
		var a, b any
		json.Unmarshal([]byte(schemas[name]), &a)
		json.Unmarshal([]byte(want), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: input schema\n got %s\nwant %s", name, schemas[name], want)
		}
	}
	for name, s := range schemas {
		if strings.Contains(s, "s3cr3t") {
			t.Errorf("%s shows the secret default: %s", name, s)
		}
	}
	for _, w := range cat.Warnings {
		if strings.Contains(w, "ui:") {
			t.Errorf("warning about the engine's own directives: %s", w)
		}
	}
}

// TestCatalogDirectiveWarnings: a malformed directive in an engine's
// playbook source costs only that directive, with a warning naming the
// upstream, the playbook and the key.
func TestCatalogDirectiveWarnings(t *testing.T) {
	catalog := `{"playbooks": [{"path": "ops/deploy", "content": "workload:\n  region: eu-west  # ui:enum=eu-west\n  token: t0k3n  # ui:secret\n"}]}`
	h := http.NewServeMux()
	h.HandleFunc("GET /api/catalog", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, catalog)
	})
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "eng", BaseURL: "http://127.0.0.1:1", Handler: h, Playbooks: &config.Playbooks{
		Execute: "POST /api/execute", Status: "GET /api/executions/{id}/status", Catalog: "GET /api/catalog"}}}}
	cat, err := Build(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, w := range cat.Warnings {
		if strings.Contains(w, `eng: playbook catalog GET /api/catalog: playbook ops/deploy: workload key region: "ui:enum=eu-west": ui:enum needs a list in brackets`) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning for the malformed directive among %q", cat.Warnings)
	}
	tools := cat.Tools
	if len(tools) != 1 {
		t.Fatalf("%d tools, want ops_deploy", len(tools))
	}
	raw, _ := json.Marshal(tools[0].Tool.InputSchema)
	if want := `{"properties":{"region":{"default":"eu-west","type":"string"},"token":{"description":"(secret: its default is configured and not shown)","type":"string"}},"type":"object"}`; string(raw) != want {
		t.Errorf("schema %s\nwant %s", raw, want)
	}
}

// engineCatalog builds the catalog of the example engine, served in-process
// (its document's x-mcp-playbook routes and catalog), with pb's settings.
func engineCatalog(t *testing.T, pb *config.Playbooks) *Catalog {
	t.Helper()
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: engine.New(nil).Handler(), Playbooks: pb}}}
	cat, err := Build(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}
