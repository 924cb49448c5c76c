package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/gateway/catalog"
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
		g.logger.Info("catalog from snapshot", "snapshot", path, "tools", len(cat.Tools))
		return cat, nil
	}
	if _, ok := err.(*SnapshotError); !ok {
		return nil, err // the configuration is wrong: a full load would say the same
	}
	g.logger.Warn("snapshot not used: loading the documents", "snapshot", path, "reason", err.Error())
	return BuildCatalog(ctx, cfg, opts)
}

func readSnapshot(ctx context.Context, cfg *Config, path string, opts *CatalogOptions) (*Catalog, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, &SnapshotError{What: "read", Detail: err.Error()}
	case fi.Size() > catalog.MaxSnapshotBytes:
		return nil, &SnapshotError{What: "format", Detail: fmt.Sprintf("%s is over %d MiB", path, catalog.MaxSnapshotBytes>>20)}
	}
	data, err := os.ReadFile(path) // sized by the file: io.ReadAll's doubling cost 10 ms on 8 MB
	if err != nil {
		return nil, &SnapshotError{What: "read", Detail: err.Error()}
	}
	return catalog.LoadSnapshot(ctx, cfg, data, &catalog.SnapshotOptions{Build: snapshotBuild()}, opts)
}

// snapshotBuild identifies this build of mcpgate to its snapshots: its
// version, which for a build from a checkout is a pseudo-version naming the
// commit. A build that cannot tell its code apart by version — DevVersion
// (tests, -buildvcs=false) or a modified checkout ("+dirty") — adds the
// SHA-256 of its own executable, so that a rebuild from changed sources
// never reads the snapshot of another; hashing a 30 MB executable costs
// about 20 ms, which only those builds pay.
var snapshotBuild = sync.OnceValue(func() string {
	v := Version
	if v != DevVersion && !strings.Contains(v, "+dirty") {
		return v
	}
	exe, err := os.Executable()
	if err == nil {
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
