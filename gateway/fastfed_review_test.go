package gateway

// Review of the fast path's forwarded federated calls (commit 9f6af11):
// each test fails while its finding stands.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// reviewGateways is a gateway in front of upstream URL up, with the fast
// path and without it (go-sdk's path), each behind an HTTP server.
func reviewGateways(t *testing.T, up federation.Config) (fast, sdk string, g *Gateway) {
	t.Helper()
	mk := func(disable bool) (*Gateway, string) {
		return serveGateway(t, &Config{Upstreams: []Upstream{{Name: "up", MCP: &up}}}, &Options{DisableFastPath: disable})
	}
	g, fast = mk(false)
	_, sdk = mk(true)
	return fast, sdk, g
}

// reviewServer serves h until the test ends, its connections (the
// gateways' standing streams) cut at the end.
func reviewServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

func reviewMsgs(a answer) string {
	b, _ := json.Marshal(a.Messages)
	return string(b)
}

// TestReviewFastFedConcurrentCallers: two stateless callers of one
// upstream (auth none: one upstream session for both). While the first
// one's call runs, the second one's fails on the fast path — both were
// sent with the JSON-RPC id 1 on the same session, and a go-sdk upstream
// refuses a duplicate in-flight id — where go-sdk's path serves both.
func TestReviewFastFedConcurrentCallers(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	defer close(release)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
		type in struct {
			Text string `json:"text"`
		}
		mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "quick"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "quick " + a.Text}}}, nil, nil
		})
		return s
	}, nil) // stateful
	up := reviewServer(t, h)
	fast, sdk, _ := reviewGateways(t, federation.Config{URL: up.URL})
	pv := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	for _, tc := range []struct{ name, url string }{{"go-sdk", sdk}, {"fast", fast}} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan answer, 1)
			go func() {
				done <- sendRaw(t, tc.url, rpc("1", "tools/call", `{"name":"up_slow","arguments":{"text":"a"}}`), pv)
			}()
			<-started
			b := sendRaw(t, tc.url, rpc("2", "tools/call", `{"name":"up_quick","arguments":{"text":"b"}}`), pv)
			if !strings.Contains(reviewMsgs(b), "quick b") {
				t.Errorf("caller B, while caller A's call runs: %s", reviewMsgs(b))
			}
			release <- struct{}{}
			<-done
		})
	}
}

// TestReviewFastFedNotForwardedLosesLogs: an upstream Forward does not
// speak to (legacy SSE here; a stdio child alike) is left to go-sdk's
// session, which streams its log messages to an old-protocol stateless
// caller. (Found in review: the fast path once called it through go-sdk's
// client with nothing to relay to, and the log messages were lost.)
func TestReviewFastFedNotForwardedLosesLogs(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "say"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "say", Data: "disk almost full"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	up := reviewServer(t, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	fast, sdk, g := reviewGateways(t, federation.Config{URL: up.URL, Transport: federation.TransportSSE})
	var served int
	g.fast.onServe = func() { served++ }
	pv := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	call := rpc("1", "tools/call", `{"name":"up_say","arguments":{"text":"hi"}}`)
	// The fast path hands the call to go-sdk's session, which relays the
	// upstream's log messages (waiting for them after the result only once
	// the upstream has sent one: CallTool, progressSettle; so the log line
	// itself is not asserted here, where its timing would be).
	for _, url := range []string{sdk, fast} {
		a := sendRaw(t, url, call, pv)
		if !strings.Contains(reviewMsgs(a), `"text":"hi"`) {
			t.Errorf("%s: %s", url, reviewMsgs(a))
		}
	}
	if served != 0 {
		t.Errorf("the fast path served %d calls of a legacy SSE upstream; go-sdk's session relays their logs", served)
	}
}

// TestReviewFastFedLogLevelNotApplied: the gateway asks its upstreams for
// logs at "info", and go-sdk's path hands each to the caller's session,
// which drops what is below its level. The fast path relays every
// notifications/message on the call's stream, whatever its level: an
// upstream that ignores logging/setLevel (or says "debug" anyway) has its
// debug lines — often the ones with request dumps — reach the caller.
func TestReviewFastFedLogLevelNotApplied(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	s.AddTool(&mcp.Tool{Name: "say", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := reviewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage
			Method string
		}
		_ = json.Unmarshal(body, &m)
		if m.Method != "tools/call" {
			inner.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","logger":"db","data":"SELECT * FROM users WHERE token='abc'"}}`)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n", m.ID)
	}))
	fast, sdk, _ := reviewGateways(t, federation.Config{URL: up.URL})
	pv := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	call := rpc("1", "tools/call", `{"name":"up_say","arguments":{}}`)
	sendRaw(t, sdk, call, pv)
	want := sendRaw(t, sdk, call, pv)
	got := sendRaw(t, fast, call, pv)
	if strings.Contains(reviewMsgs(want), "SELECT") {
		t.Fatalf("go-sdk's path relays debug lines too: %s", reviewMsgs(want))
	}
	if strings.Contains(reviewMsgs(got), "SELECT") {
		t.Errorf("the fast path relayed a debug line below the level\nfast: %s\n sdk: %s", reviewMsgs(got), reviewMsgs(want))
	}
}

// TestReviewFastFedResultNotNormalised: go-sdk's path writes the caller a
// CallToolResult it decoded (content [] for null, no unknown fields); the
// fast path writes the upstream's result bytes, so a caller gets
// "content": null — which strict clients (the TS SDK's schema) refuse —
// and whatever fields the upstream added.
func TestReviewFastFedResultNotNormalised(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "say", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := reviewServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage
			Method string
		}
		_ = json.Unmarshal(body, &m)
		if m.Method != "tools/call" {
			inner.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":null,"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"Your password?"}}}}}`, m.ID)
	}))
	fast, sdk, _ := reviewGateways(t, federation.Config{URL: up.URL})
	pv := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	call := rpc("1", "tools/call", `{"name":"up_say","arguments":{}}`)
	want := sendRaw(t, sdk, call, pv)
	got := sendRaw(t, fast, call, pv)
	sameFraming(&got, &want)
	if g, w := reviewMsgs(got), reviewMsgs(want); g != w {
		t.Errorf("fast path and go-sdk differ\nfast: %s\n sdk: %s", g, w)
	}
}

var _ = time.Second
