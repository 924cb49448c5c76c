package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
)

func TestSelectConfig(t *testing.T) {
	const head = "upstreams:\n  - name: stripe\n    openapi: stripe.json\n"
	tests := []struct {
		name, yaml string
		wantErr    string // "" means valid
	}{
		{"include and exclude",
			head + "    include: [\"GET /v1/customers*\", tag:billing, listCharges]\n    exclude: [DELETE, \"* /v1/customers/{customer}/sources*\"]\n", ""},
		{"exclude beside expose_all",
			head + "    expose_all: true\n    exclude: [DELETE]\n", ""},
		{"exclude beside expose_tags",
			head + "    expose_tags: [mcp]\n    exclude: [DELETE]\n", ""},
		{"malformed include rule names upstream, list and rule",
			head + "    include: [\"GET /v1/customers*\", \"FETCH /v1/charges\"]\n",
			`upstreams[0] (stripe): include[1]: rule "FETCH /v1/charges": FETCH is not an HTTP method (want GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE or *)`},
		{"malformed exclude rule",
			head + "    exclude: [\"GET v1/customers\"]\n",
			`upstreams[0] (stripe): exclude[0]: rule "GET v1/customers": the path v1/customers must start with / or *`},
		{"empty rule",
			head + "    exclude: [\"\"]\n",
			`upstreams[0] (stripe): exclude[0]: rule "": empty`},
		{"include with expose_all",
			head + "    expose_all: true\n    include: [GET]\n",
			"upstreams[0] (stripe): expose_all and include exclude each other"},
		{"include with expose_tags",
			head + "    expose_tags: [mcp]\n    include: [GET]\n",
			"upstreams[0] (stripe): expose_tags and include exclude each other: include replaces the tag gate; write the tags as include rules (tag:NAME)"},
		{"unknown key stays an error",
			head + "    includes: [GET]\n", `line 4: unknown key "includes"`},
		{"a rule list, not a string",
			head + "    include: GET /v1\n", `line 4: upstreams[0].include is "GET /v1", not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.yaml))
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v\nwant it to start %q", err, tt.wantErr)
			}
		})
	}
}

// TestSelectFlagsReplaceInclude: --all and --expose-tag replace the file's
// gate, include rules too; the exclude rules stay.
func TestSelectFlagsReplaceInclude(t *testing.T) {
	for _, o := range []Overrides{{ExposeAll: true}, {ExposeTags: []string{"mcp"}}} {
		cfg := &Config{Upstreams: []Upstream{{OpenAPI: "x.json", Include: []string{"GET"}, Exclude: []string{"DELETE"}}}}
		if err := cfg.Apply(o); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if u := cfg.Upstreams[0]; u.Include != nil || !slices.Equal(u.Exclude, []string{"DELETE"}) {
			t.Errorf("%+v: include %q exclude %q, want none and [DELETE]", o, u.Include, u.Exclude)
		}
	}
}

// selectCatalog builds testdata/select.yaml with include and exclude rules.
func selectCatalog(t *testing.T, include, exclude []string) *Catalog {
	t.Helper()
	cfg := &Config{Upstreams: []Upstream{{
		Name: "shop", OpenAPI: filepath.Join("testdata", "select.yaml"), BaseURL: "http://127.0.0.1:1",
		Include: include, Exclude: exclude,
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := BuildCatalog(context.Background(), cfg, &CatalogOptions{IncludeOrigin: true})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func served(cat *Catalog) []string {
	var out []string
	for _, t := range cat.Tools {
		out = append(out, t.Operation.Method+" "+t.Operation.Path)
	}
	return out
}

func TestIncludeTestdata(t *testing.T) {
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"default gate", nil, nil,
			[]string{"GET /v1/charges", "POST /v1/charges/{charge}/refund", "DELETE /v1/customers/{customer}"}},
		{"customer reads", []string{"GET /v1/customers*"}, nil,
			// x-mcp-exposed true stays; {note} is undeclared, so skipped;
			// /secrets says x-mcp-exposed false; * crosses "_" too.
			[]string{"POST /v1/charges/{charge}/refund", "GET /v1/customers", "GET /v1/customers/{customer}", "GET /v1/customers_export"}},
		{"inside the path only; x-mcp-exposed true wins over exclude", []string{"GET /v1/customers", "GET /v1/customers/*"}, []string{"POST"},
			[]string{"POST /v1/charges/{charge}/refund", "GET /v1/customers", "GET /v1/customers/{customer}"}},
		{"by operationId and tag, less a method", []string{"list*", "tag:agent-exposed"}, []string{"DELETE"},
			[]string{"GET /v1/charges", "POST /v1/charges/{charge}/refund", "GET /v1/customers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := served(selectCatalog(t, tt.include, tt.exclude)); !slices.Equal(got, tt.want) {
				t.Errorf("served\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

// TestExplainGolden: `tools --explain` and `audit --explain` in every format
// that takes it, for a document with a line for each kind of reason.
func TestExplainGolden(t *testing.T) {
	cat := selectCatalog(t, []string{"GET /v1/customers*", "tag:agent-exposed"}, []string{"DELETE"})
	if n := len(cat.Selection); n != 9 {
		t.Fatalf("%d operations explained, want all 9 of the document", n)
	}
	facts := cat.Facts()
	for i := range facts {
		facts[i].Source = "select.yaml" // not the full path
	}
	skipped := slices.Clone(cat.Skipped)
	for i := range skipped {
		skipped[i].Source = "select.yaml"
	}
	report := &ExplainedReport{Report: annotations.NewReport(facts, nil, skipped...), Selection: cat.Selection}
	outputs := map[string]func(*bytes.Buffer) error{
		"tools.table":    func(b *bytes.Buffer) error { return cat.ExplainListing().WriteTable(b) },
		"audit.table":    func(b *bytes.Buffer) error { return report.Write(b, "table") },
		"audit.json":     func(b *bytes.Buffer) error { return report.Write(b, "json") },
		"audit.markdown": func(b *bytes.Buffer) error { return report.Write(b, "markdown") },
	}
	for name, write := range outputs {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := write(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "explain-select."+name+".golden")
			if *update {
				os.WriteFile(golden, buf.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gateway -run ExplainGolden -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("output differs from %s; rerun with -update and review the diff:\n%s", golden, buf.Bytes())
			}
		})
	}
	if err := report.Write(&bytes.Buffer{}, "sarif"); err == nil || !strings.Contains(err.Error(), "--explain") {
		t.Errorf("sarif with --explain: err = %v, want a refusal naming --explain", err)
	}

	// In JSON, each operation's reason is a field; checked here apart from
	// the golden file, so that an -update cannot bless a wrong reason.
	var buf bytes.Buffer
	report.Write(&buf, "json")
	var got struct {
		Tools     []json.RawMessage `json:"tools"`
		Selection []Selection       `json:"selection"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{ // operation → tool, reason
		"GET /v1/charges":                           {"listCharges", "included by rule `tag:agent-exposed` of upstream shop"},
		"POST /v1/charges/{charge}/refund":          {"refundCharge", "included by x-mcp-exposed: true"},
		"GET /v1/customers":                         {"listCustomers", "included by rule `GET /v1/customers*` of upstream shop"},
		"POST /v1/customers":                        {"", "excluded: no include rule of upstream shop matches"},
		"GET /v1/customers/{customer}":              {"getCustomer", "included by rule `GET /v1/customers*` of upstream shop"},
		"DELETE /v1/customers/{customer}":           {"", "excluded by rule `DELETE` of upstream shop"},
		"GET /v1/customers/{customer}/notes/{note}": {"", `skipped: path template "/v1/customers/{customer}/notes/{note}" has {note}, which no path parameter declares`},
		"GET /v1/customers/{customer}/secrets":      {"", "excluded by x-mcp-exposed: false"},
		"GET /v1/customers_export":                  {"exportCustomers", "included by rule `GET /v1/customers*` of upstream shop"},
	}
	if len(got.Selection) != len(want) || len(got.Tools) != 5 {
		t.Fatalf("%d selection entries and %d tools, want %d and 5", len(got.Selection), len(got.Tools), len(want))
	}
	for _, s := range got.Selection {
		key := s.Method + " " + s.Path
		if w := want[key]; s.Tool != w[0] || s.Reason != w[1] || s.Upstream != "shop" {
			t.Errorf("%s: tool %q, reason %q; want %q, %q", key, s.Tool, s.Reason, w[0], w[1])
		}
		if s.Selected != (s.Tool != "" || strings.HasPrefix(s.Reason, "skipped")) {
			t.Errorf("%s: selected = %v with reason %q", key, s.Selected, s.Reason)
		}
	}
}

// TestIncludeStripe is the acceptance test: `include: ["GET /v1/customers*"]`
// on Stripe serves exactly the customer reads — every operation whose method
// is GET and whose path starts with /v1/customers, as read here straight from
// the JSON document, apart from tagging.
func TestIncludeStripe(t *testing.T) {
	path := filepath.Join(corpusDir, "stripe-spec3-2022.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("Stripe's document is not in the shared corpus (%v): the acceptance test needs %s", err, path)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for p, item := range doc.Paths {
		if _, ok := item["get"]; ok && strings.HasPrefix(p, "/v1/customers") {
			want = append(want, "GET "+p)
		}
	}
	slices.Sort(want)
	if len(want) < 10 {
		t.Fatalf("only %d customer reads in the document: the test would prove little", len(want))
	}

	cfg := &Config{Upstreams: []Upstream{{
		Name: "stripe", OpenAPI: path, BaseURL: "http://127.0.0.1:1",
		Include: []string{"GET /v1/customers*"},
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := BuildCatalog(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := served(cat)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("served %d tools, want the %d customer reads:\n got  %q\n want %q", len(got), len(want), got, want)
	}
	for _, s := range cat.Selection {
		if s.Tool != "" && s.Reason != "included by rule `GET /v1/customers*` of upstream stripe" {
			t.Errorf("%s %s: reason %q", s.Method, s.Path, s.Reason)
		}
	}
	t.Logf("%d of %d operations served", len(got), len(cat.Selection))
}
