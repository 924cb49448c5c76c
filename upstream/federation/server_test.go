package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServer is a go-sdk MCP server behind httptest, with counters of what
// reached it.
type testServer struct {
	t       *testing.T
	srv     *httptest.Server
	URL     string
	handler atomic.Pointer[http.Handler]

	inits     atomic.Int32 // initialize and server/discover requests
	calls     atomic.Int32 // tools/call requests
	cancelled chan string  // a blocking tool's reason for ending
	blocking  chan struct{}

	mu      sync.Mutex
	auth    []string // Authorization headers seen
	methods []string
	server  *mcp.Server
	subs    []string // "<Authorization> <uri>" of each resources/subscribe
	unsubs  []string // and resources/unsubscribe
}

type serverOpts struct {
	stateless bool
	json      bool
	sse       bool
	versions  []string // the protocol versions the server accepts; nil: go-sdk's
}

func newTestServer(t *testing.T, o serverOpts) *testServer {
	t.Helper()
	ts := &testServer{t: t, cancelled: make(chan string, 8), blocking: make(chan struct{}, 8)}
	ts.swap(o)
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serveHTTP))
	ts.URL = ts.srv.URL + "/mcp"
	t.Cleanup(ts.stop)
	return ts
}

// swap replaces the MCP handler by a new one: an upstream that restarted
// and forgot its sessions.
func (ts *testServer) swap(o serverOpts) {
	s := newMCPServer(ts, o)
	var h http.Handler
	if o.sse {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	} else {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
			Stateless:                    o.stateless,
			JSONResponse:                 o.json,
			PropagateRequestCancellation: true,
		})
	}
	ts.mu.Lock()
	ts.server = s
	ts.mu.Unlock()
	ts.handler.Store(&h)
}

func (ts *testServer) mcpServer() *mcp.Server {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.server
}

func (ts *testServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize", "server/discover":
			ts.inits.Add(1)
		case "tools/call":
			ts.calls.Add(1)
		}
		ts.mu.Lock()
		ts.methods = append(ts.methods, m.Method)
		ts.auth = append(ts.auth, r.Header.Get("Authorization"))
		ts.mu.Unlock()
	}
	(*ts.handler.Load()).ServeHTTP(w, r)
}

func (ts *testServer) authSeen() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.auth...)
}

// subscriptions returns the resources/subscribe and resources/unsubscribe
// requests that reached the server, each "<Authorization> <uri>".
func (ts *testServer) subscriptions() (subs, unsubs []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.subs), slices.Clone(ts.unsubs)
}

// stop closes the server and every connection to it.
func (ts *testServer) stop() {
	ts.srv.CloseClientConnections()
	ts.srv.Close()
}

// restart serves again on the same address after stop.
func (ts *testServer) restart() {
	ts.t.Helper()
	addr := ts.srv.Listener.Addr().String()
	var l net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
	}
	if err != nil {
		ts.t.Fatalf("listen again on %s: %v", addr, err)
	}
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serveHTTP))
	ts.srv.Listener.Close()
	ts.srv.Listener = l
	ts.srv.Start()
}

type structured struct {
	Sum int `json:"sum"`
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func newMCPServer(ts *testServer, o serverOpts) *mcp.Server {
	record := func(to *[]string, extra *mcp.RequestExtra, uri string) {
		auth := ""
		if extra != nil && extra.Header != nil {
			auth = extra.Header.Get("Authorization")
		}
		ts.mu.Lock()
		*to = append(*to, auth+" "+uri)
		ts.mu.Unlock()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: o.versions,
		Capabilities:              &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: true}},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			record(&ts.subs, req.Extra, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			record(&ts.unsubs, req.Extra, req.Params.URI)
			return nil
		},
	})
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add"}, func(_ context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, structured, error) {
		return nil, structured{Sum: a.A + a.B}, nil
	})
	s.AddTool(&mcp.Tool{Name: "image", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "progress", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		if tok == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no token"}}}, nil
		}
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3}); err != nil {
				return nil, err
			}
		}
		b, _ := json.Marshal(tok)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "test", Data: "careful"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, err
	})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ts.blocking <- struct{}{}
		select {
		case <-ctx.Done():
			ts.cancelled <- context.Cause(ctx).Error()
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
			ts.cancelled <- "not cancelled"
			return &mcp.CallToolResult{}, nil
		}
	})
	// sample, elicit and roots ask the client: directly before 2026-07-28,
	// by an input-required result (SEP-2322) from then on.
	ask := func(name string, ir mcp.InputRequest, direct func(context.Context, *mcp.ServerSession) (mcp.InputResponse, error), show func(mcp.InputResponse) string) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var resp mcp.InputResponse
			if req.ProtocolVersion() >= "2026-07-28" {
				if len(req.Params.InputResponses) == 0 {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": ir}}, nil
				}
				resp = req.Params.InputResponses["q"]
			} else {
				var err error
				if resp, err = direct(ctx, req.Session); err != nil {
					return nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: show(resp)}}}, nil
		})
	}
	sampling := &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}
	ask("sample", sampling, func(ctx context.Context, ss *mcp.ServerSession) (mcp.InputResponse, error) {
		return ss.CreateMessage(ctx, sampling)
	}, func(r mcp.InputResponse) string {
		switch res := r.(type) {
		case *mcp.CreateMessageResult:
			return res.Content.(*mcp.TextContent).Text
		case *mcp.CreateMessageWithToolsResult: // how go-sdk decodes an input response
			return res.Content[0].(*mcp.TextContent).Text
		}
		return fmt.Sprintf("%T", r)
	})
	elicit := &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}
	ask("elicit", elicit, func(ctx context.Context, ss *mcp.ServerSession) (mcp.InputResponse, error) {
		return ss.Elicit(ctx, elicit)
	}, func(r mcp.InputResponse) string {
		res, ok := r.(*mcp.ElicitResult)
		if !ok {
			return fmt.Sprintf("%T", r)
		}
		return res.Action + ":" + fmt.Sprint(res.Content["name"])
	})
	ask("roots", &mcp.ListRootsParams{}, func(ctx context.Context, ss *mcp.ServerSession) (mcp.InputResponse, error) {
		return ss.ListRoots(ctx, nil)
	}, func(r mcp.InputResponse) string {
		res, ok := r.(*mcp.ListRootsResult)
		if !ok {
			return fmt.Sprintf("%T", r)
		}
		var uris []string
		for _, root := range res.Roots {
			uris = append(uris, root.URI)
		}
		return strings.Join(uris, ",")
	})
	s.AddTool(&mcp.Tool{Name: "grow", InputSchema: objectSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.AddTool(&mcp.Tool{Name: "grown", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
		return &mcp.CallToolResult{}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///a.txt", Name: "a"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "A"}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///{name}", Name: "file"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "T"}}}, nil
	})
	return s
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
