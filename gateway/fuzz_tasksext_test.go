package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// FuzzTaskExtension posts arbitrary bodies to /mcp of a gateway serving
// playbook tools, with the headers of the tasks extension drawn from menus
// (a real task id among the Mcp-Name values): whatever comes in, no panic,
// an answer within the limit, and a valid JSON-RPC answer with a status /mcp
// uses (checkRPCAnswer), whether the extension's stage (serveExt) answered
// or passed it on to go-sdk.
func FuzzTaskExtension(f *testing.F) {
	e := engine.New(&engine.Options{Step: time.Millisecond})
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond, Timeout: 5 * time.Second,
			Items: []PlaybookItem{{Path: "demo/fail", Task: "required"}}}}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	h := g.Handler()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	// A real task, for the id in the menu.
	create := fuzzRequest([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_fast","arguments":{},`+meta+`}}`), 0, 0, 5, 0)
	create.Header.Set("Mcp-Method", "tools/call")
	create.Header.Set("Mcp-Name", "demo_fast")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, create)
	var id string
	if _, err := fmt.Sscanf(w.Body.String(), `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":%q`, &id); err != nil || id == "" {
		f.Fatalf("creating a task: %v: %s", err, w.Body.Bytes())
	}
	methods := []string{"", "tools/call", "tasks/get", "tasks/cancel", "tasks/update", "tasks/result"}
	names := []string{"", "demo_fast", "demo_fail", id, "x"}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tasks/update","params":{"taskId":"` + id + `","inputResponses":{"k":{"action":"accept"}},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"` + id + `",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"demo_fail","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":7,` + meta + `}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":null}}}}}`,
	} {
		f.Add([]byte(s), uint8(5), uint8(2), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, version, method, name uint8) {
		r := fuzzRequest(body, 0, 0, version, 0)
		if m := methods[int(method)%len(methods)]; m != "" {
			r.Header.Set("Mcp-Method", m)
		}
		if n := names[int(name)%len(names)]; n != "" {
			r.Header.Set("Mcp-Name", n)
		}
		w := fuzzServe(t, h, r)
		if err := checkRPCAnswer(body, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Fatalf("%.500v\nrequest headers: %v\nanswer: HTTP %d %q\n%.500s", err, r.Header, w.Code, w.Header().Get("Content-Type"), w.Body.Bytes())
		}
	})
}
