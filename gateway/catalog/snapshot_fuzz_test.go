package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzSnapshotPayload hands LoadSnapshot arbitrary catalogs under a header
// that matches them (the hashes right), so that what is fuzzed is the
// reader itself, past the hash checks that stop a corrupt file: it must
// refuse or restore, never panic, and every binding it restores must build
// a request (or refuse the arguments) without panicking either.
//
//	go test ./gateway/catalog -run '^$' -fuzz FuzzSnapshotPayload -fuzztime 30s
func FuzzSnapshotPayload(f *testing.F) {
	cfg, header, original := petSnapshot(f, "fuzz")
	f.Add(original)
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/{a}","inputSchema":{"type":"object"},"params":[{"arg":"a","name":"a","in":"path"}]},"upstream":"petstore","security":null}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/{a}","inputSchema":{"type":"object"}},"upstream":"petstore","security":null}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}},"paramTexts":["t"]}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"POST","path":"/","inputSchema":{"type":"object"},"body":{"mediaType":"multipart/form-data","props":[["a","b"]]}},"upstream":"petstore","security":null,"paramDescriptions":{"a":7}}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/","inputSchema":{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"X-A"}}}},"upstream":"petstore","security":null}`))
	// What the reader refused only once a red team found it (see
	// TestSnapshotPayloadRefused): the fuzzer mutates from there.
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000)
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(true) + `,"binding":{"method":"GET","path":"/","inputSchema":{"type":"object"},"outputSchema":{"a":` + deep + `}},"upstream":"petstore","security":null}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/","inputSchema":{"type":"object","properties":{"a":{"x-mcp-header":"A"}},"properties":{}}},"upstream":"petstore","security":null}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/","inputSchema":{"type":"object","default":[1e300,"\\\"["]}},"upstream":"petstore","security":null}`))
	f.Add([]byte(`{"toolCount":1,"bases":{"petstore":{"url":"http://127.0.0.1:1"}}}` + "\n" + `{"wire":` + xWire(false) + `,"binding":{"method":"GET","path":"/","inputSchema":{"type":"object"},"params":[{"name":"X-Tag","in":"header"}]},"upstream":"petstore","security":null}`))
	base, _ := url.Parse("http://127.0.0.1:1/")
	args := []map[string]any{nil, {}, {"a": "1", "b": []any{"x", 2.5}, "body": map[string]any{"k": nil}, "petId": "7"}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		h := bytes.Replace(header, []byte(PayloadChecksum(original)), []byte(PayloadChecksum(payload)), 1)
		data := append(append(append([]byte(nil), h...), '\n'), payload...)
		cat, err := LoadSnapshot(context.Background(), cfg, data, &SnapshotOptions{Build: "fuzz"}, nil)
		if err != nil {
			if _, ok := err.(*SnapshotError); !ok {
				t.Fatalf("not a *SnapshotError: %v", err)
			}
			return
		}
		server := mcp.NewServer(&mcp.Implementation{Name: "fuzz"}, nil)
		for _, tool := range cat.Tools {
			// What a gateway from a snapshot does with each tool, in the
			// background: go-sdk panics on a schema it finds wrong.
			server.AddTool(tool.Tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
			// The schemas' JSON was checked at start: decoding it on the
			// first call cannot fail (docs/snapshot.md).
			if err := tool.Binding.DecodeSchemas(); err != nil {
				t.Fatalf("tool %s served, but its schemas do not decode: %v", tool.Tool.Name, err)
			}
			// What tools/list serves of it, the pieces of its JSON, is
			// what go-sdk lists for it.
			if w := tool.Wire(); w == nil {
				t.Fatalf("tool %s served without its JSON", tool.Tool.Name)
			} else if p, want := w.Pieces(), marshalTool(t, tool.Tool); !bytes.Equal(bytes.Join(p[:], nil), want) {
				t.Fatalf("tool %s is listed as %q, go-sdk lists %q", tool.Tool.Name, bytes.Join(p[:], nil), want)
			}
			_ = tool.SearchDoc()
			for _, a := range args {
				if tool.Binding.Validate(a) == nil {
					tool.Binding.Request(context.Background(), base, a)
				}
			}
		}
		for _, r := range cat.Resources {
			if r.Template != nil {
				server.AddResourceTemplate(r.Template, nil)
			} else {
				server.AddResource(r.Resource, nil)
			}
			for _, a := range args {
				r.Binding.Request(context.Background(), base, a)
			}
		}
		_ = cat.Facts()
	})
}

// marshalTool is the tool as go-sdk's list marshals it (JSON without HTML
// escaping).
func marshalTool(t *testing.T, tool *mcp.Tool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tool); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
