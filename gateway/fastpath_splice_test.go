package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSpliceTools: buildToolPages marshals each tool alone and puts them
// into each page's JSON (spliceTools); every page must be byte for byte
// what marshalling the page whole gives, whatever the tools hold (<, > and
// &, U+2028, invalid UTF-8, schemas as maps or as a snapshot's JSON), and
// whatever the cursors.
func TestSpliceTools(t *testing.T) {
	var served []*Tool
	for i := range 7 {
		tool := &mcp.Tool{
			Name:        fmt.Sprintf("tool_%d", 6-i), // listed by name: the reverse
			Description: "a <b>bold</b> & \u2028 line\nand \xff" + strings.Repeat("x", i),
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "<&>"}}},
		}
		switch {
		case i == 6:
			tool.InputSchema = json.RawMessage(`{"type":"object","description":"no output schema: \"inputSchema\":0"}`)
		case i%3 == 1:
			tool.InputSchema = json.RawMessage(`{"properties":{"n":{"maximum":9007199254740993,"type":"integer","description":"a < b && c > d"}},"type":"object"}`)
			tool.OutputSchema = json.RawMessage(`{"type":"object"}`)
		case i%3 == 2:
			tool.Meta = mcp.Meta{"mcpgate/provenance": map[string]any{"title": "operationId"}}
			tool.Annotations = &mcp.ToolAnnotations{Title: "T & <t>", ReadOnlyHint: true}
		}
		served = append(served, &Tool{Tool: tool})
	}
	meta := []*mcp.Tool{{Name: "search_tools", InputSchema: map[string]any{"type": "object"}}}
	for _, pageSize := range []int{1, 2, 3, 1000} {
		for _, scope := range []string{cacheScopeOf(false), cacheScopeOf(true)} {
			got, err := buildToolPages(served, meta, pageSize, scope)
			if err != nil {
				t.Fatal(err)
			}
			want := wholePages(t, served, meta, pageSize, scope)
			if len(got.pages) != len(want) {
				t.Fatalf("page size %d: %d pages, want %d", pageSize, len(got.pages), len(want))
			}
			for i := range want {
				if !bytes.Equal(got.pages[i], want[i]) {
					t.Fatalf("page size %d, page %d:\n got %s\nwant %s", pageSize, i, got.pages[i], want[i])
				}
				if !json.Valid(got.pages[i]) {
					t.Fatalf("page size %d, page %d: not valid JSON", pageSize, i)
				}
			}
		}
	}
}

// wholePages is buildToolPages as it was: each page marshalled whole.
func wholePages(t *testing.T, served []*Tool, meta []*mcp.Tool, pageSize int, scope string) [][]byte {
	t.Helper()
	var tools []*mcp.Tool
	for _, s := range served {
		tools = append(tools, s.Tool)
	}
	tools = append(tools, meta...)
	slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	var pages [][]byte
	for start := 0; ; start += pageSize {
		end := min(start+pageSize, len(tools))
		res := &mcp.ListToolsResult{Tools: tools[start:end]}
		res.CacheScope = scope
		if end < len(tools) {
			c, err := sdkwire.EncodeCursor(tools[end-1].Name)
			if err != nil {
				t.Fatal(err)
			}
			res.NextCursor = c
		}
		b, err := sdkwire.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, b)
		if end == len(tools) {
			return pages
		}
	}
}

// TestToolJSONNotCompact: a schema's JSON that is not compact (not as
// build writes it: a payload made by hand) is served as it is, still one
// valid JSON object per tool.
func TestToolJSONNotCompact(t *testing.T) {
	tool := &mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{ "type" : "object" }`), OutputSchema: json.RawMessage(`{"type": "object"}`)}
	pieces, err := piecesOf(tool, nil)
	b := bytes.Join(pieces[:], nil)
	if err != nil || !json.Valid(b) {
		t.Fatalf("got %s, %v", b, err)
	}
	var back struct{ InputSchema, OutputSchema map[string]any }
	if err := json.Unmarshal(b, &back); err != nil || back.InputSchema["type"] != "object" || back.OutputSchema["type"] != "object" {
		t.Fatalf("got %s (%v)", b, err)
	}
}

// TestSpliceToolsRefuses: a page whose "tools":[] is missing or not alone
// is an error, never a list with the tools put in the wrong place.
func TestSpliceToolsRefuses(t *testing.T) {
	for _, page := range []string{`{"tools":null}`, `{"a":{"tools":[]},"tools":[]}`, `{}`} {
		if _, err := spliceTools([]byte(page), []toolPieces{{[]byte(`{"name":"x"}`)}}); err == nil {
			t.Errorf("%s: spliced", page)
		}
	}
	got, err := spliceTools([]byte(`{"ttlMs":0,"tools":[],"nextCursor":"c"}`), []toolPieces{{[]byte(`{"a":1}`)}, {[]byte(`{"b":`), []byte(`2`), []byte(`}`)}})
	if err != nil || string(got) != `{"ttlMs":0,"tools":[{"a":1},{"b":2}],"nextCursor":"c"}` {
		t.Fatalf("got %s, %v", got, err)
	}
}
