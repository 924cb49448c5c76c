package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStickySessionsHAProxy runs the HAProxy configuration of
// docs/scaling.md, its addresses filled in, in front of two `mcpgate serve
// --stateful` replicas (the built-in demo), and checks what the page says:
//
//   - every request of a session (initialize, the standalone SSE stream, 20
//     requests) reaches the replica that made the session, while the
//     sessions are spread over both replicas;
//   - without the snippet's two `stick` lines, requests go astray: so the
//     check above can fail, and the stick lines are what makes it pass;
//   - when a replica dies, each session it held fails with
//     mcp.ErrSessionMissing (a 404 from the other replica, not HAProxy's 503),
//     the other sessions go on, and a new session works.
//
// It needs /usr/sbin/haproxy (Debian's haproxy package); without it, it
// skips.
func TestStickySessionsHAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests are skipped in -short mode")
	}
	haproxy := lookHAProxy(t)
	snippet := haproxySnippet(t)
	bin := buildGateway(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	replicas := []*replica{startReplica(t, bin), startReplica(t, bin)}

	t.Run("unsticky", func(t *testing.T) {
		// The control: the same configuration without its stick lines.
		var kept []string
		for _, line := range strings.Split(snippet, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "stick ") {
				kept = append(kept, line)
			}
		}
		lb := startHAProxy(t, haproxy, strings.Join(kept, "\n"), replicas)
		astray := 0
		for i := range 4 {
			s, err := openSession(ctx, lb, fmt.Sprint("unsticky-", i), nil)
			if err != nil {
				astray++ // initialized on one replica, the next request on the other
				continue
			}
			for range 20 {
				if err := s.request(ctx); err != nil {
					astray++
					break
				}
			}
			s.Close()
		}
		if astray == 0 {
			t.Fatal("without the stick lines every session still reached its replica: the test below would prove nothing")
		}
		t.Logf("without stickiness, %d of 4 sessions failed", astray)
	})

	lb := startHAProxy(t, haproxy, snippet, replicas)
	var sessions []*session
	for i := range 6 {
		s, err := openSession(ctx, lb, fmt.Sprint("sticky-", i), nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		defer s.Close()
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		for j := range 20 {
			if err := s.request(ctx); err != nil {
				t.Fatalf("session %s (on %s), request %d: %v", s.ID(), s.lb.owner(s.ID()), j, err)
			}
		}
	}
	perServer := map[string]int{}
	for _, s := range sessions {
		owner, served := s.lb.owner(s.ID()), s.lb.servedBy(s.ID())
		if owner == "" || len(served) < 21 {
			t.Fatalf("session %s: made by %q, %d requests seen", s.ID(), owner, len(served))
		}
		for _, by := range served {
			if by != owner {
				t.Errorf("session %s made by %s, a request served by %s", s.ID(), owner, by)
			}
		}
		perServer[owner]++
	}
	if len(perServer) != 2 {
		t.Fatalf("sessions per replica %v: want them spread over both", perServer)
	}
	t.Logf("sessions per replica: %v, every request on its session's replica", perServer)

	// A replica dies: its sessions are gone, the others' go on.
	dead := replicas[0]
	dead.kill(t)
	var lost, kept int
	for _, s := range sessions {
		err := s.request(ctx)
		switch owner := s.lb.owner(s.ID()); {
		case owner == dead.name && errors.Is(err, mcp.ErrSessionMissing):
			lost++
		case owner == dead.name:
			t.Errorf("session %s on the dead replica: %v, want mcp.ErrSessionMissing (a 404)", s.ID(), err)
		case err != nil:
			t.Errorf("session %s on the live replica: %v", s.ID(), err)
		default:
			kept++
		}
	}
	t.Logf("after killing %s: %d sessions lost (mcp.ErrSessionMissing), %d kept", dead.name, lost, kept)
	if lost != perServer[dead.name] || kept != perServer[replicas[1].name] {
		t.Errorf("after the kill: %d sessions lost, %d kept; want %v", lost, kept, perServer)
	}
	s, err := openSession(ctx, lb, "after-the-kill", nil)
	if err != nil {
		t.Fatalf("a new session after the kill: %v", err)
	}
	defer s.Close()
	if err := s.request(ctx); err != nil {
		t.Fatalf("a new session after the kill: %v", err)
	}
}

// lookHAProxy finds the haproxy binary or skips.
func lookHAProxy(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy" // not on a non-root PATH
	}
	msg := "haproxy is not installed (apt-get install haproxy): the HAProxy snippet of docs/scaling.md is not tested"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// haproxySnippet is the ```haproxy block of docs/scaling.md.
func haproxySnippet(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n```haproxy\n(.*?)\n```\n").FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/scaling.md has no ```haproxy block")
	}
	return string(m[1])
}

// buildGateway compiles cmd/mcpgate alone.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mcpgate")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mcpgate: %v\n%s", err, out)
	}
	return bin
}

// replica is one mcpgate process.
type replica struct {
	name string // its server name in HAProxy's configuration
	addr string // host:port
	cmd  *exec.Cmd
	done chan struct{}
}

var replicaCount struct {
	sync.Mutex
	n int
}

