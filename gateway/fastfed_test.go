package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// logUpstream is a go-sdk server whose tools log, fail and answer with
// structured content: what a forwarded call must carry back as go-sdk's
// own session would.
func logUpstream(t *testing.T, stateful bool) (url string, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	type in struct {
		Text string `json:"text"`
	}
	type out struct {
		Said string `json:"said"`
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "loud", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "say"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, out, error) {
			calls.Add(1)
			if a.Text == "loud" {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "say", Data: "one"})
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "say", Data: "below the level"})
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "say", Data: map[string]any{"two": 2}})
			}
			return nil, out{Said: a.Text}, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "fail"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return nil, nil, errors.New("it failed: " + a.Text)
		})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: !stateful})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

// TestFastFederatedDifferential sends each federated tools/call through
// the fast path's lean hop and through go-sdk's session (the same config
// with DisableFastPath) and requires the same answer, message for message:
// results, isError, structured content, the log messages streamed before
// the result (an upstream's "debug" line stays below the level), argument
// errors. It requires the fast path to have answered the requests it is
// meant to, and the upstream to have seen the same calls from both.
func TestFastFederatedDifferential(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateless upstream", true: "stateful upstream"}[stateful], func(t *testing.T) {
			upURL, calls := logUpstream(t, stateful)
			gw := func(disable bool) (*Gateway, string) {
				cfg := &Config{Upstreams: []Upstream{{Name: "up", MCP: &federation.Config{URL: upURL}}}}
				return serveGateway(t, cfg, &Options{DisableFastPath: disable})
			}
			fast, fastURL := gw(false)
			_, sdkURL := gw(true)
			var served atomic.Int64
			fast.fast.onServe = func() { served.Add(1) }

			// go-sdk's path waits for log messages read before a result
			// only once its upstream has sent any (CallTool, progressSettle):
			// its first loud call may lose them. Not the fast path's, whose
			// log messages come on the call's own stream.
			sendRaw(t, sdkURL, rpc("0", "tools/call", `{"name":"up_say","arguments":{"text":"loud"}}`), http.Header{"Mcp-Protocol-Version": {"2025-06-18"}})

			pv := func(v string) http.Header { return http.Header{"Mcp-Protocol-Version": {v}} }
			tests := []struct {
				name   string
				body   string
				h      http.Header
				fast   bool
				called bool // the upstream ran a tool
			}{
				{"result", rpc("1", "tools/call", `{"name":"up_say","arguments":{"text":"hi"}}`), pv("2025-06-18"), true, true},
				{"no version header", rpc("2", "tools/call", `{"name":"up_say","arguments":{"text":"hi"}}`), nil, true, true},
				{"2025-11-25", rpc("3", "tools/call", `{"name":"up_say","arguments":{"text":"hi"}}`), pv("2025-11-25"), true, true},
				{"logs before the result", rpc("4", "tools/call", `{"name":"up_say","arguments":{"text":"loud"}}`), pv("2025-06-18"), true, true},
				{"isError", rpc("5", "tools/call", `{"name":"up_fail","arguments":{"text":"x"}}`), pv("2025-06-18"), true, true},
				{"string id", rpc(`"s"`, "tools/call", `{"name":"up_say","arguments":{"text":"id"}}`), pv("2025-06-18"), true, true},
				{"bad arguments", rpc("6", "tools/call", `{"name":"up_say","arguments":{"text":7}}`), pv("2025-06-18"), true, false},
				{"arguments not an object", rpc("7", "tools/call", `{"name":"up_say","arguments":[1]}`), pv("2025-06-18"), true, false},
				{"progress asked: go-sdk's", rpc("8", "tools/call", `{"name":"up_say","arguments":{"text":"p"},"_meta":{"progressToken":"tok"}}`), pv("2025-06-18"), false, true},
				// Without 2026-07-28's per-request _meta, which go-sdk's
				// own session refuses: nothing reaches the upstream.
				{"2026-07-28: go-sdk's", rpc("9", "tools/call", `{"name":"up_say","arguments":{"text":"new"}}`), pv("2026-07-28"), false, false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before, c0 := served.Load(), calls.Load()
					got := sendRaw(t, fastURL, tt.body, tt.h)
					if d := served.Load() - before; (d == 1) != tt.fast {
						t.Errorf("fast path answered %d requests, want fast=%v", d, tt.fast)
					}
					c1 := calls.Load()
					want := sendRaw(t, sdkURL, tt.body, tt.h)
					if ran, again := c1-c0, calls.Load()-c1; ran != again || (ran == 1) != tt.called {
						t.Errorf("upstream ran %d calls through the fast path and %d through go-sdk; want %v", ran, again, tt.called)
					}
					sameFraming(&got, &want)
					gj, _ := json.Marshal(got)
					wj, _ := json.Marshal(want)
					if string(gj) != string(wj) {
						t.Errorf("fast path and go-sdk differ\nfast: %.2000s\n sdk: %.2000s", gj, wj)
					}
				})
			}
		})
	}
}

// TestFastFederatedLive: the fast path forwards to the tools served now,
// not those of its start: a tool an upstream re-read took away is go-sdk's
// to refuse, and one it added is served.
func TestFastFederatedLive(t *testing.T) {
	up := newFedUpstream(t)
	g, url := fedGateway(t, up, false, nil)
	var served atomic.Int64
	g.fast.onServe = func() { served.Add(1) }
	h := http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}
	call := rpc("1", "tools/call", `{"name":"fs_echo","arguments":{"text":"hi"}}`)
	if a := sendRaw(t, url, call, h); served.Load() != 1 || len(a.Messages) != 1 {
		t.Fatalf("first call: fast %d, %+v", served.Load(), a)
	}
	// Lock what is served, change the description: the re-read withholds
	// the tool, and neither path may call it.
	g.opts.Lock = lockOf(g)
	up.desc.Store("Echoes its text, changed after review.")
	g.relist("fs")
	before := up.calls.Load()
	a := sendRaw(t, url, call, h)
	if up.calls.Load() != before {
		t.Fatalf("a withheld tool was called upstream: %+v", a)
	}
	if served.Load() != 1 {
		t.Errorf("the fast path answered a call of a withheld tool")
	}
	if e, _ := a.Messages[0].(map[string]any)["error"].(map[string]any); e == nil {
		t.Errorf("calling a withheld tool: %+v, want a JSON-RPC error", a)
	}
}

// lockOf is a lock of the tools g serves now.
func lockOf(g *Gateway) *annotations.Lock {
	return annotations.NewLock((&Catalog{Tools: slices.Collect(maps.Values(g.live.tools))}).Facts())
}
