package federation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkDecodeCallToolResult is what decodeCallToolResult replaces: go-sdk's
// own decoding of a tools/call result (its UnmarshalJSON, reached through
// encoding/json), the reference of the differential test, the fuzz target
// and the benchmark.
func sdkDecodeCallToolResult(data []byte) (*mcp.CallToolResult, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// resultBodies are tools/call results of every shape go-sdk reads, and
// of shapes it refuses: the differential test's table and the fuzz
// target's seeds.
var resultBodies = []string{
	`{"content":[{"type":"text","text":"hi"}]}`,
	`{"content":[]}`,
	`{}`,
	`{"content":null}`,
	`{"content":[{"type":"text","text":""}],"isError":true}`,
	`{"content":[{"type":"text","text":"x","_meta":{"k":1},"annotations":{"audience":["user"],"priority":0.5,"lastModified":"2025-01-01T00:00:00Z"}}]}`,
	`{"content":[{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}`,
	`{"content":[{"type":"audio","data":"aGVsbG8=","mimeType":"audio/wav","annotations":{"priority":1}}]}`,
	`{"content":[{"type":"resource_link","uri":"file:///a","name":"a","title":"A","description":"d","mimeType":"text/plain","size":12,"icons":[{"src":"https://x/i.png","mimeType":"image/png","sizes":["48x48"]}]}]}`,
	`{"content":[{"type":"resource","resource":{"uri":"file:///a","mimeType":"text/plain","text":"body"}}]}`,
	`{"content":[{"type":"resource","resource":{"uri":"file:///b","blob":"aGVsbG8="}}]}`,
	`{"content":[{"type":"tool_use","id":"u1","name":"t","input":{"a":[1,2,{"b":null}]}}]}`,
	`{"content":[{"type":"tool_result","toolUseId":"u1","content":[{"type":"text","text":"r"}],"structuredContent":{"x":1},"isError":true}]}`,
	`{"content":[{"type":"tool_result","toolUseId":"u1","content":[]}]}`,
	`{"content":[{"type":"tool_result","toolUseId":"u1","content":null}]}`,
	`{"structuredContent":{"a":1,"b":[true,null,"s"]},"content":[{"type":"text","text":"{\"a\":1}"}]}`,
	`{"structuredContent":[1,2,3]}`,
	`{"structuredContent":"just a string"}`,
	`{"structuredContent":null}`,
	`{"_meta":{"k":"v","io.modelcontextprotocol/serverInfo":{"name":"u"}},"content":[]}`,
	`{"content":[{"type":"text","text":"a","unknown":1}],"unknown":{"deep":[1]},"resultType":"complete"}`,
	`{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list","params":{}}},"requestState":"s"}`,
	`{"inputRequests":{"a":{"method":"bogus"}}}`,
	`{"Content":[{"type":"text","text":"case"}]}`,
	`{"content":[{"Type":"text","Text":"case"}]}`,
	`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"image","data":"","mimeType":""}]}`,
	`{"content":[{"type":"text","text":"\u00e9\ud83d\ude00\n\t\"q\""}]}`,
	`{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}`,
	`  {"content":[{"type":"text","text":"spaced"}]}  `,
	// refused
	`{"content":[{"type":"video"}]}`,
	`{"content":[{"type":""}]}`,
	`{"content":[null]}`,
	`{"content":[{"type":"tool_result","content":[{"type":"tool_use","id":"x"}]}]}`,
	`{"content":[{"type":"tool_result","content":[null]}]}`,
	`{"content":{"type":"text","text":"not an array"}}`,
	`{"content":"text"}`,
	`{"content":[{"type":"image","data":"not base64!"}]}`,
	`{"content":[{"type":1}]}`,
	`{"isError":"yes"}`,
	`{"_meta":[1]}`,
	`{"content":[{"type":"resource_link","size":"big"}]}`,
	`{"content":[{"type":"resource_link","size":1.5}]}`,
	`{"content":[{"type":"text","text":"a"}]} trailing`,
	`{"content":[{"type":"text","text":"a"}`,
	`[]`,
	`null`,
	`"s"`,
	`{"content":[{"type":"text","text":"\xff"}]}`,
	`{"content":[{"type":"text","text":"a` + "\x01" + `"}]}`,
	strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat(`}`, 1001),
	`{"structuredContent":` + strings.Repeat(`[`, 999) + strings.Repeat(`]`, 999) + `}`,
	`{"structuredContent":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`,
}

// checkSameDecoding fails t unless decodeCallToolResult and go-sdk's
// decoder make the same decision on data and, when both accept it, the
// same result: equal values, equal bytes re-encoded (whole, and as
// hop.result rebuilds it for the caller).
func checkSameDecoding(t *testing.T, data []byte) {
	t.Helper()
	want, werr := sdkDecodeCallToolResult(data)
	got, gerr := decodeCallToolResult(data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: go-sdk's decoder says %v, ours %v", data, werr, gerr)
	}
	if werr != nil {
		return
	}
	rebuild := func(r *mcp.CallToolResult) *mcp.CallToolResult {
		return &mcp.CallToolResult{Meta: withoutHopMeta(r.Meta), Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError}
	}
	for _, pair := range [][2]*mcp.CallToolResult{{rebuild(want), rebuild(got)}, {
		// Whole but for resultType, which is go-sdk's unexported field.
		{Meta: want.Meta, Content: want.Content, StructuredContent: want.StructuredContent, IsError: want.IsError, InputRequests: want.InputRequests, RequestState: want.RequestState},
		{Meta: got.Meta, Content: got.Content, StructuredContent: got.StructuredContent, IsError: got.IsError, InputRequests: got.InputRequests, RequestState: got.RequestState},
	}} {
		wb, werr := pair[0].MarshalJSON()
		gb, gerr := pair[1].MarshalJSON()
		if (werr == nil) != (gerr == nil) || !bytes.Equal(wb, gb) {
			t.Fatalf("%q re-encodes as\n%s (%v) by go-sdk's decoder, as\n%s (%v) by ours", data, wb, werr, gb, gerr)
		}
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Fatalf("%q decodes to\n%#v by go-sdk's decoder, to\n%#v by ours", data, pair[0], pair[1])
		}
	}
}

