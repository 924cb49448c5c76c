package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var strictName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestCorpus builds the catalog of every real document in the shared corpus
// with every operation exposed, and checks what a strict client and an LLM
// provider need: valid, unique names; schemas that compile as JSON Schema
// 2020-12; no tool over its budget; the whole list within its budget. A
// document may instead be refused, with one line that names the problem.
func TestCorpus(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join(corpusDir, "*"))
	if len(docs) == 0 {
		t.Skipf("no corpus at %s: the shared corpus is not beside this clone", corpusDir)
	}
	refused := 0
	for _, path := range docs {
		name := filepath.Base(path)
		if !strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".yaml") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cat, err := BuildCatalog(context.Background(), cfg, nil)
			if err != nil {
				refused++
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, name) {
					t.Errorf("refusal is not one line naming the document: %q", msg)
				}
				t.Logf("refused: %v", err)
				return
			}
			seen := map[string]bool{}
			total := 0
			for _, tool := range cat.Tools {
				n := tool.Tool.Name
				if !strictName.MatchString(n) || seen[n] {
					t.Errorf("name %q invalid or repeated", n)
				}
				seen[n] = true
				raw, _ := json.Marshal(tool.Tool)
				total += len(raw)
				if len(raw) > DefaultMaxToolBytes {
					t.Errorf("%s: %d bytes, over the %d budget", n, len(raw), DefaultMaxToolBytes)
				}
				for kind, s := range map[string]any{"input": tool.Tool.InputSchema, "output": tool.Tool.OutputSchema} {
					if s == nil {
						continue
					}
					if err := compiles(s); err != nil {
						t.Errorf("%s: %s schema does not compile: %v", n, kind, err)
					}
				}
				// Strict clients (the TS SDK, the Inspector) reject the whole
				// tools/list when one root schema does not say "type": "object".
				if tool.Tool.InputSchema.(map[string]any)["type"] != "object" {
					t.Errorf("%s: input schema root is not \"type\": \"object\"", n)
				}
				if out, ok := tool.Tool.OutputSchema.(map[string]any); ok && out["type"] != "object" {
					t.Errorf("%s: output schema root is not \"type\": \"object\" (type %v)", n, out["type"])
				}
			}
			if total > DefaultMaxCatalogBytes {
				t.Errorf("tools/list is %d bytes, over %d", total, DefaultMaxCatalogBytes)
			}
			t.Logf("%d tools, %d KiB, %d warnings", len(cat.Tools), total>>10, len(cat.Warnings))
		})
	}
	if refused > 3 {
		t.Errorf("%d documents refused, want at most 3", refused)
	}
}

func compiles(schema any) error {
	raw, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource("mem:///s.json", doc); err != nil {
		return err
	}
	_, err = c.Compile("mem:///s.json")
	return err
}

// htmlTag finds the HTML elements Stripe and Asana write in descriptions.
var htmlTag = regexp.MustCompile(`(?i)</?(p|a|b|strong|em|i|code|pre|ul|ol|li|table|tr|td|th|br|div|span|h[1-6])(\s[^>]*)?/?>`)

// TestCorpusDescriptions: the descriptions a model reads — the tool's and
// every one inside its schemas — carry no HTML (Stripe and Asana write
// theirs in HTML), and an operation's summary is not lost beside its
// description.
func TestCorpusDescriptions(t *testing.T) {
	for _, name := range []string{"stripe-spec3-2022.json", "asana-3.0.yaml"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(corpusDir, name)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
			}
			cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cat, err := BuildCatalog(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var walk func(tool string, v any)
			bad := 0
			walk = func(tool string, v any) {
				switch x := v.(type) {
				case map[string]any:
					if d, ok := x["description"].(string); ok && htmlTag.MatchString(d) && bad < 5 {
						bad++
						t.Errorf("%s: HTML in a schema description: %.200q", tool, d)
					}
					for _, e := range x {
						walk(tool, e)
					}
				case []any:
					for _, e := range x {
						walk(tool, e)
					}
				}
			}
			summaries := 0
			for _, tool := range cat.Tools {
				if htmlTag.MatchString(tool.Tool.Description) && bad < 5 {
					bad++
					t.Errorf("%s: HTML in the description: %.200q", tool.Tool.Name, tool.Tool.Description)
				}
				if s := strings.TrimSpace(tool.Operation.Operation.Summary); s != "" {
					summaries++
					if !strings.HasPrefix(tool.Tool.Description, upstream.DescriptionMarkdown(s)) {
						t.Errorf("%s: description does not lead with the summary %q", tool.Tool.Name, s)
					}
				}
				walk(tool.Tool.Name, tool.Tool.InputSchema)
				walk(tool.Tool.Name, tool.Tool.OutputSchema)
			}
			t.Logf("%d tools, %d with a summary", len(cat.Tools), summaries)
		})
	}
}

// TestCatalogSameOnEveryStart builds the catalogs most exposed to the size
// budgets twice each and compares them byte for byte: stateless replicas
// behind one load balancer must serve the same tools/list. (GitHub's budget
// notes once varied between starts with Go's map order.)
func TestCatalogSameOnEveryStart(t *testing.T) {
	for _, name := range []string{"github-api-2020.json", "stripe-spec3-2022.json", "kubernetes-swagger-2.0.json"} {
		path := filepath.Join(corpusDir, name)
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s: the shared corpus is not beside this clone", path)
			}
			var first []byte
			for i := range 2 {
				cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				cat, err := BuildCatalog(context.Background(), cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := json.Marshal(cat.Listing())
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = raw
					continue
				}
				if !bytes.Equal(first, raw) {
					n := 0
					for n < min(len(first), len(raw)) && first[n] == raw[n] {
						n++
					}
					lo := max(n-200, 0)
					t.Errorf("two builds differ (%d vs %d bytes), first at byte %d:\n%s\nvs\n%s",
						len(first), len(raw), n, first[lo:min(n+200, len(first))], raw[lo:min(n+200, len(raw))])
				}
			}
		})
	}
}
