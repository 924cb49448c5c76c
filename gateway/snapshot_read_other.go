//go:build !linux

package gateway

import "os"

// readSnapshotFile returns the bytes of the snapshot file at path (see the
// Linux version, which maps them).
func readSnapshotFile(path string, _ int64) ([]byte, error) {
	return os.ReadFile(path)
}
