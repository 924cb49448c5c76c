package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
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

// String shows an output in a test's failure as the JSON call prints.
func (o *callOutput) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// runCall runs mcpgate call in-process and decodes its one JSON object.
func runCall(t *testing.T, args ...string) (int, *callOutput, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, context.Background(), append([]string{"call"}, args...)...)
	if code == 2 {
		return code, nil, stderr
	}
	var out callOutput
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON value:\n%s", stdout)
	}
	want := "" // ok: nothing on stderr
	if out.Status != "ok" {
		want = "mcpgate: " + out.Error + "\n"
	}
	if stderr != want || (code == 0) != (out.Status == "ok") {
		t.Errorf("exit %d, status %s, stderr %q; want stderr %q", code, out.Status, stderr, want)
	}
	return code, &out, stderr
}

func TestCallUsageErrors(t *testing.T) {
	t.Setenv("MCPGATE_MCP_URL", "")
	t.Setenv("NOETL_MCP_URL", "")
	const e = "--endpoint=http://127.0.0.1:1/mcp"
	for _, tc := range []struct {
		args []string
		want string // the line, less "mcpgate call: " and "; see mcpgate call --help"
	}{
		{[]string{e, "--tool", "t", "--arguments", "[1]"}, "--arguments: not a JSON object"},
		{[]string{e, "--tool", "t", "--arguments", "{"}, "--arguments: not JSON: unexpected EOF"},
		{[]string{e, "--tool", "t", "--arguments", "{} {}"}, "--arguments: more than one JSON value"},
		{[]string{e}, "--tool: required with --method tools/call"},
		{[]string{e, "--method", "tools/list", "--tool", "t"}, "--tool: only with --method tools/call"},
		{[]string{e, "--method", "ping", "--arguments", "{}"}, "--arguments: only with --method tools/call"},
		{[]string{e, "--method", "ping", "--params", `"x"`}, "--params: not a JSON object"},
		{[]string{e, "--method", "tools/list", "--params", `{}`}, "--params: not with --method tools/list"},
		{[]string{e, "--tool", "t", "--params", `{}`}, "--params: not with --method tools/call: use --tool and --arguments"},
		{[]string{e, "--method", ""}, "--method: empty"},
		{[]string{e, "--tool", "t", "--header", "Authorization Bearer s3cr3t"}, `--header #1: want "Name: value": no ":"`},
		{[]string{e, "--tool", "t", "--header", "X-A: 1", "--header", "Bearer s3cr3t: x"}, `--header #2: want "Name: value": the name is not a valid header name`},
		{[]string{e, "--tool", "t", "--timeout", "soon"}, `--timeout: "soon" is not a duration (30s) or a number of seconds`},
		{[]string{e, "--tool", "t", "--timeout", "-1s"}, `--timeout: "-1s" is not positive`},
		{[]string{e, "--tool", "t", "--request-id", "9007199254740993"}, "--request-id: out of range (±2^53)"},
		{[]string{"--endpoint", "ftp://user:s3cr3t@h/mcp", "--tool", "t"}, "--endpoint: not an http(s) URL with a host"},
		{[]string{"--tool", "t"}, "name the server: --endpoint URL, --server SLUG or --config F --upstream NAME (no endpoint: set MCPGATE_MCP_URL or NOETL_MCP_URL)"},
		{[]string{"--upstream", "x", "--tool", "t"}, "--upstream: only with --config"},
		{[]string{"--config", "x.yaml", "--tool", "t"}, "--config: name the upstream to call with --upstream"},
		{[]string{"--config", "x.yaml", "--upstream", "u", e}, "--config: not with --endpoint or --server"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, context.Background(), append([]string{"call"}, tc.args...)...)
			want := "mcpgate call: " + tc.want + "; see mcpgate call --help\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout, stderr, want)
			}
			if strings.Contains(stderr, "s3cr3t") {
				t.Fatalf("stderr quotes a secret: %q", stderr)
			}
		})
	}
}

