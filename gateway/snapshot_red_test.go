package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/catalog"
)

// TestSnapshotSchemaGoSDKRefuses: a snapshot's payload that matches its
// own hash but whose input schema go-sdk's AddTool panics on (here an
// x-mcp-header on an object property) must not be served: a gateway from
// a snapshot hands its tools to go-sdk in the background, where such a
// panic ends the process at every start (a crash loop from one file).
// It falls back to the documents, with one line saying why.
func TestSnapshotSchemaGoSDKRefuses(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "fast.json")
	if err := os.WriteFile(doc, fastDoc(0), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	var b bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &b); err != nil {
		t.Fatal(err)
	}
	// The header, the catalog's line, then a line per tool.
	lines := bytes.Split(b.Bytes(), []byte{'\n'})
	if len(lines) < 3 {
		t.Fatalf("%d lines in the snapshot, want the header, the catalog and a tool", len(lines))
	}
	head, payload := lines[0], bytes.Join(lines[1:], []byte{'\n'})
	// Only the binding's input schema changes: the rest of the line, the
	// tool's JSON as listed above all, stays as written (the reader
	// refuses a tool whose JSON is not exactly what go-sdk lists).
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(lines[2], &tool); err != nil {
		t.Fatal(err)
	}
	var binding map[string]any
	if err := json.Unmarshal(tool["binding"], &binding); err != nil {
		t.Fatal(err)
	}
	binding["inputSchema"].(map[string]any)["properties"] = map[string]any{"id": map[string]any{"type": "object", "x-mcp-header": "X-Id"}}
	tool["binding"], _ = json.Marshal(binding)
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false) // the wire as written
	if err := enc.Encode(tool); err != nil {
		t.Fatal(err)
	}
	lines[2] = bytes.TrimRight(line.Bytes(), "\n")
	hostile := bytes.Join(lines[1:], []byte{'\n'})
	// The header's checksum made to match, as whoever can write the file
	// can make it.
	old, sum := catalog.PayloadChecksum(payload), catalog.PayloadChecksum(hostile)
	if !bytes.Contains(head, []byte(old)) {
		t.Fatalf("the header has no checksum %s: %s", old, head)
	}
	head = bytes.Replace(head, []byte(old), []byte(sum), 1)
	path := filepath.Join(dir, "hostile.snapshot")
	if err := os.WriteFile(path, append(append(head, '\n'), hostile...), 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	g, err := New(context.Background(), cfg, &Options{Snapshot: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	<-g.sdkTools // go-sdk has every tool: a panic would have ended the test binary
	if g.fromSnapshot || !strings.Contains(log.String(), "snapshot not used") || !strings.Contains(log.String(), "x-mcp-header") {
		t.Fatalf("the hostile snapshot was served: %s", log.String())
	}
}
