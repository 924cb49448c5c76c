package upstream

import (
	"bytes"
	"testing"

	sjson "github.com/segmentio/encoding/json"
)

// TestRestoredSchemasDoNotAliasTheRest: a snapshot's reader decodes a
// binding in place (segmentio's ZeroCopy), so its schemas' JSON is a
// window on the file's buffer. An append to a restored schema — it is
// handed to go-sdk and to code embedding the gateway as the tool's
// json.RawMessage — must copy it, not write over the bytes behind it
// (another schema, the rest of the catalog). Found by asking of every
// ZeroCopy slice where it goes: the RawMessage kept the buffer's capacity.
func TestRestoredSchemasDoNotAliasTheRest(t *testing.T) {
	payload := []byte(`[{"method":"GET","path":"/","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}},` +
		`{"method":"GET","path":"/b","inputSchema":{"type":"object","title":"second"}}]`)
	before := bytes.Clone(payload)
	var snaps []BindingSnapshot
	if _, err := sjson.Parse(payload, &snaps, sjson.ZeroCopy); err != nil {
		t.Fatal(err)
	}
	b, err := snaps[0].Restore()
	if err != nil {
		t.Fatal(err)
	}
	in, out := b.RawSchemas()
	_ = append(in, `XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX`...)
	_ = append(out, `YYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY`...)
	if !bytes.Equal(payload, before) {
		t.Fatalf("an append to a restored schema wrote into the buffer it was read from:\n%s", payload)
	}
}
