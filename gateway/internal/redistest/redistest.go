// Package redistest starts a real redis-server for tests: on a free loopback
// port, with no persistence, killed by its PID when the test ends. Tests that
// call it are skipped, saying so, when /usr/bin/redis-server is absent.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Binary is the redis-server the tests run (Debian's package).
const Binary = "/usr/bin/redis-server"

// Server is one redis-server started for a test.
type Server struct {
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start starts a redis-server and waits until it answers PING; it is killed
// when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("%s is absent (apt-get install redis-server): skipping a test that needs a real Redis", Binary)
	}
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		l.Close()
		cmd := exec.Command(Binary, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning")
		// Its log (start-up banners, warnings about the host) is left out.
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: addr, cmd: cmd}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if s.waitUp(exited) {
			t.Cleanup(s.Kill)
			return s
		}
		s.Kill()
		if try == 2 {
			t.Fatalf("redis-server did not come up on %s", addr)
		}
	}
}

// waitUp polls PING until it answers PONG, the process exits (the port was
// taken meanwhile) or 10 s pass.
func (s *Server) waitUp(exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if s.ping() {
			return true
		}
		time.Sleep(10 * time.Millisecond) // polling for a condition, not a timing
	}
	return false
}

func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprint(c, "PING\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Kill kills the server by its PID (an outage, mid-test if called there).
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}
