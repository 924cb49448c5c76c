package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/federation"
)

// subUpstream is a real go-sdk MCP server, behind httptest, that offers
// resources/subscribe: a resource and a template. Each upstream session
// has a server of its own, so that a test can send an update on one
// session only, as an upstream that scopes resources per user would.
type subUpstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	servers map[string]*mcp.Server // by the Authorization its subscriptions came with
	subs    []string               // "<Authorization> <uri>" of each resources/subscribe
	unsubs  []string
}

func newSubUpstream(t *testing.T) *subUpstream {
	t.Helper()
	f := &subUpstream{servers: map[string]*mcp.Server{}}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server() }, nil)
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *subUpstream) server() *mcp.Server {
	var s *mcp.Server
	auth := func(e *mcp.RequestExtra) string {
		if e == nil || e.Header == nil {
			return ""
		}
		return e.Header.Get("Authorization")
	}
	s = mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if strings.HasSuffix(req.Params.URI, "/forbidden") {
				return errors.New("not for you")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.subs = append(f.subs, auth(req.Extra)+" "+req.Params.URI)
			f.servers[auth(req.Extra)] = s
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.unsubs = append(f.unsubs, auth(req.Extra)+" "+req.Params.URI)
			return nil
		},
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
	}
	s.AddResource(&mcp.Resource{Name: "motd", URI: "file:///motd"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "log", URITemplate: "file:///logs/{name}"}, read)
	return s
}

func (f *subUpstream) seen() (subs, unsubs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.subs), slices.Clone(f.unsubs)
}

// update sends notifications/resources/updated for uri on the upstream
// session of the credential auth only.
func (f *subUpstream) update(t *testing.T, auth, uri string) {
	t.Helper()
	f.mu.Lock()
	s := f.servers[auth]
	f.mu.Unlock()
	if s == nil {
		t.Fatalf("no upstream session of %q subscribed", auth)
	}
	if err := s.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
}

// subCaller is a caller session of the gateway with the updates it got.
type subCaller struct {
	cs      *mcp.ClientSession
	mu      sync.Mutex
	updates []string
}

func (c *subCaller) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.updates)
}

func subCallerOf(t *testing.T, url, token string) *subCaller {
	t.Helper()
	c := &subCaller{}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updates = append(c.updates, req.Params.URI)
			c.mu.Unlock()
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: headerTransport{http.Header{"Authorization": {token}}}}}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

