package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// matrixFeatures are the words a cell of the support matrix may hold, in
// the order the test checks them.
var matrixFeatures = []string{"tools", "progress", "cancel", "tasks", "list_changed"}

// matrixModes are the matrix's columns, in the table's order.
var matrixModes = []string{"stateless HTTP", "stateful HTTP", "stdio", "NoETL endpoint"}

type matrixCell struct {
	version, mode string
	claims        map[string]bool
}

// readMatrix reads the support matrix from docs/protocols.md: the table
// between the support-matrix markers.
func readMatrix(t *testing.T) []matrixCell {
	t.Helper()
	doc, err := os.ReadFile("../../docs/protocols.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "<!-- support-matrix -->")
	table, _, ok2 := strings.Cut(table, "<!-- /support-matrix -->")
	if !ok || !ok2 {
		t.Fatal("docs/protocols.md: no table between <!-- support-matrix --> and <!-- /support-matrix -->")
	}
	var cells []matrixCell
	for i, line := range strings.Split(strings.TrimSpace(table), "\n") {
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for j := range cols {
			cols[j] = strings.TrimSpace(cols[j])
		}
		switch {
		case i == 0:
			if !slices.Equal(cols, append([]string{"version"}, matrixModes...)) {
				t.Fatalf("docs/protocols.md: the matrix's columns are %q, want version and %q", cols, matrixModes)
			}
			continue
		case i == 1:
			continue // |---|
		case len(cols) != 1+len(matrixModes):
			t.Fatalf("docs/protocols.md: matrix row %q has %d cells", line, len(cols))
		}
		for j, mode := range matrixModes {
			c := matrixCell{version: cols[0], mode: mode, claims: map[string]bool{}}
			for _, w := range strings.Fields(cols[1+j]) {
				if !slices.Contains(matrixFeatures, w) {
					t.Fatalf("docs/protocols.md: %s / %s claims %q, not one of %q", c.version, mode, w, matrixFeatures)
				}
				c.claims[w] = true
			}
			cells = append(cells, c)
		}
	}
	if len(cells) != 5*len(matrixModes) {
		t.Fatalf("docs/protocols.md: %d matrix cells, want 5 versions × %d modes", len(cells), len(matrixModes))
	}
	return cells
}

// TestSupportMatrix drives every cell of the support matrix
// (docs/protocols.md) with go-sdk's client at the row's version, through
// the real binary in the column's mode, in front of the example playbook
// engine and a federated MCP server; a cell that claims more or less than
// what happens fails.
func TestSupportMatrix(t *testing.T) {
	t.Parallel() // beside TestClient: see there
	b := setup(t)
	cells := readMatrix(t)

	engineURL := startPlaybookEngine(t, b.playbooks, "--step", "300ms")
	fed := newFederatedServer(t)
	cfg := filepath.Join(t.TempDir(), "mcpgate.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`upstreams:
  - name: noetl
    base_url: %s
    openapi: %s/openapi.json
    auth: {mode: forward}
    playbooks: {poll_interval: 100ms}
  - name: fed
    mcp: {url: %s, protocol_version: 2025-11-25, refresh: -1s}
    auth: {mode: none}
`, engineURL, engineURL, fed.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	stateless, statelessLog := startGatewayLog(t, b.mcpgate, "serve", "--addr", "127.0.0.1:0", "--config", cfg)
	stateful, statefulLog := startGatewayLog(t, b.mcpgate, "serve", "--stateful", "--addr", "127.0.0.1:0", "--config", cfg)

	for _, c := range cells {
		t.Run(c.version+"/"+c.mode, func(t *testing.T) {
			env := &matrixEnv{t: t, cell: c, engine: engineURL, fed: fed}
			switch c.mode {
			case "stateless HTTP":
				env.url, env.log = stateless, statelessLog
			case "stateful HTTP":
				env.url, env.log = stateful, statefulLog
			case "NoETL endpoint":
				env.url, env.log = strings.TrimSuffix(stateless, "/mcp")+"/api/mcp/playbook/demo/slow/jsonrpc", statelessLog
			case "stdio":
				env.log = &syncBuffer{}
				env.stdio = func() *exec.Cmd {
					cmd := exec.Command(b.mcpgate, "stdio", "--config", cfg)
					cmd.Stderr = env.log
					return cmd
				}
			}
			got := map[string]bool{}
			if ok, v := env.speaks(); !ok {
				for _, f := range matrixFeatures {
					env.fail(f, "asked for %s, the session speaks %s", c.version, v)
				}
			} else {
				for _, f := range matrixFeatures {
					got[f] = env.check(f)
				}
			}
			for _, f := range matrixFeatures {
				if got[f] != c.claims[f] {
					defer func() { t.Logf("the gateway's log:\n%s", lastLines(env.log.String(), 40)) }()
					t.Errorf("%s / %s: %s works: %v; the matrix says %v (%s)", c.version, c.mode, f, got[f], c.claims[f], env.why[f])
				}
			}
		})
	}
}

// matrixEnv is one cell's run.
type matrixEnv struct {
	t      *testing.T
	cell   matrixCell
	engine string
	fed    *federatedServer
	url    string           // HTTP modes
	stdio  func() *exec.Cmd // stdio
	log    *syncBuffer      // the gateway's log
	why    map[string]string
}

// connect opens a go-sdk client session at the cell's version, with opts.
func (e *matrixEnv) connect(opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "matrix", Version: "1"}, opts)
	var tr mcp.Transport
	if e.stdio != nil {
		tr = &mcp.CommandTransport{Command: e.stdio()}
	} else {
		// A caller with a token, as in production: an anonymous caller's
		// runs are never merged, so a hang-up cancels them at once anyway.
		tr = &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{"matrix-caller"}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: e.cell.version})
	if err != nil {
		e.t.Fatalf("connect at %s: %v", e.cell.version, err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// bearer sends its token on every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// speaks reports whether the cell's mode speaks the cell's version: a
// client that asks for it gets it, not another one it falls back to.
func (e *matrixEnv) speaks() (bool, string) {
	v := e.connect(nil).InitializeResult().ProtocolVersion
	return v == e.cell.version, v
}

// label is a run's label, unique to the check and the cell: the gateway
// hands a succeeded run to a same call within its dedup window.
func (e *matrixEnv) label(check string) string {
	return fmt.Sprintf("%s-%s-%s-%d", check, e.cell.version, strings.ReplaceAll(e.cell.mode, " ", "-"), time.Now().UnixNano())
}

func (e *matrixEnv) fail(f, format string, args ...any) bool {
	if e.why == nil {
		e.why = map[string]string{}
	}
	e.why[f] = fmt.Sprintf(format, args...)
	return false
}

// slowTool is the playbook tool the checks run: demo/slow, five steps of
// 300 ms. The NoETL endpoint serves only its own.
const slowTool = "demo_slow"

// notListedWithin is how long a cell that claims no list_changed waits for
// one after the new tool is listed: the gateway sends it before that list's
// answer, so it would be on the client's stream by then.
const notListedWithin = 5 * time.Second

func (e *matrixEnv) check(f string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch f {
	case "tools":
		s := e.connect(nil)
		res, err := s.ListTools(ctx, nil)
		if err != nil {
			return e.fail(f, "tools/list: %v", err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Contains(names, slowTool) {
			return e.fail(f, "tools/list: %v", names)
		}
		out, err := s.CallTool(ctx, &mcp.CallToolParams{Name: slowTool, Arguments: map[string]any{"label": e.label("tools")}})
		if err != nil || out.IsError || !strings.Contains(toolText(out), "counted 5 steps") {
			return e.fail(f, "tools/call: %v %s", err, toolText(out))
		}
		return true

	case "progress":
		var n atomic.Int32
		s := e.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { n.Add(1) }})
		p := &mcp.CallToolParams{Name: slowTool, Arguments: map[string]any{"label": e.label("progress")}}
		p.SetProgressToken("p-1")
		if out, err := s.CallTool(ctx, p); err != nil || out.IsError {
			return e.fail(f, "tools/call: %v %s", err, toolText(out))
		}
		if n.Load() == 0 {
			return e.fail(f, "no notifications/progress during a 1.5 s run")
		}
		return true

	case "cancel":
		s := e.connect(nil)
		label := e.label("cancel")
		callCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := s.CallTool(callCtx, &mcp.CallToolParams{Name: slowTool, Arguments: map[string]any{"label": label}})
			done <- err
		}()
		id := waitExecution(e.t, e.engine, label)
		// The call's own log line is the first "playbook call" line after
		// the cancel: the engine may list the run before the runner has
		// read its execution id, and the line then names none.
		mark := len(e.log.String())
		stop()
		<-done
		// At once: the call saw the notification (its line says at_once),
		// or it saw the hang-up first and the notification then cut the
		// run's linger short (the runner's line says so).
		line, ok := nextLogLine(e.log, mark, `msg="playbook call"`, 30*time.Second)
		if !ok {
			return e.fail(f, "no playbook call log line after the cancel")
		}
		if strings.Contains(line, "upstream_cancel=at_once") {
			return true
		}
		if !strings.Contains(line, "upstream_cancel=planned") {
			return e.fail(f, "the call's log line: %s", line)
		}
		// The runner's at-once line names the id only when the engine had
		// given it by then; the run's own end line always does.
		if _, ok := nextLogLine(e.log, mark, "the client cancelled the call it had left (no linger)", 10*time.Second); !ok {
			return e.fail(f, "the call's log line: %s, and the runner logged no cancel at once", line)
		}
		if !hasLogLine(e.log, `msg="playbook run"`, id+` outcome=cancelled`, 10*time.Second) {
			return e.fail(f, "the call's log line: %s, and run %s did not end cancelled", line, id)
		}
		return true

	case "tasks":
		return e.checkTasks()

	case "list_changed":
		if e.cell.mode == "NoETL endpoint" {
			return e.fail(f, "one playbook, no federated tools, no stream")
		}
		changed := make(chan struct{}, 16)
		s := e.connect(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
		if _, err := s.ListTools(ctx, nil); err != nil {
			return e.fail(f, "tools/list: %v", err)
		}
		name := e.fed.addTool()
		// The gateway has relisted once its list holds the new tool; a
		// notification it sends comes before that list's answer would.
		for {
			res, err := s.ListTools(ctx, nil)
			if err != nil {
				return e.fail(f, "tools/list: %v", err)
			}
			if slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return strings.HasSuffix(t.Name, name) }) {
				break
			}
			select {
			case <-changed:
				return true
			case <-ctx.Done():
				return e.fail(f, "the new tool %s was never listed", name)
			case <-time.After(50 * time.Millisecond):
			}
		}
		// A cell that claims list_changed waits for it as long as the
		// check may take: the notification may still be on its way on the
		// GET stream. A cell that claims none waits notListedWithin, the
		// time a notification already sent takes to arrive, not the minute.
		wait := ctx
		if !e.cell.claims[f] {
			var stop context.CancelFunc
			wait, stop = context.WithTimeout(ctx, notListedWithin)
			defer stop()
		}
		select {
		case <-changed:
			return true
		case <-wait.Done():
			return e.fail(f, "no notifications/tools/list_changed")
		}
	}
	panic(f)
}

// checkTasks sends a task-augmented tools/call the raw way (go-sdk's client
// has no tasks) at the cell's version, in the cell's mode.
func (e *matrixEnv) checkTasks() bool {
	const f = "tasks"
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":{"label":%q},"task":{"ttl":60000}}}`, slowTool, e.label("task"))
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"matrix","version":"1"}}}`, e.cell.version)
	if e.cell.version >= "2026-07-28" {
		// No initialize; the version and capabilities travel with the call.
		init = ""
		call = strings.Replace(call, `"task":{"ttl":60000}`, fmt.Sprintf(`"task":{"ttl":60000},"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}}`, e.cell.version), 1)
	}
	var answer string
	if e.stdio != nil {
		cmd := e.stdio()
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			e.t.Fatal(err)
		}
		defer func() { in.Close(); cmd.Wait() }()
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		if init != "" {
			io.WriteString(in, init+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			sc.Scan()
		}
		io.WriteString(in, call+"\n")
		sc.Scan()
		answer = sc.Text()
	} else {
		h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if init != "" {
			resp, _ := matrixPOST(e.t, e.url, init, h)
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				h.Set("Mcp-Session-Id", id)
			}
			h.Set("Mcp-Protocol-Version", e.cell.version)
			matrixPOST(e.t, e.url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		} else {
			h.Set("Mcp-Protocol-Version", e.cell.version)
			h.Set("Mcp-Method", "tools/call")
			h.Set("Mcp-Name", slowTool)
		}
		_, answer = matrixPOST(e.t, e.url, call, h)
	}
	var m struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(sseData(answer)), &m); err != nil || m.Result.Task.TaskID == "" {
		return e.fail(f, "a task-augmented call answered %.300s", answer)
	}
	return true
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func matrixPOST(t *testing.T, url, body string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// sseData is the data of the last SSE event in body, or body when it is
// plain JSON.
func sseData(body string) string {
	data := body
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
	return data
}

func toolText(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitExecution waits for the engine to start a run whose workload has
// label, and returns its execution id.
func waitExecution(t *testing.T, engineURL, label string) string {
	t.Helper()
	var id string
	if !eventually(30*time.Second, func() bool {
		resp, err := http.Get(engineURL + "/api/executions")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct {
			Executions []struct {
				ID       string         `json:"execution_id"`
				Workload map[string]any `json:"workload"`
			} `json:"executions"`
		}
		json.NewDecoder(resp.Body).Decode(&list)
		for _, r := range list.Executions {
			if r.Workload["label"] == label {
				id = r.ID
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the engine never started a run labelled %s", label)
	}
	return id
}

// nextLogLine returns the first line of the gateway's log, from byte
// offset from on, that holds msg, waiting at most d for one.
func nextLogLine(log *syncBuffer, from int, msg string, d time.Duration) (string, bool) {
	var found string
	ok := eventually(d, func() bool {
		for _, line := range strings.Split(log.String()[from:], "\n") {
			if strings.Contains(line, msg) {
				found = line
				return true
			}
		}
		return false
	})
	return found, ok
}

// hasLogLine reports whether the gateway logs, within d, a line holding
// msg and naming execution id.
func hasLogLine(log *syncBuffer, msg, id string, d time.Duration) bool {
	re := regexp.MustCompile(`(?m)^.*` + regexp.QuoteMeta(msg) + `.*execution_id=` + regexp.QuoteMeta(id) + `.*$`)
	return eventually(d, func() bool { return re.MatchString(log.String()) })
}

// startPlaybookEngine starts the example playbook engine on a free port.
func startPlaybookEngine(t *testing.T, bin string, flags ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0"}, flags...)...)
	out := &syncBuffer{}
	cmd.Stderr = out
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return listeningOn(t, "the playbook engine", regexp.MustCompile(`playbooks: listening on (http://\S+)`), out)
}

// federatedServer is a real MCP server (go-sdk's, over Streamable HTTP) the
// gateway federates, whose tools the test can change.
type federatedServer struct {
	url    string
	server *mcp.Server
	mu     sync.Mutex
	n      int
}

func newFederatedServer(t *testing.T) *federatedServer {
	t.Helper()
	f := &federatedServer{server: mcp.NewServer(&mcp.Implementation{Name: "fed", Version: "1"}, nil)}
	f.addTool()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server }, nil))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// addTool adds a tool of a new name and returns the name.
func (f *federatedServer) addTool() string {
	f.mu.Lock()
	f.n++
	name := fmt.Sprintf("tick%d", f.n)
	f.mu.Unlock()
	mcp.AddTool(f.server, &mcp.Tool{Name: name, Description: "Says tick."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "tick"}}}, nil, nil
	})
	return name
}
