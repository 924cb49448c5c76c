//go:build unix

package direct

import (
	"net"
	"syscall"
)

// canPeek: stillOpen can tell a closed idle connection.
const canPeek = true

// stillOpen reports whether an idle connection may be reused: the peer has
// not closed it, and has sent nothing unasked (a late byte would be read as
// the next answer). One non-blocking peek, no wait.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, perr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = perr == syscall.EAGAIN || perr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
