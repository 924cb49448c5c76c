package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEncodedSize: what the answer costs count for go-sdk's encodings is
// the size of the JSON go-sdk makes of the result, or a little more (its
// envelope, the spaces a raw structuredContent may keep): never less, for
// HTML characters, escapes, invalid UTF-8 and binary content too.
func TestEncodedSize(t *testing.T) {
	hostile := "quote \" backslash \\ <script>&amp;</script> \x00\x01\x1f\b\f\n\r\t caf\u00e9 \u2028 \u2029 bad \xff\xfe \xc3 \U0001F600"
	for i, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{}},
		{Content: []mcp.Content{&mcp.TextContent{Text: hostile}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(hostile, 100)}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: json.RawMessage("{\n\t\"a\": \"<b>&</b>\",\r\n \"c\": [1, 2]\n}")},
		{Content: []mcp.Content{&mcp.TextContent{Text: "[1]"}}, StructuredContent: upstream.WrappedJSON(`[1,"<&>"]`)},
		{Content: []mcp.Content{&mcp.TextContent{Text: `{"a":"\u00e9"}`}}, StructuredContent: map[string]any{"a": "\u00e9"}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte(strings.Repeat("\x89PNG", 1000)), MIMEType: "image/png"}}},
		{Content: []mcp.Content{&mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"}}},
		{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mcpgate://response/x", MIMEType: "application/pdf", Blob: []byte(strings.Repeat("%PDF", 999))}}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "cut"}}, Meta: mcp.Meta{"mcpgate/truncated": true}},
	} {
		data, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		actual := int64(len(`{"jsonrpc":"2.0","id":1,"result":}`) + len(data))
		if got := encodedSize(res); got < actual || got > actual+200 {
			t.Errorf("%d: encodedSize %d, want %d or a little more", i, got, actual)
		}
	}
}

// BenchmarkEncodedSize measures what settling go-sdk's share costs a call
// of a 4 MB answer (a JSON listing), beside what go-sdk spends encoding it.
//
//	go test ./gateway -run '^$' -bench EncodedSize -benchmem
func BenchmarkEncodedSize(b *testing.B) {
	answer := heldAnswer(4_000_000)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer}}, StructuredContent: json.RawMessage(answer)}
	b.Run("encodedSize", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(answer)))
		for b.Loop() {
			encodedSize(res)
		}
	})
	b.Run("MarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(answer)))
		for b.Loop() {
			res.MarshalJSON()
		}
	})
}

// TestEncodedSizeDecoded: a decoded structuredContent (an answer that is
// not valid UTF-8) is counted as encoding/json writes it, its HTML
// characters escaped to six bytes each, not as the answer's raw length.
func TestEncodedSizeDecoded(t *testing.T) {
	body := `{"a":"` + strings.Repeat("<", 1<<16) + "\xff" + `"}`
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}, StructuredContent: v}
	data, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got := encodedSize(res); got < int64(len(data)) {
		t.Errorf("encodedSize %d, marshaled %d", got, len(data))
	}
}
