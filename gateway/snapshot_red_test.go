package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	nl := bytes.IndexByte(b.Bytes(), '\n')
	head, payload := b.Bytes()[:nl], b.Bytes()[nl+1:]
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	tool := p["tools"].([]any)[0].(map[string]any)
	schema := tool["binding"].(map[string]any)["inputSchema"].(map[string]any)
	schema["properties"] = map[string]any{"id": map[string]any{"type": "object", "x-mcp-header": "X-Id"}}
	hostile, _ := json.Marshal(p)
	old, sum := sha256.Sum256(payload), sha256.Sum256(hostile)
	head = bytes.Replace(head, []byte(hex.EncodeToString(old[:])), []byte(hex.EncodeToString(sum[:])), 1)
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
	if g.fromSnapshot || !strings.Contains(log.String(), "snapshot not used") {
		t.Fatalf("the hostile snapshot was served: %s", log.String())
	}
}
