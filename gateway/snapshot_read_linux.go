//go:build linux

package gateway

import (
	"errors"
	"io"
	"math"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE (5.14): fault a range
// in, writable, in one call.
const madvPopulateWrite = 23

// openSnapshotFile opens the snapshot file for reading without blocking:
// a FIFO swapped in after readSnapshotPath's check would otherwise hold
// the open until a writer came. O_NONBLOCK changes nothing for a regular
// file.
func openSnapshotFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readSnapshotFile returns the size bytes of the snapshot file f, a
// regular file of that size when it was opened (readSnapshotPath).
//
// A new process pays for each page of fresh memory it first touches, and
// on a VM that is dear: read into the heap, Kubernetes' 4.5 MB snapshot
// took 10–12 ms to read and 8–12 ms more the first time it was scanned
// (its checksum), a page fault per 4 KiB page each time. So the file is
// copied, in the kernel, into a memory file of the process's own (memfd)
// and mapped from it: 1.5–2 ms, and 3–4 ms for the first scan, where a
// fault maps a run of pages. Not the file itself mapped: whoever rewrote it
// in place (a cp over it) would change the catalog under the checks it
// passed, or end the process with SIGBUS by truncating it. The memory file
// is the process's alone, and its mapping is private and writable, as a
// buffer from the heap is (nothing should write to it: the catalog reads
// its strings from it, see catalog.LoadSnapshot).
//
// The mapping is never unmapped: the catalog read from it is served for
// the life of the process, and a snapshot that is not used (a hash
// differs) leaves its size mapped, unused, beside the full load. Where the
// kernel refuses the memory file (no memfd_create, a seccomp profile that
// denies it), the file is read into the heap as before.
func readSnapshotFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	b, err := mapSnapshotCopy(f, size)
	if err == nil || err == errSnapshotShort {
		return b, err
	}
	return readSnapshotHeap(f, size)
}

// errSnapshotShort: the file is shorter than it was a moment ago (being
// rewritten).
var errSnapshotShort = io.ErrUnexpectedEOF

// mapSnapshotCopy copies size bytes of f from its start into a new memory
// file and maps it (see readSnapshotFile).
func mapSnapshotCopy(f *os.File, size int64) ([]byte, error) {
	if size > math.MaxInt {
		return nil, errors.New("too large to map")
	}
	fd, err := unix.MemfdCreate("mcpgate-snapshot", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) // the mapping keeps the memory file
	if err := unix.Ftruncate(fd, size); err != nil {
		return nil, err
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var copyErr error
	if err := raw.Control(func(in uintptr) {
		for off := int64(0); off < size; {
			n, err := unix.Sendfile(fd, int(in), &off, int(min(size-off, 1<<30)))
			switch {
			case err == unix.EINTR || err == unix.EAGAIN:
				continue
			case err != nil:
				copyErr = err
				return
			case n == 0:
				copyErr = errSnapshotShort
				return
			}
		}
	}); err != nil {
		return nil, err
	}
	if copyErr != nil {
		return nil, copyErr
	}
	return unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
}

// readSnapshotHeap reads size bytes of f from its start into the heap, its
// pages faulted in by one madvise first (os.ReadFile faults them in one by
// one: 17 ms against 11 for Kubernetes' snapshot, in a process of its
// own). A kernel without MADV_POPULATE_WRITE refuses it, and the read
// faults them in as before.
func readSnapshotHeap(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	const page = 4096
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if from, to := (start+page-1)&^(page-1), (start+uintptr(size))&^(page-1); to > from {
		syscall.Syscall(syscall.SYS_MADVISE, from, to-from, madvPopulateWrite) // a hint: its error changes nothing
	}
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err // shorter than it was a moment ago: being rewritten
	}
	// Longer now: the payload's hash says the file is not what it was.
	return b, nil
}
