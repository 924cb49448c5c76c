package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func newUpstream(t *testing.T, cfg Config, opts *Options) *Upstream {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Name == "" {
		opts.Name = "test"
	}
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	u, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var serverModes = []struct {
	name string
	o    serverOpts
}{
	{"stateful", serverOpts{}},
	{"stateless", serverOpts{stateless: true}},
	{"stateful-2025-06-18", serverOpts{versions: []string{"2025-06-18"}}},
	{"stateless-2025-03-26", serverOpts{stateless: true, versions: []string{"2025-03-26"}}},
	{"sse", serverOpts{sse: true}},
}

func cfgFor(ts *testServer, o serverOpts) Config {
	c := Config{URL: ts.URL}
	if o.sse {
		c.Transport = TransportSSE
	}
	return c
}

// TestList reads every list from each kind of server, and reports what
// protocol version go-sdk settled on.
func TestList(t *testing.T) {
	for _, m := range serverModes {
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), nil)
			l, err := u.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("protocol %s, %d tools, %d prompts, %d resources, %d templates; %d handshakes", l.ProtocolVersion, len(l.Tools), len(l.Prompts), len(l.Resources), len(l.Templates), ts.inits.Load())
			if len(l.Tools) < 5 || len(l.Prompts) != 1 || len(l.Resources) != 1 || len(l.Templates) != 1 {
				t.Errorf("listing: %+v", l)
			}
			if l.ServerInfo == nil || l.ServerInfo.Name != "test" {
				t.Errorf("server info: %+v", l.ServerInfo)
			}
			if m.o.versions != nil && l.ProtocolVersion != m.o.versions[0] {
				t.Errorf("protocol %q, want %q", l.ProtocolVersion, m.o.versions[0])
			}
		})
	}
}

// TestCallTool calls tools of every kind of server, and checks that the
// session is reused: no handshake per call.
func TestCallTool(t *testing.T) {
	for _, m := range serverModes {
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), nil)
			ctx := t.Context()
			res, err := u.CallTool(ctx, "", &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); got != `{"x":1}` {
				t.Errorf("echo: %q", got)
			}
			inits := ts.inits.Load()
			for range 5 {
				res, err = u.CallTool(ctx, "", &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}}, false, nil)
				if err != nil {
					t.Fatal(err)
				}
			}
			b, _ := json.Marshal(res.StructuredContent)
			if string(b) != `{"sum":5}` {
				t.Errorf("structured content: %s", b)
			}
			res, err = u.CallTool(ctx, "", &mcp.CallToolParams{Name: "image"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if img, ok := res.Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG" {
				t.Errorf("image: %#v", res.Content[0])
			}
			if _, err := u.List(ctx); err != nil {
				t.Fatal(err)
			}
			if got := ts.inits.Load(); got != inits {
				t.Errorf("handshakes: %d after the first call, %d after 7 more requests: sessions are not reused", inits, got)
			}
			res, err = u.CallTool(ctx, "", &mcp.CallToolParams{Name: "nope"}, false, nil)
			if err == nil && !res.IsError {
				t.Errorf("unknown tool: no error")
			}
		})
	}
}

// TestPromptsResources reads prompts, resources and templates on the
// session pool.
func TestPromptsResources(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, nil)
	ctx := t.Context()
	p, err := u.GetPrompt(ctx, "tok", &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := p.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "hello bob" {
		t.Errorf("prompt: %#v", p.Messages[0].Content)
	}
	r, err := u.ReadResource(ctx, "tok", &mcp.ReadResourceParams{URI: "file:///a.txt"})
	if err != nil || r.Contents[0].Text != "A" {
		t.Fatalf("resource: %v %+v", err, r)
	}
	r, err = u.ReadResource(ctx, "tok", &mcp.ReadResourceParams{URI: "file:///b.txt"})
	if err != nil || r.Contents[0].Text != "T" {
		t.Fatalf("template: %v %+v", err, r)
	}
	if _, err := u.ReadResource(ctx, "tok", &mcp.ReadResourceParams{URI: "nope://x"}); err == nil {
		t.Error("unknown resource: no error")
	}
}

