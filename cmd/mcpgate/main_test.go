package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// petstore has 19 operations and none tagged agent-exposed.
const petstore = "../../gateway/testdata/swagger-petstore-3.0.yaml"

// orchestrator is tagged the orchestrator-core way: 8 tools.
const orchestrator = "../../gateway/testdata/orchestrator-tags.yaml"

// runCLI runs the command line in-process, as main does.
func runCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = run(ctx, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// syncBuffer is a bytes.Buffer safe for concurrent use: serve's background
// work (the documents' validation) may still log after run returns, as it
// would to a process's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // the whole line, less its newline
	}{
		{nil, "mcpgate: name a command: serve, stdio, tools, audit or version; see mcpgate --help"},
		{[]string{"bogus"}, `mcpgate: unknown command "bogus"; see mcpgate --help`},
		{[]string{"--bogus"}, "mcpgate: unknown flag --bogus: name a command first; see mcpgate --help"},
		{[]string{"help", "bogus"}, `mcpgate: no help for "bogus": not a command; see mcpgate --help`},
		{[]string{"serve", "--bogus"}, "mcpgate serve: unknown flag --bogus; see mcpgate serve --help"},
		{[]string{"serve", "-bogus"}, "mcpgate serve: unknown flag --bogus; see mcpgate serve --help"},
		{[]string{"serve", "--addr"}, "mcpgate serve: --addr needs a value; see mcpgate serve --help"},
		{[]string{"serve", "--stateful=maybe"}, `mcpgate serve: --stateful: "maybe" is not true or false; see mcpgate serve --help`},
		{[]string{"serve", "extra"}, `mcpgate serve: unexpected argument "extra"; see mcpgate serve --help`},
		{[]string{"stdio", "--openapi"}, "mcpgate stdio: --openapi needs a value; see mcpgate stdio --help"},
		{[]string{"stdio", "--log-level", "loud"}, `mcpgate stdio: --log-level: "loud" is not debug, info, warn or error; see mcpgate stdio --help`},
		{[]string{"tools", "--format", "xml"}, `mcpgate tools: --format: "xml" is not json or table; see mcpgate tools --help`},
		{[]string{"tools", "--name-style", "loose"}, `mcpgate tools: --name-style: "loose" is not strict or spec; see mcpgate tools --help`},
		{[]string{"tools", "--lock", "x.lock"}, "mcpgate tools: unknown flag --lock; see mcpgate tools --help"},
		{[]string{"audit", "--fail-on", "nope"}, `mcpgate audit: --fail-on: "nope" is not error, warning or never; see mcpgate audit --help`},
		{[]string{"audit", "--format", "pdf"}, `mcpgate audit: --format: "pdf" is not table, json, markdown or sarif; see mcpgate audit --help`},
		{[]string{"audit", "--write-lock"}, "mcpgate audit: --write-lock needs a value; see mcpgate audit --help"},
		{[]string{"version", "now"}, `mcpgate version: unexpected argument "now"; see mcpgate version --help`},
		{[]string{"version", "--short"}, "mcpgate version: unknown flag --short; see mcpgate version --help"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, context.Background(), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if stderr != tt.want+"\n" {
				t.Errorf("stderr = %q\nwant     %q", stderr, tt.want+"\n")
			}
		})
	}
}