// TestDecodeCallToolResultMatchesSDK: every body of the table decodes as
// go-sdk's decoder decodes it, or is refused as go-sdk refuses it.
func TestDecodeCallToolResultMatchesSDK(t *testing.T) {
	refused := 0
	for _, body := range resultBodies {
		checkSameDecoding(t, []byte(body))
		if _, err := sdkDecodeCallToolResult([]byte(body)); err != nil {
			refused++
		}
	}
	// The table is worth something only if it has both kinds.
	if refused < 15 || refused > len(resultBodies)-20 {
		t.Fatalf("go-sdk refuses %d of %d bodies: the table lost its accepted or its refused cases", refused, len(resultBodies))
	}
}

// FuzzDecodeCallToolResult: random and hostile result bodies get the same
// accept or refuse decision, and the same re-encoded bytes, from
// decodeCallToolResult as from go-sdk's decoder.
func FuzzDecodeCallToolResult(f *testing.F) {
	for _, b := range resultBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameDecoding(t, data)
	})
}

// BenchmarkDecodeCallToolResult is why decodeCallToolResult exists: go-sdk's
// decoder against ours on a small text result, as the bench's upstream
// answers, and a larger one of several blocks. go-sdk's takes a fresh
// 32 KiB buffer per result (docs/go-sdk-decoder.md); run with -benchmem.
func BenchmarkDecodeCallToolResult(b *testing.B) {
	small := []byte(`{"content":[{"type":"text","text":"{\"id\":1,\"name\":\"widget\"}"}],"structuredContent":{"id":1,"name":"widget"}}`)
	var big bytes.Buffer
	big.WriteString(`{"content":[`)
	for i := range 20 {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 40) + `"}`)
	}
	big.WriteString(`],"isError":false}`)
	for _, body := range []struct {
		name string
		data []byte
	}{{"small", small}, {"20-blocks", big.Bytes()}} {
		for _, d := range []struct {
			name   string
			decode func([]byte) (*mcp.CallToolResult, error)
		}{{"go-sdk", sdkDecodeCallToolResult}, {"ours", decodeCallToolResult}} {
			b.Run(body.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body.data)))
				for b.Loop() {
					if _, err := d.decode(body.data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