// TestCredentials: one session per credential, each request carrying its
// own Authorization, the credential-less one none.
func TestCredentials(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, nil)
	ctx := t.Context()
	for range 3 {
		for _, cred := range []Credential{"", "Bearer a", "Bearer b"} {
			if _, err := u.CallTool(ctx, cred, &mcp.CallToolParams{Name: "echo"}, false, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := ts.inits.Load(); got != 6 { // discover + initialize, per credential
		t.Errorf("handshakes: %d, want 6 (3 sessions)", got)
	}
	count := map[string]int{}
	for _, a := range ts.authSeen() {
		count[a]++
	}
	if count["Bearer a"] == 0 || count["Bearer a"] != count["Bearer b"] || count[""] != count["Bearer a"] {
		t.Errorf("Authorization headers seen: %v", count)
	}
}

// TestProgress: the upstream sees a token of ours, the caller's Relay its
// own token back.
func TestProgress(t *testing.T) {
	for _, m := range serverModes {
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), nil)
			var mu sync.Mutex
			var got []string
			r := &Relay{Progress: func(_ context.Context, p *mcp.ProgressNotificationParams) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%v:%v/%v", p.ProgressToken, p.Progress, p.Total))
				mu.Unlock()
			}}
			p := &mcp.CallToolParams{Name: "progress", Meta: mcp.Meta{"progressToken": "caller-1"}}
			res, err := u.CallTool(t.Context(), "", p, false, r)
			if err != nil {
				t.Fatal(err)
			}
			seen := text(t, res)
			if seen == `"caller-1"` || !strings.HasPrefix(seen, `"mcpgate-`) {
				t.Errorf("upstream saw token %s, want one of ours", seen)
			}
			if p.Meta["progressToken"] != "caller-1" {
				t.Errorf("the caller's params changed: %v", p.Meta)
			}
			// go-sdk may hand progress over after the result that followed it.
			eventually(t, "3 progress notifications", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= 3
			})
			mu.Lock()
			if strings.Join(got, " ") != "caller-1:1/3 caller-1:2/3 caller-1:3/3" {
				t.Errorf("relayed progress: %v", got)
			}
			mu.Unlock()
			// No token from the caller: none asked of the upstream.
			res, err = u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "progress"}, false, r)
			if err != nil {
				t.Fatal(err)
			}
			if text(t, res) != "no token" {
				t.Errorf("a call without a progress token sent one: %s", text(t, res))
			}
		})
	}
}

// TestCancel: the caller's cancellation reaches the upstream's handler.
func TestCancel(t *testing.T) {
	for _, m := range serverModes {
		if m.o.versions != nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), nil)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := u.CallTool(ctx, "", &mcp.CallToolParams{Name: "block"}, false, nil)
				errc <- err
			}()
			<-ts.blocking
			cancel()
			err := <-errc
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error: %v", err)
			}
			select {
			case reason := <-ts.cancelled:
				if reason == "not cancelled" {
					t.Errorf("the upstream's handler was not cancelled")
				}
				t.Logf("upstream saw: %s", reason)
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream's handler did not end")
			}
		})
	}
}

// TestTimeout: a call longer than Config.Timeout fails, and the upstream
// is told.
func TestTimeout(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL, Timeout: 300 * time.Millisecond}, nil)
	if _, err := u.List(t.Context()); err != nil { // connect outside the timed call
		t.Fatal(err)
	}
	_, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "block"}, false, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("error: %v", err)
	}
	if reason := <-ts.cancelled; reason == "not cancelled" {
		t.Error("the upstream's handler was not cancelled")
	}
}

// TestServerRequests relays sampling, elicitation and roots to the Relay
// of the call in flight, and refuses them when there is none.
func TestServerRequests(t *testing.T) {
	for _, m := range serverModes {
		if m.o.versions != nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), &Options{Capabilities: &mcp.ClientCapabilities{
				Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}, RootsV2: &mcp.RootCapabilities{},
			}})
			r := &Relay{
				CreateMessage: func(_ context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled " + p.Messages[0].Content.(*mcp.TextContent).Text}}, nil
				},
				Elicit: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ann"}}, nil
				},
				ListRoots: func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
					return &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///caller"}}}, nil
				},
			}
			for tool, want := range map[string]string{"sample": "sampled hi", "elicit": "accept:ann", "roots": "file:///caller"} {
				res, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: tool}, false, r)
				if err != nil {
					t.Errorf("%s: %v", tool, err)
					continue
				}
				if got := text(t, res); got != want || res.IsError {
					t.Errorf("%s: %q (isError %v), want %q", tool, got, res.IsError, want)
				}
				res, err = u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: tool}, false, nil)
				if err == nil && !res.IsError {
					t.Errorf("%s without a relay: %q, want an error", tool, text(t, res))
				}
			}
		})
	}
}

