package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// TestFastPathPlaybookDifferential sends each playbook tools/call through
// the fast path and through go-sdk (DisableFastPath), each gateway in front
// of an example engine of its own that numbers executions alike
// (NumericIDs), and requires the same answer, and that the fast path
// answered exactly the calls it is meant to: those without a progress
// token.
func TestFastPathPlaybookDifferential(t *testing.T) {
	var answered atomic.Int64
	urls := map[bool]string{}
	for _, disable := range []bool{false, true} {
		e := engine.New(&engine.Options{NumericIDs: true})
		cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}}}
		g, err := New(t.Context(), cfg, &Options{DisableFastPath: disable})
		if err != nil {
			t.Fatal(err)
		}
		if !disable {
			g.fast.onServe = func() { answered.Add(1) }
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		urls[disable] = srv.URL + "/mcp"
	}
	alice := http.Header{"Authorization": {"Bearer alice"}}
	tests := []struct {
		name   string
		body   string
		header http.Header
		fast   bool
	}{
		{"greets", rpc("1", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ada"}}`), nil, true},
		{"greets, with a token", rpc(`"s"`, "tools/call", `{"name":"demo_fast","arguments":{"name":"Bo"}}`), alice, true},
		{"default workload", rpc("2", "tools/call", `{"name":"demo_fast","arguments":{}}`), nil, true},
		{"no arguments", rpc("3", "tools/call", `{"name":"demo_fast"}`), nil, true},
		{"other meta", rpc("4", "tools/call", `{"name":"demo_fast","arguments":{"name":"Cy"},"_meta":{"x":1}}`), nil, true},
		{"failed run", rpc("5", "tools/call", `{"name":"demo_fail","arguments":{}}`), nil, true},
		{"argument of the wrong type", rpc("6", "tools/call", `{"name":"demo_fast","arguments":{"name":5}}`), nil, true},
		{"arguments not an object", rpc("7", "tools/call", `{"name":"demo_fast","arguments":[1]}`), nil, true},
		{"hidden playbook", rpc("8", "tools/call", `{"name":"internal_tool","arguments":{}}`), nil, true},
		{"progressToken: go-sdk's", rpc("9", "tools/call", `{"name":"demo_fast","arguments":{"name":"Di"},"_meta":{"progressToken":"p"}}`), nil, false},
		{"2026-07-28: go-sdk's", rpc("10", "tools/call", `{"name":"demo_fast","arguments":{"name":"Ed"}}`), http.Header{"Mcp-Protocol-Version": {"2026-07-28"}}, false},
		{"after go-sdk's runs, numbered alike", rpc("11", "tools/call", `{"name":"demo_fast","arguments":{"name":"Fa"}}`), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := answered.Load()
			got := sendRaw(t, urls[false], tc.body, tc.header)
			if fast := answered.Load() > before; fast != tc.fast {
				t.Errorf("answered by the fast path: %v, want %v", fast, tc.fast)
			}
			want := sendRaw(t, urls[true], tc.body, tc.header)
			if reframed := sameFraming(&got, &want); reframed != tc.fast {
				t.Errorf("answered as application/json where go-sdk streams: %v, want %v", reframed, tc.fast)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("fast path and go-sdk differ\nfast: %.2000s\n sdk: %.2000s", gj, wj)
			}
		})
	}
}