// startReplica starts `mcpgate serve --stateful` on a free port and waits
// for its "listening" line.
func startReplica(t *testing.T, bin string) *replica {
	t.Helper()
	replicaCount.Lock()
	replicaCount.n++
	name := fmt.Sprintf("mcpgate%d", replicaCount.n)
	replicaCount.Unlock()
	cmd := exec.Command(bin, "serve", "--stateful", "--addr", "127.0.0.1:0")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { r.stop() })
	re := regexp.MustCompile(`listening on http://(\S+)/mcp`)
	deadline := time.Now().Add(30 * time.Second)
	for r.addr == "" {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			r.addr = m[1]
			break
		}
		select {
		case <-r.done:
			t.Fatalf("%s exited:\n%s", name, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start:\n%s", name, stderr.String())
		}
	}
	return r
}

// stop interrupts the process by its PID and waits, then kills it.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// kill ends the process at once, as a crash or an OOM kill would.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
}

// balancer is a running HAProxy and what it reported of each request: the
// response header X-Served-By (the server's name), which the test adds to
// the snippet's backend to see where each request went.
type balancer struct {
	url   string
	alias map[string]string // X-Served-By -> the replica's name, when they differ

	mu     sync.Mutex
	owners map[string]string   // session id -> the server that made it
	served map[string][]string // session id -> the server of each request
}

func (b *balancer) owner(id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owners[id]
}

func (b *balancer) servedBy(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.served[id]...)
}

// recorder is a client's transport through the balancer: it records which
// server answered each request of a session.
type recorder struct {
	lb   *balancer
	base http.RoundTripper
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := r.lb
	by := resp.Header.Get("X-Served-By")
	if name, ok := b.alias[by]; ok {
		by = name
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if id := req.Header.Get("Mcp-Session-Id"); id != "" {
		b.served[id] = append(b.served[id], by)
	} else if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		b.owners[id] = by
		b.served[id] = append(b.served[id], by)
	}
	return resp, nil
}

// startHAProxy writes the snippet with the replicas' addresses and a free
// port in place of the documented ones, checks it with haproxy -c, runs it
// in the foreground, and waits until it answers.
func startHAProxy(t *testing.T, haproxy, snippet string, replicas []*replica) *balancer {
	t.Helper()
	port := freePort(t)
	replace := []string{"bind *:8080", "bind 127.0.0.1:" + port}
	for i, r := range replicas {
		documented := fmt.Sprintf("server mcpgate%d 10.0.0.1%d:8080", i+1, i+1)
		replace = append(replace, documented, fmt.Sprintf("server %s %s", r.name, r.addr))
	}
	// Where each request went: the test's addition, not the snippet's.
	replace = append(replace, "    balance roundrobin\n", "    balance roundrobin\n    http-response set-header X-Served-By %s\n")
	cfg := snippet + "\n"
	for i := 0; i < len(replace); i += 2 {
		if !strings.Contains(cfg, replace[i]) {
			t.Fatalf("docs/scaling.md's HAProxy block has no %q to fill in", replace[i])
		}
		cfg = strings.Replace(cfg, replace[i], replace[i+1], 1)
	}
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg)
	}
	cmd := exec.Command(haproxy, "-db", "-f", file) // -db: foreground, no daemon
	var stderr syncBuffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // by PID
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	b := &balancer{url: "http://127.0.0.1:" + port + "/mcp", owners: map[string]string{}, served: map[string][]string{}}
	// Ready when both servers answer through it: /healthz is sent round
	// robin, so two 200s in a row have seen both (and the health checks
	// need not have run: a server starts up).
	deadline := time.Now().Add(20 * time.Second)
	seen := map[string]bool{}
	for len(seen) < len(replicas) {
		select {
		case <-done:
			t.Fatalf("haproxy exited:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not answer /healthz from every server (%v):\n%s", seen, stderr.String())
		}
		resp, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err != nil {
			time.Sleep(20 * time.Millisecond) // polling until it listens
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			seen[resp.Header.Get("X-Served-By")] = true
		}
	}
	return b
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// session is an MCP client session through the balancer.
type session struct {
	*mcp.ClientSession
	lb *balancer
	n  int
}

// openSession connects through the balancer; base (nil: the default
// transport) is the client's own, e.g. one that dials from another address.
func openSession(ctx context.Context, lb *balancer, name string, base http.RoundTripper) (*session, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	// 2025-11-25, the last version with sessions: go-sdk's client would
	// otherwise speak 2026-07-28, which has none (a stateful gateway then
	// answers it as a stateless one does). It opens one with initialize,
	// its first request, which the balancer sends round robin.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: lb.url, HTTPClient: &http.Client{Transport: recorder{lb, base}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, err
	}
	if cs.ID() == "" {
		cs.Close()
		return nil, errors.New("no Mcp-Session-Id: the gateway is not stateful")
	}
	return &session{ClientSession: cs, lb: lb}, nil
}

// request sends one request of the session: tools/list and ping in turn.
func (s *session) request(ctx context.Context) error {
	s.n++
	if s.n%2 == 0 {
		return s.Ping(ctx, nil)
	}
	res, err := s.ListTools(ctx, nil)
	if err == nil && len(res.Tools) == 0 {
		err = errors.New("tools/list: no tools")
	}
	return err
}
