//go:build !linux

package gateway

import (
	"io"
	"os"
)

// openSnapshotFile opens the snapshot file for reading (the Linux version
// does not block on a FIFO swapped in after readSnapshotPath's check).
func openSnapshotFile(path string) (*os.File, error) { return os.Open(path) }

// readSnapshotFile returns the size bytes of the snapshot file f, a
// regular file of that size when it was opened (the Linux version faults
// its buffer in first).
func readSnapshotFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}
