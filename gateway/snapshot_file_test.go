//go:build linux

package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/catalog"
)

// TestSnapshotFileNotRegular: --snapshot naming something that is not a
// regular file, or one over the bound, is a snapshot not used — one line
// saying why, and the documents loaded — never a start that hangs or
// reads until memory runs out. Found by trying what an operator may
// mistype or a volume may hold: the old reader handed a file of size 0 to
// os.ReadFile, which waited on a FIFO for a writer that never came (New
// hung) and would have read /dev/zero for ever.
func TestSnapshotFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "fast.json")
	if err := os.WriteFile(doc, fastDoc(0), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.snapshot") // sparse: nothing is written
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(catalog.MaxSnapshotBytes + 1); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	empty := filepath.Join(dir, "empty.snapshot")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.snapshot")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, path, reason string }{
		{"FIFO", fifo, "is not a regular file"},
		{"link to a FIFO", link, "is not a regular file"},
		{"/dev/zero", "/dev/zero", "is not a regular file"},
		{"directory", dir, "is not a regular file"},
		{"over the bound", big, "is over 256 MiB"},
		{"empty", empty, "no header line"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.path); err != nil && tt.name == "/dev/zero" {
				t.Skip(err)
			}
			var log syncBuffer
			type result struct {
				g   *Gateway
				err error
			}
			done := make(chan result, 1)
			go func() {
				g, err := New(context.Background(), cfg, &Options{Snapshot: tt.path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
				done <- result{g, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second): // a bound on a hang, not a wait for timing
				t.Fatalf("New has not returned after 30 s reading %s", tt.path)
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.g.Close()
			if r.g.fromSnapshot || !strings.Contains(log.String(), "snapshot not used") || !strings.Contains(log.String(), tt.reason) {
				t.Fatalf("want the snapshot not used, the reason saying %q; log:\n%s", tt.reason, log.String())
			}
		})
	}
}

// TestSnapshotFileRewrittenInPlace: the bytes a snapshot is read into are
// the process's own. A file rewritten in place (a cp over it) or cut short
// after it was read must change nothing the catalog reads from them, and
// never end the process with SIGBUS, as a mapping of the file itself
// would. The heap's fallback reads the same bytes.
func TestSnapshotFileRewrittenInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.snapshot")
	want := []byte(strings.Repeat("mcpgate snapshot bytes\n", 100_000)) // 2.3 MB: many pages
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readSnapshotPath(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("rewritten"), 0o644); err != nil { // O_TRUNC: the inode cut short
		t.Fatal(err)
	}
	if string(got) != string(want) { // every page read after the rewrite
		t.Fatal("the bytes read changed when the file was rewritten")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := readSnapshotHeap(f, int64(len("rewritten"))); err != nil || string(b) != "rewritten" {
		t.Fatalf("read from the heap: %q, %v", b, err)
	}
	if _, err := readSnapshotHeap(f, 100); err == nil {
		t.Fatal("a file shorter than its size was read from the heap without an error")
	}
	if _, err := mapSnapshotCopy(f, 100); err != errSnapshotShort {
		t.Fatalf("a file shorter than its size was mapped: %v", err)
	}
}

// TestReadSnapshotFileEdges: the mapped copy of a snapshot file is its
// bytes, read again from the start however often (the file's offset is
// not moved), a prefix when asked for one, an error when the file is
// shorter than asked, nothing for size 0; and writing to it (nothing
// should) changes the process's copy, never the file.
func TestReadSnapshotFileEdges(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	data := bytes.Repeat([]byte("abcdefgh"), 300000) // 2.4 MB, not page-aligned below
	data = append(data, 'z')
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// whole
	b, err := readSnapshotFile(f, int64(len(data)))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("whole: %v", err)
	}
	// read twice from the same f (offset untouched by the first read)
	b, err = readSnapshotFile(f, int64(len(data)))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("again: %v", err)
	}
	// shorter than said
	if b, err := readSnapshotFile(f, int64(len(data))+10); err == nil {
		t.Fatalf("short file read as %d bytes", len(b))
	}
	// a prefix
	b, err = readSnapshotFile(f, 5)
	if err != nil || string(b) != "abcde" {
		t.Fatalf("prefix: %q %v", b, err)
	}
	// size 0
	b, err = readSnapshotFile(f, 0)
	if err != nil || len(b) != 0 {
		t.Fatalf("empty: %v", err)
	}
	// writable private mapping: writes do not reach the file
	b, _ = readSnapshotFile(f, 3)
	b[0] = 'X'
	got, _ := os.ReadFile(p)
	if got[0] != 'a' {
		t.Fatal("write reached the file")
	}
	// the file rewritten after the read changes nothing read
	b, _ = readSnapshotFile(f, 8)
	os.WriteFile(p, []byte("ZZZZZZZZ"), 0o644)
	if string(b) != "abcdefgh" {
		t.Fatalf("changed under us: %q", b)
	}
}
