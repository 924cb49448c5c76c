package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpgate/mcpgate/gateway"
)

// build writes a snapshot of the catalog serve would build (see
// docs/snapshot.md), for `serve --snapshot` and `stdio --snapshot`.
func (m *cli) build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate build", flag.ContinueOnError)
	var c common
	c.register(fs)
	out := fs.String("o", "", "write the snapshot to `FILE` (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef(fs, "name the snapshot file: -o FILE")
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, false)
	if err != nil {
		return err
	}
	cat, err := writeSnapshotFile(ctx, cfg, *out)
	if err != nil {
		var se *gateway.SnapshotError
		if errors.As(err, &se) {
			return &exitError{2, err}
		}
		return c.loadError(err)
	}
	fmt.Fprintf(m.stderr, "mcpgate: wrote %s (%d tools, %d resources)\n", *out, len(cat.Tools), len(cat.Resources))
	return nil
}

// writeSnapshotFile writes the snapshot beside path and renames it into
// place, so that a replica starting meanwhile reads the old file or the
// new one, never half of one.
func writeSnapshotFile(ctx context.Context, cfg *gateway.Config, path string) (*gateway.Catalog, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("-o: %v", err)}
	}
	defer os.Remove(f.Name()) // after the rename, nothing
	cat, err := gateway.WriteSnapshot(ctx, cfg, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &exitError{2, fmt.Errorf("-o %s: %v", path, cerr)}
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return nil, &exitError{2, fmt.Errorf("-o %s: %v", path, err)}
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, &exitError{2, fmt.Errorf("-o %s: %v", path, err)}
	}
	return cat, nil
}

// snapshotFlag registers --snapshot on serve and stdio. Not --catalog, which
// names catalog.mode (flat, search or auto) on the same commands.
func snapshotFlag(fs *flag.FlagSet) *string {
	return fs.String("snapshot", "", "start from the catalog snapshot `FILE` mcpgate build wrote, when the configuration, the documents and this mcpgate are the ones it was built from (else a full load, after a line saying which differs)")
}
