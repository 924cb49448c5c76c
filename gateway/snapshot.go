package gateway

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/internal/parallel"
)

// SnapshotError says why a snapshot was not used (see catalog.LoadSnapshot).
type SnapshotError = catalog.SnapshotError

// WriteSnapshot builds cfg's catalog as [New] serves it and writes a
// snapshot of it to w, for Options.Snapshot (`mcpgate build`). A
// configuration with a playbook engine, an MCP upstream or an in-process
// handler is refused: their tools are read from the live upstream at every
// start. See docs/snapshot.md.
func WriteSnapshot(ctx context.Context, cfg *Config, w io.Writer) (*Catalog, error) {
	return catalog.WriteSnapshot(ctx, cfg, w, &catalog.SnapshotOptions{Build: snapshotBuild()})
}

// loadCatalog is the catalog New serves: from Options.Snapshot when it was
// made by this build from cfg and the documents as they are now, else
// built from the documents (BuildCatalog), after one line saying why the
// snapshot was not used.
func (g *Gateway) loadCatalog(ctx context.Context, cfg *Config, opts *CatalogOptions) (*Catalog, error) {
	path := g.opts.Snapshot
	if path == "" {
		return BuildCatalog(ctx, cfg, opts)
	}
	cat, err := readSnapshot(ctx, cfg, path, opts)
	if err == nil {
		g.fromSnapshot = true
		g.logger.Info("catalog from snapshot", "snapshot", path, "tools", len(cat.Tools))
		return cat, nil
	}
	if _, ok := err.(*SnapshotError); !ok {
		return nil, err // the configuration is wrong: a full load would say the same
	}
	g.logger.Warn("snapshot not used: loading the documents", "snapshot", path, "reason", err.Error())
	if f := g.opts.SnapshotNotUsed; f != nil {
		f(err)
	}
	return BuildCatalog(ctx, cfg, opts)
}

func readSnapshot(ctx context.Context, cfg *Config, path string, opts *CatalogOptions) (*Catalog, error) {
	data, err := readSnapshotPath(path)
	if err != nil {
		return nil, err
	}
	return catalog.LoadSnapshot(ctx, cfg, data, &catalog.SnapshotOptions{Build: snapshotBuild()}, opts)
}

// readSnapshotPath reads the snapshot file at path, or says in a
// *SnapshotError why it does not. Only a regular file (or a link to one)
// is read, and only as many bytes as its size said when it was opened,
// at most catalog.MaxSnapshotBytes: a FIFO would hold the start until a
// writer came, and /dev/zero, a character device of size 0, would be read
// until memory ran out. The file is opened without blocking (a FIFO put
// in its place since the check would block the open), and checked once
// open (what is read is what was checked). A file made longer while it is
// read is read to its old size, and its payload's hash then says it is
// not what the header says; one made shorter is a read error.
func readSnapshotPath(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, &SnapshotError{What: "read", Detail: err.Error()}
	} else if !fi.Mode().IsRegular() {
		return nil, &SnapshotError{What: "read", Detail: fmt.Sprintf("%s is not a regular file (%s)", path, fi.Mode().Type())}
	}
	f, err := openSnapshotFile(path)
	if err != nil {
		return nil, &SnapshotError{What: "read", Detail: err.Error()}
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, &SnapshotError{What: "read", Detail: err.Error()}
	case !fi.Mode().IsRegular():
		return nil, &SnapshotError{What: "read", Detail: fmt.Sprintf("%s is not a regular file (%s)", path, fi.Mode().Type())}
	case fi.Size() > catalog.MaxSnapshotBytes:
		return nil, &SnapshotError{What: "format", Detail: fmt.Sprintf("%s is over %d MiB", path, catalog.MaxSnapshotBytes>>20)}
	}
	data, err := readSnapshotFile(f, fi.Size()) // sized by the file: io.ReadAll's doubling cost 10 ms on 8 MB
	if err != nil {
		return nil, &SnapshotError{What: "read", Detail: fmt.Sprintf("%s: %v", path, err)}
	}
	return data, nil
}

// snapshotBuild identifies this build of mcpgate to its snapshots: its
// version, which for a build from a checkout is a pseudo-version naming the
// commit. A build that cannot tell its code apart by version — DevVersion
// (tests, -buildvcs=false) or a modified checkout ("+dirty") — adds its Go
// build ID (the toolchain's hash of what went into the executable, in an
// ELF note: a few KB to read), else the SHA-256 of its executable (about
// 20 ms for 30 MB), so that a rebuild from changed sources never reads the
// snapshot of another.
var snapshotBuild = sync.OnceValue(func() string {
	v := Version
	if v != DevVersion && !strings.Contains(v, "+dirty") {
		return v
	}
	exe, err := os.Executable()
	if err == nil {
		if id := goBuildID(exe); id != "" {
			return v + " go build ID " + id
		}
		var f *os.File
		if f, err = os.Open(exe); err == nil {
			defer f.Close()
			h := sha256.New()
			if _, err = io.Copy(h, f); err == nil {
				return v + " executable sha256:" + hex.EncodeToString(h.Sum(nil))
			}
		}
	}
	// Without its own bytes, a build cannot tell itself apart: it reads
	// no snapshot but its own process's (which no other can match).
	return fmt.Sprintf("%s unidentified (pid %d: %v)", v, os.Getpid(), err)
})

// goBuildID reads the Go build ID from an ELF executable's
// .note.go.buildid section ("" when there is none: not ELF, or stripped of
// it). The note is a 4-byte name size, a 4-byte description size, a type,
// the name "Go\x00\x00" and the ID.
func goBuildID(exe string) string {
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil || sec.Size > 4096 {
		return ""
	}
	data, err := sec.Data()
	if err != nil || len(data) < 16 || string(data[12:16]) != "Go\x00\x00" {
		return ""
	}
	n := f.ByteOrder.Uint32(data[4:8])
	if uint64(n) > uint64(len(data)-16) || n == 0 {
		return ""
	}
	return string(data[16 : 16+n])
}

// addTools adds the tools served to go-sdk's server, on every core:
// go-sdk's AddTool checks a tool by marshalling its schemas and parsing
// them back, with a fresh 32 KiB decoder each time (Kubernetes': 70 ms of
// CPU and 100 MB of garbage). It takes the server's lock only to add the
// checked tool, and lists tools by name whatever the order they were added
// in.
//
// From a snapshot, where it would be most of the start, it only notes the
// tools: New's last step (addToolsLater) adds them in the background, so
// that the rest of New does not share the machine's cores and fresh memory
// with it (on 2 cores it doubled the fast path's build). The fast path
// (stateless tools/list and tools/call) serves from the catalog and needs
// none of it; whatever is handed to go-sdk (initialize, stateful sessions,
// stdio, Server) waits on g.sdkTools, for the tens of ms it takes after
// New returns.
func (g *Gateway) addTools(served []*Tool) {
	if g.fromSnapshot {
		g.later = served
		return
	}
	parallel.Do(len(served), func(i int) {
		g.addSDKTool(served[i].Tool, g.handler(served[i]))
	})
	close(g.sdkTools)
}

// addToolsLater adds the tools addTools noted, in one goroutine (the start
// goes on on the other cores), once New has built everything else. A New
// that fails never starts it.
func (g *Gateway) addToolsLater() {
	if !g.fromSnapshot {
		return
	}
	served := g.later
	g.later = nil
	go func() {
		for _, t := range served {
			g.addSDKTool(t.Tool, g.handler(t))
		}
		close(g.sdkTools)
	}()
}