func TestCallHelp(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "help", "call")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: mcpgate call [flags]\n\nSend one request to an MCP server") ||
		!strings.Contains(stdout, "  --header 'Name: value'\n") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	if _, stdout, _ := runCLI(t, context.Background(), "--help"); !strings.Contains(stdout, "\n  mcpgate call     send one request") {
		t.Fatalf("mcpgate --help does not list call:\n%s", stdout)
	}
}

func TestParseCallResolution(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	os.WriteFile(cfg, []byte(`
listen: 127.0.0.1:8080
upstreams:
  - name: api
    openapi: ./api.yaml
  - name: fs
    mcp: {url: "http://fs.local/mcp/"}
    timeout: 30s
  - name: k8s
    mcp: {server: kubernetes}
  - name: both
    mcp: {url: "http://x/mcp", server: x}
`), 0o644)
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		endpoint string
		server   string
		timeout  time.Duration
		wantErr  string
	}{
		{name: "endpoint flag wins", args: []string{"--endpoint", "http://e/mcp/", "--server", "k"},
			env: map[string]string{"MCPGATE_MCP_K_ENDPOINT": "http://k/mcp"}, endpoint: "http://e/mcp", server: "k", timeout: 60 * time.Second},
		{name: "server: mcpgate var", args: []string{"--server", "my-fs"},
			env:      map[string]string{"MCPGATE_MCP_MY_FS_ENDPOINT": "http://m/mcp", "NOETL_MCP_MY_FS_ENDPOINT": "http://n/mcp", "MCPGATE_MCP_URL": "http://u/mcp"},
			endpoint: "http://m/mcp", server: "my-fs", timeout: 60 * time.Second},
		{name: "server: noetl var", args: []string{"--server", "my-fs"},
			env:      map[string]string{"NOETL_MCP_MY_FS_ENDPOINT": "http://n/mcp", "MCPGATE_MCP_URL": "http://u/mcp"},
			endpoint: "http://n/mcp", server: "my-fs", timeout: 60 * time.Second},
		{name: "server: generic var", args: []string{"--server", "my-fs"},
			env: map[string]string{"NOETL_MCP_URL": "http://nu/mcp"}, endpoint: "http://nu/mcp", server: "my-fs", timeout: 60 * time.Second},
		{name: "generic vars", env: map[string]string{"MCPGATE_MCP_URL": "http://u/mcp", "NOETL_MCP_URL": "http://nu/mcp"}, endpoint: "http://u/mcp", timeout: 60 * time.Second},
		{name: "config url", args: []string{"--config", cfg, "--upstream", "fs"}, endpoint: "http://fs.local/mcp", server: "fs", timeout: 60 * time.Second},
		{name: "config server slug", args: []string{"--config", cfg, "--upstream", "k8s"},
			env: map[string]string{"NOETL_MCP_KUBERNETES_ENDPOINT": "http://k8s/mcp"}, endpoint: "http://k8s/mcp", server: "k8s", timeout: 60 * time.Second},
		{name: "config server slug unset", args: []string{"--config", cfg, "--upstream", "k8s"},
			wantErr: "--config " + cfg + `: upstream k8s: server "kubernetes": no endpoint: set MCPGATE_MCP_KUBERNETES_ENDPOINT, NOETL_MCP_KUBERNETES_ENDPOINT, MCPGATE_MCP_URL or NOETL_MCP_URL`},
		{name: "config not mcp", args: []string{"--config", cfg, "--upstream", "api"}, wantErr: "--config " + cfg + ": upstream api: not an MCP upstream (no mcp: block)"},
		{name: "config both", args: []string{"--config", cfg, "--upstream", "both"}, wantErr: "--config " + cfg + ": upstream both: mcp: url and server both set"},
		{name: "config no such upstream", args: []string{"--config", cfg, "--upstream", "nope"}, wantErr: "--config " + cfg + `: no upstream named "nope"`},
		{name: "config missing", args: []string{"--config", filepath.Join(dir, "no.yaml"), "--upstream", "x"}, wantErr: "--config: open " + filepath.Join(dir, "no.yaml") + ": no such file or directory"},
		{name: "bad env endpoint", env: map[string]string{"NOETL_MCP_URL": "k8s:8080"},
			wantErr: "mcpgate call: NOETL_MCP_URL: not an http(s) URL with a host; see mcpgate call --help"},
		{name: "timeout flag wins", args: []string{"--endpoint", "http://e/mcp", "--timeout", "2.5"},
			env: map[string]string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS": "7"}, endpoint: "http://e/mcp", timeout: 2500 * time.Millisecond},
		{name: "timeout duration", args: []string{"--endpoint", "http://e/mcp", "--timeout", "90s"}, endpoint: "http://e/mcp", timeout: 90 * time.Second},
		{name: "timeout mcpgate env", args: []string{"--endpoint", "http://e/mcp"},
			env: map[string]string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS": "7", "NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "9"}, endpoint: "http://e/mcp", timeout: 7 * time.Second},
		{name: "timeout noetl env", args: []string{"--endpoint", "http://e/mcp"},
			env: map[string]string{"NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "9"}, endpoint: "http://e/mcp", timeout: 9 * time.Second},
		{name: "timeout env bad", args: []string{"--endpoint", "http://e/mcp"}, env: map[string]string{"NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "soon"},
			wantErr: `mcpgate call: NOETL_MCP_REQUEST_TIMEOUT_SECONDS: "soon" is not a positive number of seconds; see mcpgate call --help`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--method", "ping")
			r, err := parseCall(args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.endpoint != tc.endpoint || r.server != tc.server || r.timeout != tc.timeout {
				t.Fatalf("endpoint, server, timeout = %q, %q, %v; want %q, %q, %v", r.endpoint, r.server, r.timeout, tc.endpoint, tc.server, tc.timeout)
			}
		})
	}
}

func TestHealthURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://h:8080/mcp", "http://h:8080/healthz"},
		{"http://h/sse", "http://h/healthz"},
		{"http://h/message", "http://h/healthz"},
		{"http://h/mcp/", "http://h/healthz"},
		{"http://h", "http://h/healthz"},
		{"http://h/api/mcp", "http://h/api/mcp/healthz"}, // NoETL: only a whole path of /mcp is replaced
		{"http://h/x?token=t#f", "http://h/x/healthz"},
	} {
		if got := healthURL(tc.in); got != tc.want {
			t.Errorf("healthURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResultShaping(t *testing.T) {
	for _, tc := range []struct{ result, norm, text string }{
		{``, `{}`, `{}`},
		{`null`, `{}`, `{}`},
		{` [1, 2] `, `{"value":[1,2]}`, `{"value":[1,2]}`},
		{`{"content":[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b"}]}`, ``, "a\nb"},
		{`{"content":[{"type":"image","data":"x"}], "n": 1}`, ``, `{"content":[{"type":"image","data":"x"}],"n":1}`},
		{`{"content":[{"type":"text","text":""}]}`, ``, ""},
		{`{"tools": []}`, ``, `{"tools":[]}`},
	} {
		norm := normalizeResult(json.RawMessage(tc.result))
		want := tc.norm
		if want == "" {
			want = tc.result
		}
		if string(norm) != want {
			t.Errorf("normalizeResult(%s) = %s, want %s", tc.result, norm, want)
		}
		if got := resultText(norm); got != tc.text {
			t.Errorf("resultText(%s) = %q, want %q", norm, got, tc.text)
		}
	}
}

// sdkServer is a go-sdk MCP server behind httptest: /mcp and /healthz. It
// records every POST to /mcp: its headers and its answer's content type.
type sdkServer struct {
	*httptest.Server
	mu    sync.Mutex
	posts []seenPost
	conns map[net.Conn]bool // open
}

func (s *sdkServer) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

type seenPost struct {
	header      http.Header
	contentType string // of the answer
}

func (s *sdkServer) seen() []seenPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenPost(nil), s.posts...)
}

// headerHook calls hook with the header as it is sent. go-sdk flushes SSE
// through http.ResponseController, which finds Flush through Unwrap.
type headerHook struct {
	http.ResponseWriter
	once sync.Once
	hook func(http.Header)
}

func (w *headerHook) WriteHeader(code int) {
	w.once.Do(func() { w.hook(w.Header()) })
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerHook) Write(b []byte) (int, error) {
	w.once.Do(func() { w.hook(w.Header()) })
	return w.ResponseWriter.Write(b)
}

func (w *headerHook) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func newSDKServer(t *testing.T, opts *mcp.StreamableHTTPOptions) *sdkServer {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "call-test", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: 2})
	// go-sdk does not cancel a handler when its client hangs up: slow
	// waits for the test's end, which releases it before the server closes.
	release := make(chan struct{})
	type greetIn struct {
		Name string `json:"name"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}, &mcp.TextContent{Text: "bye"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "pinger"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		// A request of the server's to the client, on the call's stream.
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "structured"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct {
		N int `json:"n"`
	}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{}}, struct {
			N int `json:"n"`
		}{7}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "hi"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s := &sdkServer{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Recorded as the answer starts, before the client can read
			// it: the handler may still run after the client is done.
			s.mu.Lock()
			i := len(s.posts)
			s.posts = append(s.posts, seenPost{header: r.Header.Clone()})
			s.mu.Unlock()
			w = &headerHook{ResponseWriter: w, hook: func(h http.Header) {
				s.mu.Lock()
				s.posts[i].contentType = h.Get("Content-Type")
				s.mu.Unlock()
			}}
		}
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "yes" {
			http.Error(w, "no probe header", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	s.Server = httptest.NewUnstartedServer(mux)
	s.conns = map[net.Conn]bool{}
	s.Config.ConnState = func(c net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st == http.StateClosed || st == http.StateHijacked {
			delete(s.conns, c)
		} else {
			s.conns[c] = true
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(release) }) // first: cleanups run last-in first-out
	return s
}

func TestCallGoSDKServer(t *testing.T) {
	for _, mode := range []struct {
		name   string
		opts   mcp.StreamableHTTPOptions
		answer string // the content type of a call's answer
	}{
		{"stateful", mcp.StreamableHTTPOptions{}, "text/event-stream"},
		{"stateless", mcp.StreamableHTTPOptions{Stateless: true}, "text/event-stream"},
		{"stateless JSON", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "application/json"},
	} {
		stateless := mode.opts.Stateless
		t.Run(mode.name, func(t *testing.T) {
			s := newSDKServer(t, &mode.opts)
			ep := s.URL + "/mcp"
			auth := []string{"--endpoint", ep, "--header", "Authorization: Bearer good"}

			t.Run("tools/list follows every page", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--method", "tools/list")...)
				if code != 0 || out.Status != "ok" {
					t.Fatalf("exit %d: %+v", code, out)
				}
				var res struct {
					Tools []struct{ Name string } `json:"tools"`
				}
				json.Unmarshal(out.Result, &res)
				var names []string
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
				}
				if got := strings.Join(names, ","); got != "fail,greet,pinger,slow,structured" {
					t.Fatalf("tools = %s (page size 2: 3 pages)", got)
				}
				if out.Text != string(out.Result) || out.Tool != "" || out.Arguments != nil {
					t.Fatalf("text %q, tool %q, arguments %s", out.Text, out.Tool, out.Arguments)
				}
				var init struct {
					ServerInfo struct{ Name string } `json:"serverInfo"`
				}
				if json.Unmarshal(out.Initialize, &init); init.ServerInfo.Name != "call-test" {
					t.Fatalf("initialize = %s", out.Initialize)
				}
			})

			t.Run("tools/call", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--tool", "greet", "--arguments", `{"name": "Ada"}`, "--header", "X-Test: 1")...)
				if code != 0 || out.Status != "ok" || out.Text != "hello Ada\nbye" || out.Tool != "greet" || string(out.Arguments) != `{"name":"Ada"}` || out.Error != "" {
					t.Fatalf("exit %d: %+v", code, out)
				}
				// Every request carried the headers; after initialize, the
				// negotiated version and (stateful) the session id.
				posts := s.seen()
				posts = posts[len(posts)-3:] // initialize, notifications/initialized, tools/call
				if ct := posts[2].contentType; ct != mode.answer {
					t.Errorf("the call was answered as %q, want %q", ct, mode.answer)
				}
				for i, p := range posts {
					h := p.header
					if h.Get("X-Test") != "1" {
						t.Errorf("request %d has no X-Test", i)
					}
					if i == 0 {
						continue
					}
					if h.Get("Mcp-Protocol-Version") != callDefaultProtocol {
						t.Errorf("request %d: Mcp-Protocol-Version %q", i, h.Get("Mcp-Protocol-Version"))
					}
					if got := h.Get("Mcp-Session-Id") != ""; got == stateless {
						t.Errorf("request %d: session id %q (stateless %v)", i, h.Get("Mcp-Session-Id"), stateless)
					}
				}
			})

			t.Run("structured result without text is its JSON", func(t *testing.T) {
				_, out, _ := runCall(t, append(auth, "--tool", "structured")...)
				if out.Status != "ok" || out.Text != `{"content":[],"structuredContent":{"n":7}}` {
					t.Fatalf("%+v", out)
				}
			})

			t.Run("isError", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--tool", "fail")...)
				if code != 1 || out.Status != "error" || out.Text != "boom" || out.Error != `tools/call: tool "fail" returned isError: boom` || len(out.Result) == 0 {
					t.Fatalf("exit %d: %+v", code, out)
				}
			})

			t.Run("JSON-RPC error", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--tool", "nope")...)
				if code != 1 || out.Status != "error" || out.Error != `tools/call: JSON-RPC error -32602: unknown tool "nope"` || out.Result != nil || len(out.Initialize) == 0 {
					t.Fatalf("exit %d: %+v", code, out)
				}
			})

			t.Run("passthrough", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--method", "prompts/list", "--request-id", "41")...)
				if code != 0 || !strings.Contains(out.Text, `"name":"hi"`) {
					t.Fatalf("exit %d: %+v", code, out)
				}
				code, out, _ = runCall(t, append(auth, "--method", "ping")...)
				if code != 0 || out.Text != "{}" || string(out.Result) != "{}" {
					t.Fatalf("exit %d: %+v", code, out)
				}
				code, out, _ = runCall(t, append(auth, "--method", "prompts/get", "--params", `{"name": "hi"}`)...)
				if code != 0 || out.Status != "ok" {
					t.Fatalf("exit %d: %+v", code, out)
				}
			})

			t.Run("health", func(t *testing.T) {
				code, out, _ := runCall(t, "--endpoint", ep, "--method", "health", "--header", "X-Probe: yes")
				if code != 0 || out.Status != "ok" || out.Healthy == nil || !*out.Healthy || out.Text != "ok" || out.Initialize != nil {
					t.Fatalf("exit %d: %+v", code, out)
				}
				code, out, _ = runCall(t, "--endpoint", ep, "--method", "health")
				if code != 1 || out.Healthy == nil || *out.Healthy || out.Error != "health: GET "+s.URL+"/healthz: HTTP 503 Service Unavailable" {
					t.Fatalf("exit %d: %+v", code, out)
				}
			})

			t.Run("HTTP status, no token in the output", func(t *testing.T) {
				code, out, stderr := runCall(t, "--endpoint", ep, "--header", "Authorization: Bearer s3cr3t-token", "--method", "tools/list")
				if code != 1 || out.Error != "initialize: HTTP 401 Unauthorized" {
					t.Fatalf("exit %d: %+v", code, out)
				}
				b, _ := json.Marshal(out)
				if strings.Contains(string(b)+stderr, "s3cr3t") {
					t.Fatalf("the output quotes the token: %s", b)
				}
			})

			t.Run("leaves no connection open", func(t *testing.T) {
				// go-sdk drains a stream's end in a goroutine of its own,
				// which could put the connection back in the idle pool
				// after the call: call closes every connection it opened.
				// (Before "timeout", whose handler holds its connection
				// on a stateless server until the test ends.)
				for range 5 {
					if code, out, _ := runCall(t, append(auth, "--tool", "greet", "--arguments", `{"name":"x"}`)...); code != 0 {
						t.Fatalf("exit %d: %+v", code, out)
					}
				}
				deadline := time.Now().Add(5 * time.Second)
				for s.openConns() > 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%d connections still open", s.openConns())
					}
					time.Sleep(10 * time.Millisecond)
				}
			})

			t.Run("timeout", func(t *testing.T) {
				code, out, _ := runCall(t, append(auth, "--tool", "slow", "--timeout", "300ms")...)
				if code != 1 || out.Error != "tools/call: timed out after 300ms" {
					t.Fatalf("exit %d: %+v", code, out)
				}
			})

			if !stateless { // a stateless server has no channel to the client
				t.Run("a request of the server's is answered", func(t *testing.T) {
					code, out, _ := runCall(t, append(auth, "--tool", "pinger")...)
					if code != 0 || out.Text != "pong" {
						t.Fatalf("exit %d: %+v", code, out)
					}
				})
			}
		})
	}
}

func TestCallConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	code, out, _ := runCall(t, "--endpoint", "http://user:pw@"+addr+"/mcp?token=q", "--method", "tools/list")
	if code != 1 || out.Endpoint != "http://user:xxxxx@"+addr+"/mcp?token=q" ||
		!strings.HasPrefix(out.Error, "initialize: dial tcp "+addr+": ") || strings.Contains(out.Error, "token=q") {
		t.Fatalf("exit %d: %+v", code, out)
	}
}

// startChild starts cmd and kills it, by its PID, when the test ends. The
// channel is closed when it has exited.
func startChild(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return exited
}

// loopbackPreload makes a Node server that listens on a port alone (as
// express's app.listen(PORT) does, on every interface) listen on 127.0.0.1,
// and print the port it got, so the test can ask for port 0 and know the
// port without racing another process for a free one.
const loopbackPreload = `
const net = require('node:net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    args[0] = Number(args[0]);
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  }
  this.once('listening', () => process.stderr.write('MCPGATE_TEST_LISTENING ' + this.address().port + '\n'));
  return listen.apply(this, args);
};
`

func TestCallEverythingServer(t *testing.T) {
	entry, err := filepath.Abs("../../test/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Skip("@modelcontextprotocol/server-everything is not installed: run npm ci in test/e2e")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	preload := filepath.Join(t.TempDir(), "loopback.cjs")
	if err := os.WriteFile(preload, []byte(loopbackPreload), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--require", preload, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	startChild(t, cmd)
	portc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "MCPGATE_TEST_LISTENING "); ok {
				portc <- p
			}
		}
	}()
	var port string
	select {
	case port = <-portc:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything did not listen within 30s")
	}
	ep := "http://127.0.0.1:" + port + "/mcp"

	code, out, _ := runCall(t, "--endpoint", ep, "--method", "tools/list")
	if code != 0 || !strings.Contains(string(out.Result), `"name":"echo"`) {
		t.Fatalf("tools/list: exit %d: %+v", code, out)
	}
	var init struct {
		ServerInfo struct{ Name string } `json:"serverInfo"`
	}
	if json.Unmarshal(out.Initialize, &init); init.ServerInfo.Name != "mcp-servers/everything" {
		t.Fatalf("initialize = %s", out.Initialize)
	}
	// Its answers are SSE streams, in a session.
	code, out, _ = runCall(t, "--endpoint", ep, "--tool", "echo", "--arguments", `{"message":"hi"}`)
	if code != 0 || out.Text != "Echo: hi" {
		t.Fatalf("tools/call: exit %d: %+v", code, out)
	}
	// Progress notifications come before the answer on the call's stream.
	code, out, _ = runCall(t, "--endpoint", ep, "--tool", "trigger-long-running-operation", "--arguments", `{"duration":0.2,"steps":2}`)
	if code != 0 || !strings.HasPrefix(out.Text, "Long running operation completed") {
		t.Fatalf("tools/call with progress: exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, "--endpoint", ep, "--tool", "echo", "--arguments", `{}`)
	if code != 1 || !strings.HasPrefix(out.Error, "tools/call: ") {
		t.Fatalf("tools/call, bad arguments: exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, "--endpoint", ep, "--method", "prompts/list")
	if code != 0 || !strings.Contains(out.Text, `"prompts"`) {
		t.Fatalf("prompts/list: exit %d: %+v", code, out)
	}
	// It serves no /healthz: health says so.
	code, out, _ = runCall(t, "--endpoint", ep, "--method", "health")
	if code != 1 || out.Error != "health: GET http://127.0.0.1:"+port+"/healthz: HTTP 404 Not Found" {
		t.Fatalf("health: exit %d: %+v", code, out)
	}
}

func TestCallConformanceServer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	// It takes an address, not a listener: pick a free port, and try again
	// if another process takes it first.
	var ep string
	for attempt := 0; ep == "" && attempt < 3; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, "-http", addr)
		exited := startChild(t, cmd)
		up := func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		}
		deadline := time.Now().Add(10 * time.Second)
		for !up() && time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{} // lost the port: try another
			case <-time.After(20 * time.Millisecond):
			}
		}
		if up() {
			ep = "http://" + addr + "/mcp"
		}
	}
	if ep == "" {
		t.Fatal("the conformance server did not listen")
	}

	code, out, _ := runCall(t, "--endpoint", ep, "--method", "tools/list")
	if code != 0 || !strings.Contains(string(out.Result), `"name":"test_simple_text"`) {
		t.Fatalf("tools/list: exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, "--endpoint", ep, "--tool", "test_simple_text")
	if code != 0 || out.Text != "This is a simple text response for testing." {
		t.Fatalf("tools/call: exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, "--endpoint", ep, "--tool", "test_error_handling")
	if code != 1 || out.Error != `tools/call: tool "test_error_handling" returned isError: this tool intentionally returns an error for testing` {
		t.Fatalf("tools/call isError: exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, "--endpoint", ep, "--method", "prompts/get", "--params", `{"name":"test_simple_prompt"}`)
	if code != 0 || !strings.Contains(out.Text, `"messages"`) {
		t.Fatalf("prompts/get: exit %d: %+v", code, out)
	}
	// Its handler answers every path, /healthz too: a GET without a
	// session is not allowed, and health reports the status.
	code, out, _ = runCall(t, "--endpoint", ep, "--method", "health")
	if code != 1 || out.Healthy == nil || *out.Healthy || !strings.HasPrefix(out.Error, "health: GET http://") || !strings.HasSuffix(out.Error, "/healthz: HTTP 405 Method Not Allowed") {
		t.Fatalf("health: exit %d: %+v", code, out)
	}
}

// TestCallFromEnvAndConfig runs call with its server and timeout from the
// process's environment and from a configuration file, as a NoETL
// deployment or a gateway's operator would.
func TestCallFromEnvAndConfig(t *testing.T) {
	s := newSDKServer(t, &mcp.StreamableHTTPOptions{Stateless: true})
	ep := s.URL + "/mcp"
	for _, v := range []string{"MCPGATE_MCP_URL", "NOETL_MCP_URL", "MCPGATE_MCP_MY_SDK_ENDPOINT", "MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS"} {
		t.Setenv(v, "")
	}
	t.Setenv("NOETL_MCP_MY_SDK_ENDPOINT", ep+"/")
	t.Setenv("NOETL_MCP_REQUEST_TIMEOUT_SECONDS", "0.3")
	auth := []string{"--header", "Authorization: Bearer good"}

	code, out, _ := runCall(t, append(auth, "--server", "my-sdk", "--tool", "greet", "--arguments", `{"name":"env"}`)...)
	if code != 0 || out.Server != "my-sdk" || out.Endpoint != ep || out.Text != "hello env\nbye" {
		t.Fatalf("exit %d: %+v", code, out)
	}
	code, out, _ = runCall(t, append(auth, "--server", "my-sdk", "--tool", "slow")...)
	if code != 1 || out.Error != "tools/call: timed out after 300ms" {
		t.Fatalf("exit %d: %+v", code, out)
	}

	cfg := filepath.Join(t.TempDir(), "gw.yaml")
	os.WriteFile(cfg, []byte("upstreams:\n  - name: sdk\n    mcp: {url: "+ep+"}\n  - name: slug\n    mcp: {server: my-sdk}\n"), 0o644)
	for _, up := range []string{"sdk", "slug"} {
		code, out, _ = runCall(t, append(auth, "--config", cfg, "--upstream", up, "--method", "ping")...)
		if code != 0 || out.Server != up || out.Endpoint != ep {
			t.Fatalf("--upstream %s: exit %d: %+v", up, code, out)
		}
	}
}

// TestCallGateway runs call against mcpgate serve's built-in demo: the
// front door's own answers (its fast path for tools/list and tools/call)
// and its /healthz.
func TestCallGateway(t *testing.T) {
	for name, mode := range map[string][]string{"stateless": nil, "stateful": {"--stateful"}} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var out, errOut syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--drain-delay", "0s"}, mode...), strings.NewReader(""), &out, &errOut)
			}()
			t.Cleanup(func() {
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("serve: exit %d: %s", code, errOut.String())
				}
			})
			listening := regexp.MustCompile(`listening on (http://\S+/mcp)`)
			var ep string
			for deadline := time.Now().Add(30 * time.Second); ep == ""; time.Sleep(20 * time.Millisecond) {
				if m := listening.FindStringSubmatch(errOut.String()); m != nil {
					ep = m[1]
				} else if time.Now().After(deadline) {
					t.Fatalf("serve did not say where it listens:\n%s", errOut.String())
				}
			}

			code, res, _ := runCall(t, "--endpoint", ep, "--method", "tools/list")
			if code != 0 || !strings.Contains(string(res.Result), `"name":"list_products"`) {
				t.Fatalf("tools/list: exit %d: %+v", code, res)
			}
			code, res, _ = runCall(t, "--endpoint", ep, "--tool", "demo_fast")
			if code != 0 || res.Text != "Hello, world!" {
				t.Fatalf("tools/call: exit %d: %+v", code, res)
			}
			code, res, _ = runCall(t, "--endpoint", ep, "--tool", "demo_fail")
			if code != 1 || !strings.HasPrefix(res.Error, `tools/call: tool "demo_fail" returned isError: playbook demo/fail failed`) {
				t.Fatalf("tools/call isError: exit %d: %+v", code, res)
			}
			code, res, _ = runCall(t, "--endpoint", ep, "--method", "health")
			if code != 0 || !*res.Healthy || !strings.Contains(res.Text, `"status":"ok"`) {
				t.Fatalf("health: exit %d: %+v", code, res)
			}
		})
	}
}
