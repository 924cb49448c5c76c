package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolWire is a tool's JSON as tools/list serves it (the gateway's
// sdkwire.Marshal of the tool), kept in the pieces it is made of: the tool
// marshalled with a one-byte stand-in for each schema — 0 for the input
// schema, 1 for the output schema — and the schemas' own JSON, which
// replaces them. A tool whose schemas are JSON (a snapshot's) is listed
// from these pieces without being marshalled: encoding/json would check
// and copy each schema twice more, and a snapshot holds the marshalled
// tool already, so a start from one lists its tools without marshalling
// any (docs/snapshot.md).
//
// A stand-in is found once or not at all: no string can hold
// `"inputSchema":0` (its quotes would be escaped), and _meta is the
// gateway's own.
type ToolWire struct {
	bare        []byte
	in, out     json.RawMessage
	inAt, outAt int // the stand-ins' indexes in bare; outAt is len(bare) without an output schema
}

// Standing in for the schemas in a tool's bare JSON.
var (
	inputStandIn  = json.RawMessage("0")
	outputStandIn = json.RawMessage("1")
)

// NewToolWire marshals t with its schemas stood in for, and returns its
// pieces; nil when t's schemas are not JSON (a tool built from a document
// holds maps) or a stand-in is not found once: marshal it whole.
func NewToolWire(t *mcp.Tool) (*ToolWire, error) {
	in, ok := t.InputSchema.(json.RawMessage)
	out, outOK := t.OutputSchema.(json.RawMessage)
	if !ok || len(in) == 0 || t.OutputSchema != nil && (!outOK || len(out) == 0) {
		return nil, nil
	}
	bare, err := bareToolJSON(t)
	if err != nil {
		return nil, err
	}
	w, err := toolWire(bare, in, out)
	if err != nil {
		// A stand-in's text elsewhere in the tool (an upstream MCP
		// server's _meta may hold anything): marshal it whole.
		return nil, nil
	}
	return w, nil
}

// bareToolJSON is t marshalled as tools/list marshals it (go-sdk's
// encoder: encoding/json without HTML escaping, as the gateway's
// sdkwire.Marshal; TestSpliceTools holds the two to the same bytes), with
// the stand-ins for its schemas (an output schema's only when it has one).
func bareToolJSON(t *mcp.Tool) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeBare(&buf, t); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// encodeBare writes bareToolJSON(t) to buf, with a newline after it.
func encodeBare(buf *bytes.Buffer, t *mcp.Tool) error {
	bare := *t
	bare.InputSchema = inputStandIn
	if t.OutputSchema != nil {
		bare.OutputSchema = outputStandIn
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(&bare)
}

// isBareToolJSON reports whether wire is bareToolJSON(t), byte for byte,
// marshalling into a buffer of a pool (a start from a snapshot checks
// every tool: Kubernetes' 1,123 made 1.4 MB of garbage otherwise).
func isBareToolJSON(wire []byte, t *mcp.Tool) bool {
	buf := barePool.Get().(*bytes.Buffer)
	defer barePool.Put(buf)
	buf.Reset()
	return encodeBare(buf, t) == nil && bytes.Equal(bytes.TrimRight(buf.Bytes(), "\n"), wire)
}

var barePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// toolWire finds the stand-ins in bare, for the schemas in and out (out
// nil without an output schema). bare is the tool as encodeBare writes it
// (the snapshot's reader checks that first), so a stand-in is a whole
// value where it is found; one not found exactly once, or out of order,
// is an error (a tool whose _meta holds the text: NewToolWire marshals it
// whole).
func toolWire(bare []byte, in, out json.RawMessage) (*ToolWire, error) {
	w := &ToolWire{bare: bare, in: in, out: out, inAt: standIn(bare, `"inputSchema":0`), outAt: len(bare)}
	if out != nil {
		w.outAt = standIn(bare, `"outputSchema":1`)
	}
	if w.inAt < 0 || w.outAt < 0 || w.outAt < w.inAt {
		return nil, errors.New("its JSON does not stand in for its schemas once each, input schema first")
	}
	return w, nil
}

// standIn returns where key's one-byte value is in b — the index of the
// byte after key's colon — or -1 when key is not there exactly once.
func standIn(b []byte, key string) int {
	i := bytes.Index(b, []byte(key))
	if i < 0 || bytes.LastIndex(b, []byte(key)) != i {
		return -1
	}
	return i + len(key) - 1
}

// Pieces are the tool's JSON in the order they are written: appended one
// after another they are sdkwire.Marshal of the tool, byte for byte (the
// schemas as they are, compact as a snapshot writes them;
// TestSpliceTools).
func (w *ToolWire) Pieces() [5][]byte {
	p := [5][]byte{w.bare[:w.inAt], w.in}
	if w.out == nil {
		p[2] = w.bare[w.inAt+1:]
		return p
	}
	p[2], p[3], p[4] = w.bare[w.inAt+1:w.outAt], w.out, w.bare[w.outAt+1:]
	return p
}
