package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAppendCallResult: the hand-written result encoder parses to what
// go-sdk's CallToolResult.MarshalJSON gives, for every shape it accepts and
// for strings a hostile upstream can send; other shapes are declined.
func TestAppendCallResult(t *testing.T) {
	texts := []string{
		"", "plain", `{"a":1}`, "quote \" backslash \\ slash /", "line\nbreak\r\ttab",
		"\x00\x01\x1f\x7f", "<script>&amp;</script>", "caf\u00e9 \u2028 \u2029 \U0001F600",
		"bad \xff\xfe utf8 \xc3", "trailing \\",
	}
	var tests []*mcp.CallToolResult
	for _, s := range texts {
		tests = append(tests,
			&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}},
			&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: true},
		)
	}
	tests = append(tests,
		&mcp.CallToolResult{Content: []mcp.Content{}},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: json.RawMessage(`{"a":[1,2,{"b":null}],"c":"\u00e9"}`)},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: json.RawMessage("{\n  \"pretty\": true,\r\n  \"x\": \"y\"\n}")},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[1]"}}, StructuredContent: upstream.WrappedJSON("[1,\n {\"a\": \"<b>\"}]")},
	)
	for i, res := range tests {
		want, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if !appendCallResult(&buf, res) {
			t.Errorf("%d: declined a plain result", i)
			continue
		}
		if bytes.ContainsAny(buf.Bytes(), "\r\n") {
			t.Errorf("%d: %q holds a line break, which would end the SSE data line", i, buf.Bytes())
		}
		var got, exp any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Errorf("%d: %q is not JSON: %v", i, buf.Bytes(), err)
			continue
		}
		_ = json.Unmarshal(want, &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("%d:\n got %s\nwant %s", i, buf.Bytes(), want)
		}
	}
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		{Content: []mcp.Content{}, StructuredContent: map[string]any{"a": 1}},
		{Content: []mcp.Content{}, Meta: mcp.Meta{"k": "v"}},
	} {
		var buf bytes.Buffer
		if appendCallResult(&buf, res) || buf.Len() != 0 {
			t.Errorf("took %+v, which it cannot write", res)
		}
	}
}
