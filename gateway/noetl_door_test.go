package gateway

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestNoETLDoorLetsScriptsThrough: what the cross-site checks must not
// break. A script or NoETL client (no Origin; curl -d's form Content-Type)
// and a same-origin JSON request both start their run; a cross-origin one
// does not, JSON or not.
func TestNoETLDoorLetsScriptsThrough(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Step: 10 * time.Millisecond},
		&Playbooks{PollInterval: 100 * time.Millisecond, Items: []PlaybookItem{{Path: "demo/fast", Workload: map[string]any{"name": "world"}}}})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, contentType, origin string
		runs                      bool
	}{
		{"curl -d, no Origin", "application/x-www-form-urlencoded", "", true},
		{"no Content-Type, no Origin", "", "", true},
		{"same origin, JSON", "application/json", "http://" + host, true},
		{"same origin, text/plain", "text/plain", "http://" + host, false},
		{"cross origin, JSON", "application/json", "https://evil.example", false},
		{"unparsable Origin", "application/json", "::", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.Counts().Started
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":"` + url.QueryEscape(tc.name) + `"}}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/mcp/playbook/demo/fast/jsonrpc", strings.NewReader(body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ran := e.Counts().Started > before; ran != tc.runs {
				t.Errorf("HTTP %d %s: ran %v, want %v", resp.StatusCode, got, ran, tc.runs)
			}
		})
	}
}