// TestLogs relays the upstream's log messages to the call in flight.
func TestLogs(t *testing.T) {
	for _, m := range serverModes {
		if m.o.versions != nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), &Options{LogLevel: "info"})
			var got atomic.Value
			r := &Relay{Log: func(_ context.Context, p *mcp.LoggingMessageParams) {
				got.Store(fmt.Sprintf("%s %s %v", p.Level, p.Logger, p.Data))
			}}
			if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "log"}, false, r); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the relayed log", func() bool { return got.Load() != nil })
			if s, _ := got.Load().(string); s != "warning test careful" {
				t.Errorf("relayed log: %q", s)
			}
		})
	}
}

// TestLogsBeforeResult: a log message the upstream sent before its result
// is relayed before CallTool returns, when the caller's stream is still
// open to take it (a stateless caller's closes with the result); once the
// upstream has been seen to log, since only then do calls wait for it.
func TestLogsBeforeResult(t *testing.T) {
	for _, m := range serverModes {
		if m.o.versions != nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			u := newUpstream(t, cfgFor(ts, m.o), &Options{LogLevel: "info"})
			var n atomic.Int32
			r := &Relay{Log: func(context.Context, *mcp.LoggingMessageParams) { n.Add(1) }}
			if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "log"}, false, r); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the first relayed log", func() bool { return n.Load() == 1 })
			for i := range 30 {
				// A relay of its own: a log message also goes to the calls
				// that ended within the grace period.
				var n atomic.Int32
				r := &Relay{Log: func(context.Context, *mcp.LoggingMessageParams) { n.Add(1) }}
				if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "log"}, false, r); err != nil {
					t.Fatal(err)
				}
				if got := n.Load(); got != 1 {
					t.Fatalf("call %d: %d log messages relayed when it returned, want 1", i, got)
				}
			}
		})
	}
}

// TestListChanged: a tools/list_changed notification, or a refresh that
// finds a difference, calls OnListChanged.
func TestListChanged(t *testing.T) {
	for _, m := range serverModes {
		if m.o.versions != nil {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			var changed atomic.Int32
			cfg := cfgFor(ts, m.o)
			cfg.Refresh = -1
			u := newUpstream(t, cfg, &Options{OnListChanged: func() { changed.Add(1) }})
			u.debounce = 10 * time.Millisecond
			if _, err := u.List(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "grow"}, false, nil); err != nil {
				t.Fatal(err)
			}
			if m.o.stateless {
				// A stateless server has no stream to notify on: a refresh finds it.
				u.hmu.Lock()
				u.listDigest = "old"
				u.hmu.Unlock()
				u.refresh(t.Context())
			}
			eventually(t, "OnListChanged", func() bool { return changed.Load() > 0 })
		})
	}
}

// TestRefresh: a periodic refresh sees a new tool.
func TestRefresh(t *testing.T) {
	ts := newTestServer(t, serverOpts{stateless: true})
	var changed atomic.Int32
	u := newUpstream(t, Config{URL: ts.URL, Refresh: 20 * time.Millisecond}, &Options{OnListChanged: func() { changed.Add(1) }})
	u.Start(t.Context())
	eventually(t, "the first listing", func() bool {
		u.hmu.Lock()
		defer u.hmu.Unlock()
		return u.listDigest != ""
	})
	ts.mcpServer().AddTool(&mcp.Tool{Name: "late", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	eventually(t, "OnListChanged", func() bool { return changed.Load() > 0 })
}

// TestProtocolVersionOffered: protocol_version picks the version offered
// first; a stateless server that speaks it answers at it, with one
// initialize and no discovery.
func TestProtocolVersionOffered(t *testing.T) {
	for _, m := range serverModes {
		if m.name != "stateless" {
			continue
		}
		ts := newTestServer(t, m.o)
		cfg := cfgFor(ts, m.o)
		cfg.ProtocolVersion = "2025-11-25"
		u := newUpstream(t, cfg, nil)
		l, err := u.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if l.ProtocolVersion != "2025-11-25" || ts.inits.Load() != 1 {
			t.Errorf("protocol %s after %d handshakes, want 2025-11-25 after 1", l.ProtocolVersion, ts.inits.Load())
		}
	}
	bad := Config{URL: "http://127.0.0.1:1/mcp", ProtocolVersion: "2099-01-01"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `mcp.protocol_version: "2099-01-01" is not one of 2026-07-28`) {
		t.Errorf("a version go-sdk does not speak: %v", err)
	}
}
