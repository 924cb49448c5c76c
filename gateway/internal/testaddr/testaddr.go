// Package testaddr gives tests of the gateway's packages addresses that
// behave as they need.
package testaddr

import (
	"fmt"
	"syscall"
	"testing"
)

// RefusedURL is an http URL on 127.0.0.1 that refuses connections for the
// rest of the test: its port is bound but not listening, so no server the
// test binary starts later can take it. (A closed httptest server's URL
// could be: the next server started may be given its port, and the calls
// meant to fail then reach that server — TestCallLogs did, once.)
func RefusedURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
