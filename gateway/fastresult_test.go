package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
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
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: json.RawMessage("{\n  \"pretty\": true,\r\n  \"x\": \"y z\"\n}")},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[1]"}}, StructuredContent: upstream.WrappedJSON("[1,\n {\"a\": \"<b>\"}]")},
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "cut"}}, Meta: mcp.Meta{"mcpgate/truncated": true}},
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
		{Content: []mcp.Content{}, StructuredContent: json.RawMessage(`[1]`)},
		{Content: []mcp.Content{}, Meta: mcp.Meta{"k": func() {}}},
	} {
		var buf bytes.Buffer
		if appendCallResult(&buf, res) || buf.Len() != 0 {
			t.Errorf("took %+v, which it cannot write", res)
		}
	}
}

// writeRecorder records each write an answerWriter makes.
type writeRecorder struct {
	bytes.Buffer
	largest int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	return w.Buffer.Write(p)
}

// TestAnswerWriterBounded: an answer written through a writer is the same
// bytes as the one built whole, for strings whose escaping spans meet a
// multi-byte character, an invalid byte or a run of continuation bytes,
// and raw JSON with line breaks; and its buffer stays within flushAt plus
// one escaped span, whatever the answer's size. (Writes of the upstream's
// own bytes go to the connection as they are: they are not copied.)
func TestAnswerWriterBounded(t *testing.T) {
	pad := func(s string, at int) string { return strings.Repeat("a", at) + s }
	var texts []string
	for _, at := range []int{escapeSpan - 3, escapeSpan - 2, escapeSpan - 1, escapeSpan, 2*escapeSpan - 1} {
		for _, s := range []string{"\U0001F600\u00e9\u2028", "\xf0\x9f\x98", "\x80\x80\x80\x80\x80x", "\xc3", "\"\\\n<&>"} {
			texts = append(texts, pad(strings.Repeat(s, escapeSpan/len(s)+3), at))
		}
	}
	texts = append(texts, strings.Repeat("\x01", 5*escapeSpan), strings.Repeat("\u00e9", 3*escapeSpan))
	raw := json.RawMessage("{\n" + strings.Repeat(`  "k": "v w",`+"\r\n", 3*flushAt/16) + `  "z": [` + strings.Repeat("1,", flushAt) + "2]\n}")
	for i, text := range texts {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: raw}
		var whole bytes.Buffer
		if !appendCallResult(&whole, res) {
			t.Fatal("declined")
		}
		var w writeRecorder
		a := answerWriter{buf: new(bytes.Buffer), w: &w}
		a.callResult(res)
		a.flush()
		if !bytes.Equal(w.Bytes(), whole.Bytes()) {
			t.Errorf("%d: written through a writer, the answer differs from the one built whole", i)
		}
		if c := a.buf.Cap(); c > sdkwire.MaxPooledBuffer {
			t.Errorf("%d: the buffer grew to %d bytes", i, c)
		}
		if w.largest < 2*flushAt {
			t.Errorf("%d: the longest write is %d bytes: the upstream's long run of JSON was copied", i, w.largest)
		}
		want, _ := res.MarshalJSON()
		var got, exp any
		json.Unmarshal(whole.Bytes(), &got)
		json.Unmarshal(want, &exp)
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("%d: the answer does not parse to what MarshalJSON gives", i)
		}
	}
}
