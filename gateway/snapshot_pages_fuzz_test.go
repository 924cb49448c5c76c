package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/gateway/catalog"
)

// FuzzSnapshotPages carries FuzzSnapshotPayload's question (gateway/catalog)
// to what the gateway serves from a payload the reader takes: the
// tools/list pages the fast path splices from each tool's JSON and its
// schemas' bytes (buildToolPages). That fuzz stops at the catalog and never
// builds a page. Every page must be valid JSON in UTF-8 and mean what the
// page marshalled whole means (wholePages: go-sdk's view, schemas
// compacted), whatever the payload; byte for byte only for a payload
// build wrote (TestSpliceTools, TestSnapshotCatalogsIdentical), since a
// hand-made schema's spacing is served as written (TestToolJSONNotCompact).
//
//	go test ./gateway -run '^$' -fuzz FuzzSnapshotPages -fuzztime 60s
func FuzzSnapshotPages(f *testing.F) {
	doc := filepath.Join(f.TempDir(), "fast.json")
	if err := os.WriteFile(doc, fastDoc(3), 0o644); err != nil {
		f.Fatal(err)
	}
	cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	var file bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &file); err != nil {
		f.Fatal(err)
	}
	nl := bytes.IndexByte(file.Bytes(), '\n')
	header, payload := file.Bytes()[:nl], file.Bytes()[nl+1:]
	hexSum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	f.Add(payload)
	one := func(tool, binding string) []byte {
		return []byte(`{"tools":[{"tool":` + tool + `,"binding":{"method":"GET","path":"/",` + binding +
			`},"upstream":"api","security":null}],"bases":{"api":{"url":"http://127.0.0.1:1"}}}`)
	}
	f.Add(one(`{"name":"x","description":"\"inputSchema\":0"}`, `"inputSchema":{ "type" : "object" , "a":"<&>\u2028"},"outputSchema":{"x":[1,2]}`))
	f.Add(one(`{"name":"x","_meta":{"inputSchema":0},"title":"\u00ff"}`, `"inputSchema":{"type":"object","type":"object","d":"\ud800"}`))
	f.Add(one(`{"name":"x","annotations":{"title":"t","readOnlyHint":true}}`, `"inputSchema":{"type":"object","properties":{"a":{"x-mcp-header":"A"}},"properties":{}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		h := bytes.Replace(header, []byte(hexSum(file.Bytes()[nl+1:])), []byte(hexSum(payload)), 1)
		data := append(append(append([]byte(nil), h...), '\n'), payload...)
		cat, err := catalog.LoadSnapshot(context.Background(), cfg, data, &catalog.SnapshotOptions{Build: snapshotBuild()}, nil)
		if err != nil {
			if _, ok := err.(*catalog.SnapshotError); !ok {
				t.Fatalf("not a *SnapshotError: %v", err)
			}
			return
		}
		for _, pageSize := range []int{1, 1000} {
			got, err := buildToolPages(cat.Tools, nil, pageSize, cacheScopeOf(false))
			if err != nil {
				t.Fatalf("a catalog the reader took makes no tools/list: %v", err)
			}
			if len(cat.Tools) == 0 {
				continue // wholePages would say "tools":null, go-sdk and the fast path []
			}
			want := wholePages(t, cat.Tools, nil, pageSize, cacheScopeOf(false))
			if len(got.pages) != len(want) {
				t.Fatalf("%d pages, want %d", len(got.pages), len(want))
			}
			for i, page := range got.pages {
				if !json.Valid(page) || !utf8.Valid(page) {
					t.Fatalf("page %d is not valid JSON in UTF-8: %q", i, page)
				}
				var g, w any
				if err := json.Unmarshal(page, &g); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(want[i], &w); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Fatalf("page %d means something else than the page marshalled whole:\n got %s\nwant %s", i, page, want[i])
				}
			}
		}
	})
}
