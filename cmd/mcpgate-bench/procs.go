package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Hidden subcommands: the bench binary re-executes itself as the upstream and
// as the baseline, so each target runs in a process of its own and its CPU
// can be read from /proc/<pid>/stat apart from the driver's.
const (
	roleUpstream = "_serve-upstream"
	roleBaseline = "_serve-baseline"
	roleMCP      = "_serve-mcp"   // the go-sdk server of the federated comparison
	roleRelay    = "_serve-relay" // the SDK-free byte relay in front of it (relay.go)
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs
// cgo), so one tick is 10 ms: runs of a few seconds and thousands of calls
// keep the rounding under 1%.
const clockTicks = 100

// proc is one target process the bench started.
type proc struct {
	name    string
	cmd     *exec.Cmd
	url     string         // base URL: http://127.0.0.1:port
	stdin   io.WriteCloser // closed to ask a role child to exit
	logPath string         // mcpgate's stderr, kept for the error message
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// cpu is the process's user + system CPU time so far.
func (p *proc) cpu() (time.Duration, error) { return procCPU(p.pid()) }

// rss is the process's resident set size in bytes (VmRSS).
func (p *proc) rss() (int64, error) { return procRSS(p.pid()) }

// stop ends the process (it is ours: we started it) and waits for it.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	if p.stdin != nil {
		p.stdin.Close()
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// logTail is the end of mcpgate's log, for error messages.
func (p *proc) logTail() string {
	if p.logPath == "" {
		return ""
	}
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// startRole runs exe (this binary, or a copy of it: see privateCopy) as
// role and reads the address it listens on from the first line of its stdout
// ("listening http://...").
func startRole(exe, role string, env ...string) (*proc, error) {
	cmd := exec.Command(exe, role)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	setDeathSignal(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: role, cmd: cmd, stdin: in}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		io.Copy(io.Discard, out)
	}()
	select {
	case s := <-line:
		u, ok := strings.CutPrefix(strings.TrimSpace(s), "listening ")
		if !ok {
			p.stop()
			return nil, fmt.Errorf("%s: did not say where it listens (first line %q)", role, s)
		}
		p.url = u
		return p, nil
	case <-time.After(20 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s: not listening after 20s", role)
	}
}

// benchExecutable is this binary, which re-executes itself as its roles.
func benchExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the bench binary to re-execute: %v", err)
	}
	return exe, nil
}

// privateCopy copies this binary into dir as name and returns the copy's path. The
// baseline runs from it so that it shares no code pages with the driver and
// the upstream, which run this binary on the same cores at the same time:
// a process whose text is the same file as theirs finds net/http and the
// runtime already in the CPU caches and the TLB, and mcpgate, a binary of
// its own, never does. Measured with the baseline's code in both slots
// (mcpgate-bench -c 1, three runs each): the same file 0.99–1.04× the
// baseline's added latency; a byte-identical copy 1.08–1.22×.
func privateCopy(dir, name string) (string, error) {
	// /proc/self/exe is the running binary even when its file has since
	// been rebuilt or removed.
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		exe, err := benchExecutable()
		if err != nil {
			return "", err
		}
		if src, err = os.Open(exe); err != nil {
			return "", err
		}
	}
	defer src.Close()
	path := filepath.Join(dir, name)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", err
	}
	return path, dst.Close()
}

// serveRole runs a role child: it listens on 127.0.0.1:0, says where on
// stdout, and serves until stdin closes (its parent ended or stopped it).
func serveRole(h func(baseURL string) http.Handler) error {
	ln, srvURL, err := listenLocal()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h(srvURL), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening %s\n", srvURL)
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	return srv.Serve(ln)
}

// buildMcpgate builds ./cmd/mcpgate into dir. The package is named by its
// import path, so the build works from any directory inside the module.
func buildMcpgate(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "mcpgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/mcpgate/mcpgate/cmd/mcpgate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mcpgate: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return bin, nil
}

var listeningLine = regexp.MustCompile(`listening on (http://\S+)/mcp`)

// startMcpgate runs `mcpgate serve --addr 127.0.0.1:0` with args, its stderr
// (the log) into a file in dir, and learns its port from the
// "mcpgate: listening on http://.../mcp" line. A file rather than a pipe, so
// that the driver pays nothing to drain mcpgate's access log.
func startMcpgate(bin, dir string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, fmt.Sprintf("mcpgate-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = logf
	cmd.Stdout = logf
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: "mcpgate", cmd: cmd, logPath: logPath}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second) // a 4 MB spec takes seconds on a busy machine
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if m := listeningLine.FindSubmatch(b); m != nil {
			p.url = string(m[1])
			// cmd.Wait runs in the goroutine above; stop must not wait twice.
			p.cmd = &exec.Cmd{Process: cmd.Process}
			return p, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("mcpgate exited before listening (%v): %s", err, p.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("mcpgate not listening after 60s: %s", p.logTail())
}

// procStatFields returns the fields of /proc/<pid>/stat after the command
// name (which may hold spaces and parentheses), so fields[0] is field 3.
func procStatFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// procCPU is utime + stime (fields 14 and 15) of pid.
func procCPU(pid int) (time.Duration, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields, want at least 15", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procRSS is VmRSS of pid, in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q: %v", pid, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// metricsClient reads /metrics without keeping a connection, so that the
// scrape leaves no idle connection (and its goroutines) behind in the target.
var metricsClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// scrapeMetrics reads the unlabelled samples of a Prometheus text exposition
// at base/metrics. ok is false when /metrics does not answer 200.
func scrapeMetrics(base string) (m map[string]float64, ok bool) {
	resp, err := metricsClient.Get(base + "/metrics")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, false
	}
	m = make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			m[f[0]] = v
		}
	}
	return m, true
}

// writeRuntimeMetrics writes the two client_golang default metrics the bench
// reads, for the role children (which do not link client_golang).
func writeRuntimeMetrics(b *strings.Builder) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(b, "go_memstats_alloc_bytes_total %d\ngo_goroutines %d\n", ms.TotalAlloc, runtime.NumGoroutine())
}
