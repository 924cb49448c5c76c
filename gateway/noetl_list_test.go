package gateway

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestNoETLListCallable: under auth.list: callable, the NoETL-compatible
// endpoint's tools/list shows its playbook exactly to the callers /mcp's
// tools/list shows it to — the callers whose verified scopes let them
// call it — and answers the others an empty list, not an error that would
// say the playbook exists.
func TestNoETLListCallable(t *testing.T) {
	is := newAuthIssuer(t)
	pb := httptest.NewServer(engine.New(nil).Handler())
	t.Cleanup(pb.Close)
	for _, list := range []string{auth.ListCallable, ""} {
		t.Run("list="+cmp.Or(list, "all"), func(t *testing.T) {
			cfg := &Config{
				Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}, List: list,
					Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}},
				Upstreams: []Upstream{{Name: "noetl", OpenAPI: pb.URL + "/openapi.json", BaseURL: pb.URL, Playbooks: &Playbooks{}, Auth: auth.Upstream{Mode: auth.ModeNone}}},
			}
			g, err := New(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			listedSomewhere := false
			for _, scope := range []string{"mcp", "mcp mcp:write", "mcp mcp:write mcp:destructive"} {
				h := http.Header{"Authorization": {"Bearer " + is.token(t, scope)}}
				onMCP := listedNames(t, sendRaw(t, srv.URL+"/mcp", rpc("1", "tools/list", ""), h))
				noetl := listedNames(t, sendRaw(t, srv.URL+"/api/mcp/playbook/demo/fast/jsonrpc", rpc("1", "tools/list", ""), h))
				want := "[]"
				if strings.Contains(onMCP, "demo_fast") {
					want = "[demo_fast]"
				}
				if noetl != want {
					t.Errorf("%q: the NoETL endpoint lists %s, /mcp lists %s", scope, noetl, onMCP)
				}
				if list == "" && noetl != "[demo_fast]" {
					t.Errorf("%q: auth.list all, the NoETL endpoint lists %s", scope, noetl)
				}
				if list != "" && scope == "mcp" && noetl != "[]" {
					t.Errorf("a caller holding no write scope is listed %s", noetl)
				}
				listedSomewhere = listedSomewhere || noetl != "[]"
			}
			if !listedSomewhere {
				t.Error("no caller is listed the playbook: the test shows nothing")
			}
		})
	}
}

// listedNames is the tool names of a tools/list answer, as fmt prints a
// slice.
func listedNames(t *testing.T, a answer) string {
	t.Helper()
	if a.Status != http.StatusOK || len(a.Messages) != 1 {
		t.Fatalf("tools/list: %d %v %s", a.Status, a.Messages, a.Text)
	}
	res, _ := a.Messages[0].(map[string]any)["result"].(map[string]any)
	tools, ok := res["tools"].([]any)
	if !ok {
		t.Fatalf("tools/list without a tools array: %v", a.Messages[0])
	}
	names := []string{}
	for _, tool := range tools {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	return fmt.Sprint(names)
}
