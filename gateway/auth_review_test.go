package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
)

// TestReviewStepUpKeyCase: an attacker holding a read-only token (scopes
// "mcp things:read") sends a tools/call of a destructive tool whose body also
// carries a differently-cased "Name" (or "Method") key naming a read-only
// tool (or a harmless method). peekCall decodes with encoding/json, which
// matches keys case-insensitively and lets the later key win, so the step-up
// check decides on fwd_list_things (or on "ping"); the fast path and go-sdk
// decode case-sensitively and run fwd_delete_thing. Today the DELETE reaches
// the upstream with the reader's token. It should be refused 403
// insufficient_scope and the upstream never called: the step-up check must
// read the body with the same decoder (go-sdk's, case-sensitive) as whatever
// dispatches it, and fail closed when it cannot (today a "Params":0 key makes
// encoding/json return an error, peekCall returns "", and the check is
// skipped). Both the fast path and the go-sdk path are checked.
func TestReviewStepUpKeyCase(t *testing.T) {
	for _, fast := range []bool{true, false} {
		is := newAuthIssuer(t)
		rec := &credRecorder{}
		up := httptest.NewServer(rec)
		t.Cleanup(up.Close)
		cfg := &Config{
			Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"},
				Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}},
			Upstreams: []Upstream{{Name: "fwd", OpenAPI: "auth.json", Document: []byte(authDoc),
				BaseURL: up.URL, ToolPrefix: "fwd_", Auth: auth.Upstream{Mode: auth.ModeForward}}},
		}
		g, err := New(context.Background(), cfg, &Options{DisableFastPath: !fast})
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(g.Handler())
		t.Cleanup(gw.Close)
		reader := http.Header{"Authorization": {"Bearer " + is.token(t, "mcp things:read")}}
		for _, tc := range []struct{ name, body string }{
			{"params.Name shadows name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fwd_delete_thing","Name":"fwd_list_things","arguments":{"id":"1"}}}`},
			{"Method shadows method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"fwd_delete_thing","arguments":{"id":"1"}}}`},
			{"Params of the wrong type makes peekCall fail open", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fwd_delete_thing","arguments":{"id":"1"}},"Params":0}`},
			{"NAME shadows name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fwd_delete_thing","arguments":{"id":"1"},"NAME":"fwd_list_things"}}`},
		} {
			t.Run(map[bool]string{true: "fast/", false: "sdk/"}[fast]+tc.name, func(t *testing.T) {
				before := len(rec.got)
				resp, body := authPost(t, gw.URL+"/mcp", tc.body, reader)
				rec.mu.Lock()
				called := len(rec.got) > before
				rec.mu.Unlock()
				if resp.StatusCode != http.StatusForbidden || called {
					t.Errorf("a read-only token ran the destructive tool: HTTP %d, upstream called %v\nbody %s", resp.StatusCode, called, body)
				}
			})
		}
	}
}
