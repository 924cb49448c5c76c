package federation

import (
	"log/slog"
	"strings"
	"testing"

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
