//go:build !linux

package gateway

import "os"

// readSnapshotFile returns the bytes of the snapshot file at path (the
// Linux version faults its buffer in first).
func readSnapshotFile(path string, _ int64) ([]byte, error) {
	return os.ReadFile(path)
}
