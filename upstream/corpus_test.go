package upstream

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// corpusDir holds the real public OpenAPI documents shared beside the repo.
const corpusDir = "../../shared/corpus"

// hostileValues are path arguments that try to leave the operation's path.
var hostileValues = []any{"..", ".", "../../admin", "%2e%2e", "a/../../b", "..;/x", "é/ ?#", `..\..`, []any{"..", "."}}

// TestCorpusPaths builds, for every operation of every corpus document, a
// request whose path arguments are all hostile, and checks what FuzzPathTemplate
// checks: after RFC 3986 normalisation the path still has the template's
// literal prefix and segment count, or the request is refused.
func TestCorpusPaths(t *testing.T) {
	base, _ := url.Parse("http://upstream.test/v1")
	eachCorpusDocument(t, func(t *testing.T, doc *Document) {
		templates, sent, refused := 0, 0, 0
		for tmpl, item := range doc.T.Paths.Map() {
			for method, op := range item.Operations() {
				b, err := Bind(method, tmpl, item, op, &BindOptions{NoOutputSchema: true})
				if err != nil {
					continue
				}
				templates++
				for _, v := range hostileValues {
					args := map[string]any{}
					for _, p := range b.params {
						if p.in == openapi3.ParameterInPath {
							args[p.arg] = v
						}
					}
					req, err := b.Request(context.Background(), base, args)
					if err != nil {
						refused++
						continue
					}
					sent++
					p := req.URL.EscapedPath()
					prefix := "/v1" + escapeLiteral(tmpl[:strings.IndexByte(tmpl+"{", '{')])
					norm := removeDotSegments(decodeUnreserved(p))
					if !strings.HasPrefix(p, prefix) || norm != decodeUnreserved(p) ||
						strings.Count(norm, "/") != strings.Count("/v1"+literals(tmpl), "/") {
						t.Fatalf("%s %s with %q: path %q (normalised %q) left the template", method, tmpl, v, p, norm)
					}
				}
			}
		}
		t.Logf("%d operations, %d requests built, %d refused", templates, sent, refused)
	})
}

// eachCorpusDocument runs f in a subtest for every document of the shared
// corpus that parses, and skips t when the corpus is not beside this clone.
func eachCorpusDocument(t *testing.T, f func(t *testing.T, doc *Document)) {
	docs, _ := filepath.Glob(filepath.Join(corpusDir, "*"))
	if len(docs) == 0 {
		t.Skipf("no corpus at %s: the shared corpus is not beside this clone", corpusDir)
	}
	for _, path := range docs {
		if !strings.HasSuffix(path, ".json") && !strings.HasSuffix(path, ".yaml") {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := ParseDocument(context.Background(), data)
			if err != nil {
				t.Skipf("refused: %v", err) // TestCorpus (gateway) checks refusals
			}
			f(t, doc)
		})
	}
}

// TestCorpusDegrade checks Bind's degraded input schemas against the budget
// steps taken one by one, each converted whole (as TestDegradeInputIsEveryStepWhole
// does for one built document), for every operation of every corpus
// document, at the budgets where the choice turns: each step's own size and
// one byte less. The size-bounded conversion Bind uses gives a step up when
// its lower bound on the size (schemaConverter.minSize) passes the budget, so
// a bound that counts what the result does not keep would cut a tool that fits.
func TestCorpusDegrade(t *testing.T) {
	if testing.Short() {
		t.Skip("converts every corpus operation's schema at every step: not in -short")
	}
	var args []toolArg
	testHookArgs = func(a []toolArg) { args = a }
	defer func() { testHookArgs = nil }()
	eachCorpusDocument(t, func(t *testing.T, doc *Document) {
		checked := 0
		for tmpl, item := range doc.T.Paths.Map() {
			for method, op := range item.Operations() {
				full, err := Bind(method, tmpl, item, op, &BindOptions{NoOutputSchema: true})
				if err != nil {
					continue
				}
				whole := newStepsWhole(args, full.InputSchema)
				whole.name = method + " " + tmpl
				for _, budget := range whole.budgets() {
					got, err := Bind(method, tmpl, item, op, &BindOptions{NoOutputSchema: true, SchemaBudget: budget})
					if err != nil {
						t.Fatal(err)
					}
					whole.check(t, got, budget)
					checked++
				}
			}
		}
		t.Logf("%d budgets checked", checked)
	})
}