// TestHelp: --help and -h print to stdout, for every command, and exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"serve", "--help"}, {"serve", "-h"}, {"stdio", "--help"}, {"tools", "-h"}, {"audit", "--help"},
		{"version", "--help"}, {"help", "audit"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, context.Background(), args...)
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if !strings.HasPrefix(stdout, "Usage: mcpgate "+args[0]) && !strings.Contains(stdout, "Usage:\n  mcpgate serve") && !strings.HasPrefix(stdout, "Usage: mcpgate "+args[len(args)-1]) {
				t.Errorf("stdout is not the help:\n%s", stdout)
			}
			if args[0] == "audit" && !strings.Contains(stdout, "--fail-on SEVERITY\n      exit 1 on findings of this SEVERITY or worse: error, warning or never (default error)") {
				t.Errorf("audit help does not show --fail-on and its default:\n%s", stdout)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^mcpgate \S+ go1\.\d+\S* \w+/\w+\n$`)
	for _, arg := range []string{"version", "--version"} {
		code, stdout, stderr := runCLI(t, context.Background(), arg)
		if code != 0 || stderr != "" || !want.MatchString(stdout) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, stdout, stderr)
		}
	}
}

// TestInputErrors: bad input is one line naming the flag and the file, exit
// 2, and no Go type names.
func TestInputErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	html := write("page.html", "<!DOCTYPE html>\n<html><body><p>API docs</p></body></html>\n")
	cfg := write("bad.yaml", "upstreams:\n  - openapi: x.yaml\n    max_concurrent: lots\n")
	badLock := write("bad.lock", `{"version": 9, "tools": []}`)
	missing := filepath.Join(dir, "x.lock")
	elsewhere := httptest.NewServer(http.NotFoundHandler())
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/openapi.json", http.StatusFound))
	defer redirecting.Close()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"tools", "--openapi", redirecting.URL + "/openapi.json"}, "mcpgate: --openapi " + redirecting.URL + "/openapi.json: redirected from " +
			redirecting.URL + "/openapi.json to " + elsewhere.URL + "/openapi.json, another origin: only redirects within the document URL's scheme, host and port are followed (give the final URL instead)"},
		{[]string{"tools", "--openapi", html}, "mcpgate: --openapi " + html + ": not a JSON or YAML document (it looks like an HTML page)"},
		{[]string{"tools", "--openapi", filepath.Join(dir, "none.json")}, "mcpgate: --openapi: open " + filepath.Join(dir, "none.json") + ": no such file or directory"},
		{[]string{"tools", "--config", cfg}, "mcpgate: --config " + cfg + `: line 3: upstreams[0].max_concurrent is "lots", not an integer`},
		{[]string{"tools", "--config", filepath.Join(dir, "none.yaml")}, "mcpgate: --config: open " + filepath.Join(dir, "none.yaml") + ": no such file or directory"},
		{[]string{"audit", "--openapi", orchestrator, "--lock", missing}, "mcpgate: --lock: open " + missing + ": no such file or directory"},
		{[]string{"serve", "--openapi", orchestrator, "--lock", missing}, "mcpgate: --lock: open " + missing + ": no such file or directory"},
		{[]string{"audit", "--openapi", orchestrator, "--lock", badLock}, "mcpgate: --lock " + badLock + ": lockfile: version 9, want 2 (or 1)"},
	}
	goTypes := regexp.MustCompile(`map\[|interface \{|struct \{|\bint64\b|float64|!!|unmarshal|annotations:`)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), tt.args...)
			if code != 2 || stderr != tt.want+"\n" {
				t.Errorf("exit %d, stderr %q\nwant exit 2, %q", code, stderr, tt.want+"\n")
			}
			if goTypes.MatchString(stderr) {
				t.Errorf("a Go type name in %q", stderr)
			}
		})
	}
}

// TestNoTools: a document none of whose operations passes the gate gets a
// hint naming the gate, the operation count and the flags, from tools (on
// stderr, so --format json stays JSON) and from serve at start-up.
func TestNoTools(t *testing.T) {
	const hint = "none of the 19 operations of " + petstore + " is tagged agent-exposed: tag the ones to expose, or pass --expose-tag TAG (config expose_tags) or --all (config expose_all)"
	code, stdout, stderr := runCLI(t, context.Background(), "tools", "--openapi", petstore, "--format", "json")
	if code != 0 || stderr != "mcpgate: upstream api: no tools: "+hint+"\n" {
		t.Errorf("tools: exit %d, stderr %q", code, stderr)
	}
	if !strings.HasPrefix(stdout, "{") {
		t.Errorf("tools --format json: stdout is not JSON: %q", stdout)
	}
	_, _, stderr = runCLI(t, context.Background(), "tools", "--openapi", petstore, "--expose-tag", "pet", "--expose-tag", "store")
	if strings.Contains(stderr, "no tools") {
		t.Errorf("tools with a matching gate: %q", stderr)
	}
	_, _, stderr = runCLI(t, context.Background(), "tools", "--openapi", petstore, "--expose-tag", "nope", "--expose-tag", "none")
	if !strings.Contains(stderr, "is tagged nope or none:") {
		t.Errorf("the hint does not name the gate tags: %q", stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, reports, and shuts down at once
	code, _, stderr = runCLI(t, ctx, "serve", "--openapi", petstore, "--upstream", "http://127.0.0.1:9", "--addr", "127.0.0.1:0", "--drain-delay", "0s")
	if code != 0 {
		t.Fatalf("serve: exit %d: %s", code, stderr)
	}
	var warns []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "no operation passed the gate") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "upstream=api") || !strings.Contains(warns[0], hint) {
		t.Errorf("serve: want one warn line with the hint, got %q\nstderr:\n%s", warns, stderr)
	}
}

// TestLockDrift: --write-lock says what it wrote; audit --lock and serve
// --lock print the same drift, one line per tool, a rename as a rename; audit
// exits 1 on drift, 0 without.
func TestLockDrift(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "mcpgate.lock.json")
	code, _, stderr := runCLI(t, context.Background(), "audit", "--openapi", orchestrator, "--write-lock", lock)
	if code != 0 || stderr != "mcpgate: wrote 8 tools to "+lock+"\n" {
		t.Fatalf("--write-lock: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCLI(t, context.Background(), "audit", "--openapi", orchestrator, "--lock", lock); code != 0 {
		t.Errorf("no drift: exit %d, want 0", code)
	}
	orig, err := os.ReadFile(orchestrator)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.NewReplacer(
		"tags: [processes, agent-exposed, agent-destructive]", "tags: [processes, agent-exposed]",
		"operationId: health\n      summary: Health check\n      tags: [health]", "operationId: health\n      summary: Health check\n      tags: [health, agent-exposed]",
		"operationId: search_processes", "operationId: find_processes",
	).Replace(string(orig))
	doc := filepath.Join(dir, "edited.yaml")
	os.WriteFile(doc, []byte(edited), 0o600)
	want := []string{
		"lock: 3 tools drifted: 1 added, 0 removed, 1 renamed, 1 changed",
		"+ health: not in the lock",
		// Its title is its operationId's, so it changed too.
		"~ renamed search_processes → find_processes (same POST /api/processes/search): title a99e2bbfd0ff → ad0d56c11761 [CRITICAL]",
		"~ abort_process: destructiveHint true → false [CRITICAL]",
	}
	code, stdout, _ := runCLI(t, context.Background(), "audit", "--openapi", doc, "--lock", lock)
	if code != 1 {
		t.Errorf("audit --lock with drift: exit %d, want 1", code)
	}
	if !strings.HasSuffix(stdout, "\n"+strings.Join(want, "\n")+"\n") {
		t.Errorf("audit --lock:\n%s\nwant it to end with:\n%s", stdout, strings.Join(want, "\n"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr = runCLI(t, ctx, "serve", "--openapi", doc, "--upstream", "http://127.0.0.1:9", "--addr", "127.0.0.1:0", "--lock", lock, "--drain-delay", "0s")
	if code != 0 {
		t.Fatalf("serve --lock: exit %d: %s", code, stderr)
	}
	block := "mcpgate: --lock " + lock + ": not serving the 3 added, renamed or changed tools:\n" + strings.Join(want, "\n") + "\n"
	if !strings.Contains(stderr, block) {
		t.Errorf("serve --lock:\n%s\nwant:\n%s", stderr, block)
	}
	if !strings.Contains(stderr, "(6 tools, stateless)") { // 9 less the 3 held back
		t.Errorf("serve --lock does not serve the 6 undrifted tools:\n%s", stderr)
	}
}

// TestServeMetricsListener: --metrics-addr serves /metrics on a listener of
// its own, says where, and takes it off the main listener.
func TestServeMetricsListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--openapi", orchestrator, "--upstream", "http://127.0.0.1:9",
			"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--drain-delay", "0s"}, strings.NewReader(""), &out, &errOut)
	}()
	main := regexp.MustCompile(`listening on (http://\S+)/mcp`)
	metrics := regexp.MustCompile(`metrics on (http://\S+/metrics)\n`)
	var mainURL, metricsURL string
	for deadline := time.Now().Add(30 * time.Second); metricsURL == ""; time.Sleep(20 * time.Millisecond) {
		s := errOut.String()
		if m, mm := main.FindStringSubmatch(s), metrics.FindStringSubmatch(s); m != nil && mm != nil {
			mainURL, metricsURL = m[1], mm[1]
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not say where it listens:\n%s", s)
		}
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(metricsURL); code != http.StatusOK || !strings.Contains(body, "\nmcpgate_build_info{") {
		t.Errorf("GET %s: %d %.200s", metricsURL, code, body)
	}
	if code, _ := get(mainURL + "/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the main listener: %d, want 404", code)
	}
	if code, _ := get(strings.TrimSuffix(metricsURL, "/metrics") + "/mcp"); code != http.StatusNotFound {
		t.Errorf("GET /mcp on the metrics listener: %d, want 404", code)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve: exit %d: %s", code, errOut.String())
	}
}

// TestAuditEscapedJSON: a JSON document that writes astral characters as
// surrogate-pair escapes (what Python's json.dumps writes by default) and
// "/" as "\/" (PHP's json_encode) is audited, with lines, as tools and serve
// load it; audit used to exit 2 on it.
func TestAuditEscapedJSON(t *testing.T) {
	doc := `{
  "openapi": "3.0.3",
  "info": {"title": "Launches \ud83d\ude80", "version": "1"},
  "servers": [{"url": "https:\/\/api.example.com\/v1"}],
  "paths": {
    "\/launches\/{id}": {
      "delete": {
        "operationId": "scrub_launch",
        "summary": "Scrub a launch \ud83d\udeab\ud83d\ude80",
        "tags": ["agent-exposed", "agent-readonly"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "scrubbed \u2705"}}
      }
    }
  }
}
`
	path := filepath.Join(t.TempDir(), "launches.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, context.Background(), "tools", "--openapi", path); code != 0 {
		t.Fatalf("tools: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "audit", "--openapi", path, "--fail-on", "never")
	if code != 0 || stderr != "" {
		t.Fatalf("audit: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "MCPG002 scrub_launch: DELETE /launches/{id} is marked read-only (readOnlyHint from tag:agent-readonly) ["+path+":7]") {
		t.Errorf("audit names no line for the finding:\n%s", stdout)
	}
}

// TestToolsCatalogMode: `tools` and `audit` say what search mode's
// tools/list would hold; flat mode says nothing.
func TestToolsCatalogMode(t *testing.T) {
	abs, err := filepath.Abs(petstore)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	write := func(mode string) {
		body := fmt.Sprintf("catalog: {mode: %s, pinned: [getPetById]}\nupstreams:\n  - {openapi: %q, expose_all: true, base_url: \"http://127.0.0.1:1\"}\n", mode, abs)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const line = "tools/list: search mode (catalog.mode search, 19 tools, threshold 100) lists search_tools, describe_tools, call_read_only_tool, call_tool, getPetById;"
	write("search")
	for _, args := range [][]string{{"tools"}, {"tools", "--explain"}, {"audit", "--fail-on", "never"}} {
		code, stdout, stderr := runCLI(t, context.Background(), append(args, "--config", cfg)...)
		if code != 0 || !strings.Contains(stdout, line) {
			t.Errorf("%v: %d, no line %q in\n%s\n%s", args, code, line, stdout, stderr)
		}
	}
	write("flat")
	if _, stdout, _ := runCLI(t, context.Background(), "tools", "--config", cfg); strings.Contains(stdout, "search mode") {
		t.Errorf("flat: %s", stdout)
	}
}

// TestDemoLockRoundTrip: the lockfile `audit --write-lock` writes of the
// built-in demo — tools, a configured prompt, a playbook's prompt and
// resources — is read back by `audit --lock` with no drift.
func TestDemoLockRoundTrip(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "demo.lock.json")
	if code, _, stderr := runCLI(t, context.Background(), "audit", "--fail-on", "never", "--write-lock", lock); code != 0 {
		t.Fatalf("--write-lock: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, context.Background(), "audit", "--fail-on", "never", "--lock", lock)
	if code != 0 || !strings.Contains(stdout, "lock: no drift") {
		t.Errorf("--lock: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
