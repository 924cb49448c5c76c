package gateway

import (
	"cmp"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// countingAPI is testDoc's API (upstreamLog) behind an httptest server that
// counts the connections it accepted and those that closed.
type countingAPI struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountingAPI(t *testing.T, h http.Handler) *countingAPI {
	t.Helper()
	s := &countingAPI{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// restCall makes one stateless tools/call of tool (get_thing's operation)
// through g's handler, and fails the test unless the upstream answered it.
func restCall(t *testing.T, g *Gateway, tool string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(rpc("1", "tools/call", `{"name":"`+tool+`","arguments":{"id":"x"}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, req)
	if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, `\"name\":\"thing\"`) || strings.Contains(body, `"isError":true`) {
		t.Fatalf("%s: %d %s", tool, rec.Code, body)
	}
}

// TestRESTTransportAcrossReload: a gateway built with Options.Previous
// sends a REST upstream's calls on the previous gateway's connections when
// the upstream's transport would be made alike (same scheme and host, same
// direct_transport), whatever else of it changed, and on connections of
// its own otherwise. The previous gateway's Close closes the connections
// of a transport it does not share, and leaves a shared one's open; the
// last gateway's Close closes them.
func TestRESTTransportAcrossReload(t *testing.T) {
	api := newCountingAPI(t, &upstreamLog{})
	localhost := strings.Replace(api.URL, "127.0.0.1", "localhost", 1)
	yes, no := true, false
	tests := []struct {
		name   string
		change func(u *Upstream)
		tool   string // the tool after the change; "" get_thing
		kept   bool
	}{
		{"unchanged", func(*Upstream) {}, "", true},
		{"client settings", func(u *Upstream) {
			u.Timeout, u.MaxConcurrent, u.QueueTimeout = 7*time.Second, 3, time.Second
			u.ExposeAll = true
		}, "", true},
		{"base URL path", func(u *Upstream) { u.BaseURL += "/v2" }, "", true},
		{"tool prefix", func(u *Upstream) { u.ToolPrefix, u.ToolPrefixSet = "t_", true }, "t_get_thing", true},
		{"renamed", func(u *Upstream) { u.Name = "stuff" }, "", true},
		{"host", func(u *Upstream) { u.BaseURL = localhost }, "", false},
		// Kept when it is set to what it was (see kept below).
		{"direct_transport true", func(u *Upstream) { u.DirectTransport = &yes }, "", false},
		{"direct_transport false", func(u *Upstream) { u.DirectTransport = &no }, "", false},
	}
	for _, tt := range tests {
		for _, direct := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: "/from direct", false: "/from net/http"}[direct], func(t *testing.T) {
				before := Upstream{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), BaseURL: api.URL, DirectTransport: &direct}
				after := before
				tt.change(&after)
				kept := tt.kept
				if strings.HasPrefix(tt.name, "direct_transport") {
					kept = *after.DirectTransport == direct // setting it to what it was changes nothing
				}
				tool := cmp.Or(tt.tool, "get_thing")

				opened0, closed0 := api.opened.Load(), api.closed.Load()
				old, err := New(t.Context(), &Config{Upstreams: []Upstream{before}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				restCall(t, old, "get_thing")
				restCall(t, old, "get_thing")
				oldConns := api.opened.Load() - opened0
				if oldConns != 1 {
					t.Fatalf("two calls in a row opened %d connections, want 1", oldConns)
				}

				next, err := New(t.Context(), &Config{Upstreams: []Upstream{after}}, &Options{Previous: old})
				if err != nil {
					t.Fatal(err)
				}
				old.Close() // as Front does once the old gateway serves nothing
				if !kept {
					waitFor(t, "the old gateway's connection to close", func() bool { return api.closed.Load()-closed0 == oldConns })
				}
				restCall(t, next, tool)
				restCall(t, next, tool)
				newConns := api.opened.Load() - opened0 - oldConns
				switch {
				case kept && newConns != 0:
					t.Errorf("an upstream whose transport is unchanged opened %d new connections after the reload, want 0", newConns)
				case !kept && newConns != 1:
					t.Errorf("a changed transport opened %d new connections, want 1", newConns)
				}
				if kept && api.closed.Load() != closed0 {
					t.Error("closing the old gateway closed a connection the new one uses")
				}
				next.Close()
				waitFor(t, "every connection to close with the last gateway", func() bool {
					return api.closed.Load()-closed0 == api.opened.Load()-opened0
				})
			})
		}
	}
}

// TestPlaybookEngineTransportAcrossReload: the playbook engine's requests
// (execute, status polls) go through its upstream's client, whose transport
// a reload keeps like any REST upstream's: a playbook call on the new
// gateway opens no connection to the engine.
func TestPlaybookEngineTransportAcrossReload(t *testing.T) {
	e := engine.New(nil)
	api := newCountingAPI(t, e.Handler())
	cfgOf := func(poll time.Duration) *Config {
		return &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: api.URL + "/openapi.json", BaseURL: api.URL,
			Playbooks: &Playbooks{PollInterval: poll}}}}
	}
	call := func(g *Gateway) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(rpc("1", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ada"}}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, req)
		if body := rec.Body.String(); !strings.Contains(body, "Hello, Ada!") || strings.Contains(body, `"isError":true`) {
			t.Fatalf("demo_fast: %d %s", rec.Code, body)
		}
	}
	old, err := New(t.Context(), cfgOf(100*time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	call(old)
	// The new gateway reads the engine's document and catalog with a client
	// of its own: count from when it is built.
	next, err := New(t.Context(), cfgOf(200*time.Millisecond), &Options{Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	opened := api.opened.Load()
	call(next)
	call(next)
	if n := api.opened.Load() - opened; n != 0 {
		t.Errorf("playbook calls after the reload opened %d connections to the engine, want 0", n)
	}
	next.Close()
}

// TestRESTTransportNotKept: what a gateway cannot take from Options.Previous
// — none given, one already closed, one transport for two upstreams — it
// dials itself.
func TestRESTTransportNotKept(t *testing.T) {
	api := newCountingAPI(t, &upstreamLog{})
	// auth none: two remote upstreams must each say where a token goes.
	up := Upstream{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), BaseURL: api.URL, Auth: auth.Upstream{Mode: auth.ModeNone}}
	build := func(prev *Gateway, ups ...Upstream) *Gateway {
		t.Helper()
		g, err := New(t.Context(), &Config{Upstreams: ups}, &Options{Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	newConns := func(calls func()) int64 {
		t.Helper()
		n := api.opened.Load()
		calls()
		return api.opened.Load() - n
	}
	first := build(nil, up)
	if n := newConns(func() { restCall(t, first, "get_thing") }); n != 1 {
		t.Fatalf("the first gateway's call opened %d connections, want 1", n)
	}

	// Two upstreams at the same origin: one keeps the transport (its
	// name's), the other dials.
	other := up
	other.Name, other.ToolPrefix, other.ToolPrefixSet = "other", "o_", true
	second := build(first, other, up)
	if n := newConns(func() { restCall(t, second, "get_thing") }); n != 0 {
		t.Errorf("the upstream of the same name opened %d connections, want 0", n)
	}
	if n := newConns(func() { restCall(t, second, "o_get_thing") }); n != 1 {
		t.Errorf("a second upstream at the same origin opened %d connections, want 1 of its own", n)
	}

	// Previous closed: its transports are closed, nothing to keep.
	first.Close()
	second.Close()
	third := build(second, up)
	if n := newConns(func() { restCall(t, third, "get_thing") }); n != 1 {
		t.Errorf("a gateway whose Previous is closed opened %d connections, want 1", n)
	}
	// No Previous: a transport of its own, beside third's.
	fourth := build(nil, up)
	if n := newConns(func() { restCall(t, fourth, "get_thing") }); n != 1 {
		t.Errorf("a gateway without Previous opened %d connections, want 1", n)
	}
}

// TestRESTTransportCloseInFlight: a call in flight on the old gateway when
// it is closed finishes; with the direct transport, its connection is then
// closed rather than kept idle for nobody (net/http's stays idle until its
// idle timeout: see upstream.CloseTransport).
func TestRESTTransportCloseInFlight(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(map[bool]string{true: "direct", false: "net/http"}[direct], func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			inner := &upstreamLog{}
			api := newCountingAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/things/slow" {
					entered <- struct{}{}
					<-release
				}
				inner.ServeHTTP(w, r)
			}))
			t.Cleanup(unblock) // before api.Close, which waits for the handler
			up := Upstream{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc), BaseURL: api.URL, DirectTransport: &direct}
			old, err := New(t.Context(), &Config{Upstreams: []Upstream{up}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 1)
			go func() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(rpc("1", "tools/call", `{"name":"get_thing","arguments":{"id":"slow"}}`)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				rec := httptest.NewRecorder()
				old.Handler().ServeHTTP(rec, req)
				done <- rec.Body.String()
			}()
			<-entered
			// A reload to another host: the old transport is not kept.
			up.BaseURL = strings.Replace(api.URL, "127.0.0.1", "localhost", 1)
			next, err := New(t.Context(), &Config{Upstreams: []Upstream{up}}, &Options{Previous: old})
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close()
			old.Close()
			unblock()
			if body := <-done; !strings.Contains(body, `\"id\":\"slow\"`) || strings.Contains(body, `"isError":true`) {
				t.Fatalf("the call in flight at Close: %s", body)
			}
			if direct {
				waitFor(t, "the in-flight call's connection to close", func() bool { return api.closed.Load() == 1 })
			}
		})
	}
}

