package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStickySessionsNginx runs docs/scaling.md's open-source nginx block
// (hash $binary_remote_addr consistent) in front of two `mcpgate serve
// --stateful` replicas, with clients dialing from different loopback
// addresses (127.0.0.2, 127.0.0.3, …), and checks that every request of a
// session reaches the replica that made it while the sessions are spread
// over both. Then it checks the page's warning: the same block hashing
// $http_mcp_session_id instead sends requests astray.
//
// nginx is not installed by .ci/run (its package starts a service on port
// 80): the test runs when nginx is on PATH, at /usr/sbin/nginx, or at
// $NGINX_BIN, and skips otherwise.
func TestStickySessionsNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests are skipped in -short mode")
	}
	nginx := lookNginx(t)
	snippet := nginxSnippet(t)
	bin := buildGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	replicas := []*replica{startReplica(t, bin), startReplica(t, bin)}

	lb := startNginx(t, nginx, snippet, replicas)
	// Each client its own address, so that the hash spreads them: add
	// clients until both replicas hold two sessions.
	var sessions []*session
	perServer := map[string]int{}
	for i := 0; len(sessions) < 40 && (perServer[replicas[0].name] < 2 || perServer[replicas[1].name] < 2); i++ {
		s, err := openSession(ctx, lb, fmt.Sprint("nginx-", i), dialFrom(t, i+2))
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		defer s.Close()
		for j := range 20 {
			if err := s.request(ctx); err != nil {
				t.Fatalf("session %s (on %s), request %d: %v", s.ID(), lb.owner(s.ID()), j, err)
			}
		}
		sessions = append(sessions, s)
		perServer[lb.owner(s.ID())]++
	}
	if len(perServer) != 2 {
		t.Fatalf("sessions per replica %v: want them spread over both", perServer)
	}
	for _, s := range sessions {
		owner, served := lb.owner(s.ID()), lb.servedBy(s.ID())
		if owner == "" || len(served) < 21 {
			t.Fatalf("session %s: made by %q, %d requests seen", s.ID(), owner, len(served))
		}
		for _, by := range served {
			if by != owner {
				t.Errorf("session %s made by %s, a request served by %s", s.ID(), owner, by)
			}
		}
	}
	t.Logf("hash $binary_remote_addr: sessions per replica %v, every request on its session's replica", perServer)

	t.Run("hash on the session id", func(t *testing.T) {
		const by = "hash $binary_remote_addr consistent;"
		if !strings.Contains(snippet, by) {
			t.Fatalf("the nginx block has no %q", by)
		}
		lb := startNginx(t, nginx, strings.Replace(snippet, by, "hash $http_mcp_session_id consistent;", 1), replicas)
		// Each session's requests go to the replica its random id hashes
		// to: the other one about half the time. 40 sessions all lucky:
		// 2^-40.
		for i := range 40 {
			s, err := openSession(ctx, lb, fmt.Sprint("nginx-hash-", i), nil)
			if err == nil {
				for range 20 {
					if err = s.request(ctx); err != nil {
						break
					}
				}
				s.Close()
			}
			if err != nil {
				t.Logf("session %d went astray, as docs/scaling.md says: %v", i, err)
				return
			}
		}
		t.Fatal("hashing $http_mcp_session_id kept 40 sessions on their replicas: docs/scaling.md says it cannot")
	})
}

// lookNginx finds an nginx binary or skips.
func lookNginx(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NGINX_BIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Skip("nginx is not installed (or set NGINX_BIN): the nginx snippet of docs/scaling.md is not tested")
	return ""
}

// nginxSnippet is docs/scaling.md's open-source nginx block.
func nginxSnippet(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```nginx\n(.*?)\n *```").FindAllSubmatch(page, -1) {
		if block := string(m[1]); strings.Contains(block, "hash $binary_remote_addr") {
			// The block is indented under a list item.
			return regexp.MustCompile(`(?m)^  `).ReplaceAllString(block, "")
		}
	}
	t.Fatal("docs/scaling.md has no nginx block with hash $binary_remote_addr")
	return ""
}

// dialFrom returns a transport whose connections come from 127.0.0.n.
func dialFrom(t *testing.T, n int) http.RoundTripper {
	t.Helper()
	if n > 254 {
		t.Fatal("out of loopback addresses")
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}, Timeout: 10 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// startNginx wraps the snippet (an upstream and a server block) in a
// configuration of its own — a prefix in a temporary folder, one process,
// logs to stderr — with the replicas' addresses and a free port in place of
// the documented ones, checks it with nginx -t, runs it, and waits until it
// listens.
func startNginx(t *testing.T, nginx, snippet string, replicas []*replica) *balancer {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	lb := &balancer{url: "http://127.0.0.1:" + port + "/mcp", alias: map[string]string{}, owners: map[string]string{}, served: map[string][]string{}}
	replace := []string{
		"listen 8080;", "listen 127.0.0.1:" + port + ";",
		// Where each request went: the test's addition, not the snippet's.
		"proxy_pass http://mcpgate;", "proxy_pass http://mcpgate;\n        add_header X-Served-By $upstream_addr always;",
	}
	for i, r := range replicas {
		replace = append(replace, fmt.Sprintf("server 10.0.0.1%d:8080;", i+1), "server "+r.addr+";")
		lb.alias[r.addr] = r.name
	}
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(snippet, replace[i]) {
			t.Fatalf("docs/scaling.md's nginx block has no %q to fill in", replace[i])
		}
		snippet = strings.Replace(snippet, replace[i], replace[i+1], 1)
	}
	cfg := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, snippet)
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-e", "stderr", "-c", file).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, cfg)
	}
	cmd := exec.Command(nginx, "-p", dir, "-e", "stderr", "-c", file)
	var stderr syncBuffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // by PID: a fast shutdown
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return lb
		}
		select {
		case <-done:
			t.Fatalf("nginx exited:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx does not listen: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling until it listens
	}
}
