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
	docs, _ := filepath.Glob(filepath.Join(corpusDir, "*"))
	if len(docs) == 0 {
		t.Skipf("no corpus at %s: the shared corpus is not beside this clone", corpusDir)
	}
	base, _ := url.Parse("http://upstream.test/v1")
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
}