// TestPlaybookResourceTransportAcrossReload: a playbook http resource's
// origin keeps its transport across a reload like an upstream does; the
// previous gateway's Close leaves its connection open for the new one.
func TestPlaybookResourceTransportAcrossReload(t *testing.T) {
	kb := newCountingAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"page":"` + r.URL.Path + `"}`))
	}))
	src := `
mcp:
  resources:
    - {name: page, type: http, spec: {method: GET, url: "` + kb.URL + `/pages/{{ input.id }}"}}
`
	engineSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"playbooks": []map[string]any{{"path": "kb/run", "workload": map[string]any{"q": ""}, "content": src}}})
	}))
	t.Cleanup(engineSrv.Close)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", BaseURL: engineSrv.URL,
		Playbooks: &Playbooks{Execute: "POST /execute", Status: "GET /executions/{id}", Catalog: "GET /catalog"}}}}
	read := func(g *Gateway) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(rpc("1", "resources/read", `{"uri":"`+kb.URL+`/pages/7"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, req)
		if body := rec.Body.String(); !strings.Contains(body, `/pages/7`) || strings.Contains(body, `"error"`) {
			t.Fatalf("resources/read: %d %s", rec.Code, body)
		}
	}
	old, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	read(old)
	read(old)
	if n := kb.opened.Load(); n != 1 {
		t.Fatalf("two reads opened %d connections, want 1", n)
	}
	next, err := New(t.Context(), cfg, &Options{Previous: old})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	read(next)
	if n := kb.opened.Load(); n != 1 || kb.closed.Load() != 0 {
		t.Errorf("after the reload: %d connections opened, %d closed; want 1 and 0", n, kb.closed.Load())
	}
	next.Close()
	waitFor(t, "the connection to close with the last gateway", func() bool { return kb.closed.Load() == 1 })
}