func subGateway(t *testing.T, upURL string, stateful bool) string {
	t.Helper()
	// tool_prefix defaults to "fs_": resource URIs are served as "fs+<uri>".
	cfg := &Config{Stateful: stateful, Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: upURL}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestSubscribe relays subscriptions through a stateful gateway in
// forward mode: two caller sessions of one credential share one upstream
// subscription, another credential has its own; an update reaches, under
// the gateway's URI, exactly the callers subscribed on the upstream
// session it came on; the upstream is unsubscribed when the last caller
// unsubscribes or its session ends.
func TestSubscribe(t *testing.T) {
	up := newSubUpstream(t)
	url := subGateway(t, up.srv.URL, true)
	a1 := subCallerOf(t, url, "Bearer a")
	a2 := subCallerOf(t, url, "Bearer a")
	b := subCallerOf(t, url, "Bearer b")
	if r := a1.cs.InitializeResult().Capabilities.Resources; r == nil || !r.Subscribe {
		t.Fatalf("resources capability %+v: want subscribe", r)
	}
	const motd, log = "fs+file:///motd", "fs+file:///logs/today"
	for _, c := range []*subCaller{a1, a2, b} {
		if err := c.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: motd}); err != nil {
			t.Fatal(err)
		}
	}
	// Again: one subscription per session and URI, as go-sdk keeps them.
	if err := a1.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: motd}); err != nil {
		t.Fatal(err)
	}
	// A template's URI goes to the upstream whose template matches it.
	if err := a1.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: log}); err != nil {
		t.Fatal(err)
	}
	subs, _ := up.seen()
	slices.Sort(subs)
	if want := []string{"Bearer a file:///logs/today", "Bearer a file:///motd", "Bearer b file:///motd"}; !slices.Equal(subs, want) {
		t.Fatalf("the upstream saw subscriptions %q, want %q: one per upstream session and URI", subs, want)
	}

	want := func(c *subCaller, name string, n int) func() bool {
		return func() bool { return slices.Equal(c.got(), slices.Repeat([]string{motd}, n)) }
	}
	up.update(t, "Bearer a", "file:///motd")
	waitFor(t, "a1 and a2 updated", func() bool { return want(a1, "a1", 1)() && want(a2, "a2", 1)() })
	up.update(t, "Bearer b", "file:///motd")
	waitFor(t, "b updated", want(b, "b", 1))
	up.update(t, "Bearer a", "file:///motd")
	waitFor(t, "a1 and a2 updated again", func() bool { return want(a1, "a1", 2)() && want(a2, "a2", 2)() })
	if got := b.got(); len(got) != 1 {
		t.Errorf("b got %q: another credential's updates reached it", got)
	}

	// a1 lets go: a2 still holds the upstream subscription of "Bearer a".
	if err := a1.cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: motd}); err != nil {
		t.Fatal(err)
	}
	if _, unsubs := up.seen(); len(unsubs) != 0 {
		t.Fatalf("the upstream was unsubscribed (%q) while a2 still holds it", unsubs)
	}
	up.update(t, "Bearer a", "file:///motd")
	waitFor(t, "a2 updated", want(a2, "a2", 3))
	if got := a1.got(); len(got) != 2 {
		t.Errorf("a1 got %q after it unsubscribed", got)
	}

	// a2's session ends without unsubscribing: go-sdk forgets its
	// subscription; the gateway unsubscribes the upstream.
	a2.cs.Close()
	waitFor(t, "the upstream unsubscribed", func() bool {
		_, unsubs := up.seen()
		return slices.Equal(unsubs, []string{"Bearer a file:///motd"})
	})
	// a1's other subscription is still there; b's too.
	up.update(t, "Bearer b", "file:///motd")
	waitFor(t, "b updated again", want(b, "b", 2))

	// Errors name the upstream, or say that none serves the URI.
	for _, c := range []struct{ method, uri, want string }{
		{"subscribe", "fs+file:///nothing", "no upstream serves the resource"},
		{"subscribe", "file:///motd", "no upstream serves the resource"}, // the upstream's own URI is not served
		{"subscribe", "fs+file:///logs/forbidden", `upstream "fs"`},
		{"unsubscribe", "other+file:///x", "no upstream serves the resource"},
	} {
		var err error
		if c.method == "subscribe" {
			err = b.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: c.uri})
		} else {
			err = b.cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: c.uri})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want an error with %q", c.method, c.uri, err, c.want)
		}
	}
}

// TestSubscribeRefused: a stateless gateway has no session to send
// updates on, and a stateful one whose upstreams offer no subscriptions
// has nothing to subscribe to; neither offers resources.subscribe, and
// both answer -32601 saying why (go-sdk's own answer says only "method
// not found").
func TestSubscribeRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		upstream func(t *testing.T) string
		stateful bool
		why      string
	}{
		{"stateless", func(t *testing.T) string { return newSubUpstream(t).srv.URL }, false, "a stateless gateway has no session"},
		{"no upstream offers", func(t *testing.T) string { return newFedUpstream(t).srv.URL }, true, "no upstream of this gateway offers resource subscriptions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := subGateway(t, c.upstream(t), c.stateful)
			// 2025-11-25: from 2026-07-28 on, go-sdk's client subscribes by
			// subscriptions/listen, whose acknowledgement grants nothing
			// here, and returns nil all the same (it does not read it).
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
				&mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			if r := cs.InitializeResult().Capabilities.Resources; r == nil || r.Subscribe {
				t.Errorf("resources capability %+v: want resources without subscribe", r)
			}
			for _, err := range []error{
				cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "fs+file:///motd"}),
				cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "fs+file:///motd"}),
			} {
				var je *jsonrpc.Error
				if !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound || !strings.Contains(je.Message, c.why) {
					t.Errorf("%v: want -32601 saying %q", err, c.why)
				}
			}
		})
	}
}
