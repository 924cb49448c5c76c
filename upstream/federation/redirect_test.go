package federation

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNoRedirectFollowed: an upstream that answers a call with a redirect
// to another path of its own origin (on a path-routed origin, another
// service) does not get the call and the caller's token sent there, on
// either path a call takes (the lean hop, go-sdk's session), for any of the
// redirect codes; the call fails, naming the status.
func TestNoRedirectFollowed(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, path := range []string{"forward", "session"} {
			t.Run(path+"/"+http.StatusText(code), func(t *testing.T) {
				var got atomic.Value
				got.Store("")
				srv := rawUpstream(t, func(w http.ResponseWriter, _ json.RawMessage, _ []byte) {
					w.Header().Set("Location", "/admin/other-service")
					w.WriteHeader(code)
				})
				inner := srv.Config.Handler
				srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/admin/other-service" {
						got.Store(r.Method + " " + r.Header.Get("Authorization"))
						w.WriteHeader(http.StatusForbidden)
						return
					}
					inner.ServeHTTP(w, r)
				})
				u := newUpstream(t, Config{URL: srv.URL + "/mcp"}, nil)
				var err error
				var res *mcp.CallToolResult
				if path == "forward" {
					res, err = u.Forward(t.Context(), "Bearer caller-token", "2025-06-18", &ForwardParams{Name: "x"}, nil)
				} else {
					res, err = u.CallTool(t.Context(), "Bearer caller-token", &mcp.CallToolParams{Name: "x"}, false, nil)
				}
				if s := got.Load().(string); s != "" {
					t.Errorf("the redirect was followed to another path of the origin: it got %q", s)
				}
				if err == nil {
					t.Errorf("a call answered %d succeeded: %+v", code, res)
				}
			})
		}
	}
}
