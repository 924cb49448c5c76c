package gateway

import (
	"cmp"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
