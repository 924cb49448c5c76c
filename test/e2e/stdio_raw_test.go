package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rawAnswer is one line `mcpgate stdio` wrote on stdout.
type rawAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	line string
}

// String is the line as written, for failure messages.
func (a rawAnswer) String() string { return a.line }

const (
	rawInit        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	rawInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	rawCall        = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_products","arguments":{}}}`
)

// TestStdioRaw runs the real `mcpgate stdio` (the built-in demo: no upstream
// to start) with raw lines on stdin, the way a hand-written or buggy client
// would, and checks every line it answers, and that it exits 0 both when
// stdin closes and after a shutdown request with stdin still open.
func TestStdioRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	b := build(t)
	type want struct {
		id   string // the answer's id, as JSON
		code int64  // 0: a result
		has  string // in the answer's line
	}
	tests := []struct {
		name     string
		lines    []string
		shutdown bool // end with a shutdown request and keep stdin open, else close stdin
		want     []want
	}{
		{
			name: "bad lines, then the end of stdin",
			lines: []string{
				`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`,
				`this is not json`,
				`{"foo":1}`,
				`42`,
				`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
				``,
				rawInit, rawInitialized,
				`{"jsonrpc":"2.0","id":3,"method":"tools/list"`,
				rawCall,
			},
			want: []want{
				{"0", -32600, "send an initialize request first"},
				{"null", -32700, `"offset":2`},
				{"null", -32600, `missing \"jsonrpc\": \"2.0\"`},
				{"null", -32600, "not a number"},
				{"null", -32600, "batch"},
				{"1", 0, `"serverInfo"`},
				{"null", -32700, `"line":9`},
				{"2", 0, "Node Cisco"},
			},
		},
		{
			name:     "initialize, a call, then shutdown with stdin open",
			lines:    []string{rawInit, rawInitialized, rawCall},
			shutdown: true,
			want: []want{
				{"1", 0, `"serverInfo"`},
				{"2", 0, "Node Cisco"},
				{`"bye"`, 0, `{"jsonrpc":"2.0","id":"bye","result":null}`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(b.mcpgate, "stdio")
			var stderr syncBuffer
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			answers := make(chan rawAnswer, 100)
			go func() {
				defer close(answers)
				sc := bufio.NewScanner(stdout)
				sc.Buffer(nil, 16<<20)
				for sc.Scan() {
					var a rawAnswer
					if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
						t.Errorf("stdout has a line that is not JSON: %v: %.200s", err, sc.Text())
						continue
					}
					a.line = sc.Text()
					answers <- a
				}
			}()
			for _, l := range tt.lines {
				io.WriteString(stdin, l+"\n")
			}
			if tt.shutdown {
				io.WriteString(stdin, `{"jsonrpc":"2.0","id":"bye","method":"shutdown"}`+"\n")
			} else {
				stdin.Close()
			}

			var got []rawAnswer
			timeout := time.After(20 * time.Second)
		read:
			for {
				select {
				case a, ok := <-answers:
					if !ok {
						break read
					}
					got = append(got, a)
				case <-timeout:
					cmd.Process.Kill()
					t.Fatalf("stdout not closed within 20s; answers: %v\nstderr:\n%s", got, stderr.String())
				}
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("mcpgate stdio: %v, want exit status 0\nstderr:\n%s", err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("mcpgate stdio did not exit\nstderr:\n%s", stderr.String())
			}

			// Answers may come in any order: match each wanted one to the
			// first unmatched answer with its id and code.
			used := make([]bool, len(got))
		next:
			for _, w := range tt.want {
				for i, a := range got {
					code := int64(0)
					if a.Error != nil {
						code = a.Error.Code
					}
					if !used[i] && string(a.ID) == w.id && code == w.code && strings.Contains(a.line, w.has) {
						used[i] = true
						continue next
					}
				}
				t.Errorf("no answer with id %s, code %d, containing %q", w.id, w.code, w.has)
			}
			for i, a := range got {
				if a.Error != nil && a.Error.Code == 0 {
					t.Errorf("an error with code 0: %s", a.line)
				}
				if !used[i] {
					t.Errorf("unexpected answer: %.300s", a.line)
				}
			}
		})
	}
}

// TestStdioVersionAndWarnings: the real binary reports one version — what
// `mcpgate version` prints is what `mcpgate stdio` answers in initialize's
// serverInfo — and `mcpgate stdio` does not print the HTTP-only warning
// about unverified bearer tokens (over stdio there is no inbound token).
func TestStdioVersionAndWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	b := build(t)
	out, err := exec.Command(b.mcpgate, "version").Output()
	fields := strings.Fields(string(out))
	if err != nil || len(fields) < 2 {
		t.Fatalf("mcpgate version: %v %q", err, out)
	}
	cmd := exec.Command(b.mcpgate, "stdio")
	cmd.Stdin = strings.NewReader(rawInit + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcpgate stdio: %v\n%s", err, stderr.String())
	}
	var a struct {
		Result struct {
			ServerInfo struct{ Name, Version string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(stdout, &a); err != nil || a.Result.ServerInfo.Version != fields[1] {
		t.Errorf("initialize's serverInfo %+v (%v), `mcpgate version` says %q", a.Result.ServerInfo, err, fields[1])
	}
	if strings.Contains(stderr.String(), "NOT verified") || strings.Contains(stderr.String(), "whatever token") {
		t.Errorf("mcpgate stdio printed the HTTP auth warning:\n%s", stderr.String())
	}

	// A packager's version (-ldflags -X) wins over the build information.
	bin := filepath.Join(t.TempDir(), "mcpgate")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/mcpgate/mcpgate/gateway.Version=v9.9.9-pkg", "./cmd/mcpgate")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags -X: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "mcpgate v9.9.9-pkg ") {
		t.Errorf("mcpgate version with -X: %v %q", err, out)
	}
}
