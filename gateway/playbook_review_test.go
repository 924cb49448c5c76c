package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// playbookRPC posts one JSON-RPC body to the NoETL-compatible endpoint of
// path with the given bearer token and returns the decoded answer.
func playbookRPC(t *testing.T, base, path, token, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/mcp/playbook/"+path+"/jsonrpc", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("HTTP %d, not JSON: %s", resp.StatusCode, raw)
	}
	return m
}

// TestReviewDedupAcrossCallers: Alice, whose token the engine accepts, runs
// demo/fast with {"name":"Ada"}. Within the dedup window, Mallory sends the
// very same tools/call with a token the engine refuses (or with none). The
// runner's dedup key hashes req.Cred.BearerToken, but the gateway puts the
// caller's credential in Cred.Header/Cred.Value and never sets BearerToken,
// so every caller hashes the empty string: Mallory attaches to Alice's run
// and is handed Alice's result (here "Hello, Ada!", in general whatever
// Alice's run returned) without the engine ever seeing her credential. She
// should get the engine's own refusal (-32020, http_status 401), because the
// key must include the credential actually sent upstream (Header and Value),
// and, with inbound auth, the verified subject.
func TestReviewDedupAcrossCallers(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Token: "tok", Step: 20 * time.Millisecond},
		&Playbooks{PollInterval: 100 * time.Millisecond, Items: []PlaybookItem{{Path: "demo/fast", Workload: map[string]any{"name": "world"}}}})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":"Ada"}}}`
	alice := playbookRPC(t, srv.URL, "demo/fast", "tok", call)
	if res, _ := alice["result"].(map[string]any); res == nil || res["isError"] == true {
		t.Fatalf("alice's own call failed: %v", alice)
	}
	for _, mallory := range []string{"not-the-engine-token", ""} {
		got := playbookRPC(t, srv.URL, "demo/fast", mallory, call)
		if got["result"] != nil {
			t.Errorf("a caller with token %q was handed another caller's run: %v", mallory, got["result"])
		}
	}
	if c := e.Counts(); c.Started != 1 {
		t.Logf("engine started %d runs", c.Started)
	}
}

// TestReviewNoETLCrossSite: a web page the user visits while a gateway runs
// on their machine (mcpgate serve listens on 127.0.0.1) posts to
// http://127.0.0.1:PORT/api/mcp/playbook/demo/fast/jsonrpc with
// Content-Type text/plain — a "simple" cross-origin request that browsers
// send without a CORS preflight — or, after DNS rebinding, with its own Host.
// /mcp refuses both (go-sdk: 415 for a non-JSON Content-Type, 403 for a
// foreign Host on a loopback listener); the NoETL-compatible endpoint starts
// the playbook run. It should apply the same checks as /mcp: Content-Type
// application/json and, on a loopback listener, a loopback Host.
func TestReviewNoETLCrossSite(t *testing.T) {
	_, e, srv := playbookGateway(t, &engine.Options{Step: 10 * time.Millisecond},
		&Playbooks{PollInterval: 100 * time.Millisecond, Items: []PlaybookItem{{Path: "demo/fast", Workload: map[string]any{"name": "world"}}}})
	for i, tc := range []struct{ name, contentType, host string }{
		{"text/plain from a page", "text/plain", ""},
		{"rebound Host", "application/json", "evil.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.Counts().Started
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_fast","arguments":{"name":"csrf-` + tc.name + `"}}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/mcp/playbook/demo/fast/jsonrpc", strings.NewReader(body))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("Origin", "https://evil.example")
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n := e.Counts().Started - before; n > 0 {
				t.Errorf("request %d (HTTP %d): the engine started %d run(s) for a cross-site request", i, resp.StatusCode, n)
			}
		})
	}
}

// TestReviewNoETLSlowBody: a client opens a POST to the NoETL-compatible
// endpoint, announces a 1 KiB body and sends 10 bytes, then nothing. /mcp
// cuts such a client off after body_timeout with 408 (the front door's read
// deadline); the NoETL endpoint reads with no deadline (and mcpgate serve's
// http.Server sets no ReadTimeout), so the connection and its goroutine are
// held for as long as the client likes: a few thousand such connections
// exhaust the gateway. It should answer within body_timeout as /mcp does.
func TestReviewNoETLSlowBody(t *testing.T) {
	e := engine.New(&engine.Options{})
	cfg := &Config{BodyTimeout: 200 * time.Millisecond, Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(),
		Playbooks: &Playbooks{Items: []PlaybookItem{{Path: "demo/fast"}}}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/mcp", "/api/mcp/playbook/demo/fast/jsonrpc"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1024\r\n\r\n{\"jsonrpc\"", path, srv.Listener.Addr())
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				t.Fatalf("no answer within 2 s to a body that stopped arriving (body_timeout 200ms): %v", err)
			}
			t.Logf("answered %q", strings.TrimSpace(line))
		})
	}
}

// TestReviewHiddenPlaybookViaExecuteRoute: the operator fronts the engine's
// whole API with the gateway (every operation tagged agent-exposed, as one
// does for an API whose reads agents may use) and relies on the engine's
// exposes_as_mcp: false to keep internal/tool away from agents. The engine's
// execute route (marked x-mcp-playbook: execute) is then also served as a
// plain REST tool, execute_playbook, which takes any "path": an agent calls
// it with {"path":"internal/tool"} and the hidden playbook runs (and the
// catalog route, served as list_playbooks, shows it with its secret
// default). Routes the gateway uses as playbook execute/status/cancel/catalog
// should never also be REST tools (or such a config should be refused), so
// that a hidden playbook is reachable nowhere.
func TestReviewHiddenPlaybookViaExecuteRoute(t *testing.T) {
	e := engine.New(&engine.Options{Step: 10 * time.Millisecond})
	inner := e.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi.json" {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		for _, item := range doc["paths"].(map[string]any) {
			for _, op := range item.(map[string]any) {
				if m, ok := op.(map[string]any); ok {
					m["tags"] = []any{"agent-exposed"}
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: h,
		Playbooks: &Playbooks{PollInterval: 100 * time.Millisecond}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	var names []string
	for _, tl := range g.Catalog().Tools {
		names = append(names, tl.Tool.Name)
	}
	for _, tl := range g.Catalog().Tools {
		if tl.IsPlaybook() || tl.Tool.Name != "execute_playbook" {
			continue
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_playbook","arguments":{"path":"internal/tool","workload":{}}}}`
		a := sendRaw(t, srv.URL+"/mcp", body, nil)
		t.Errorf("the engine's execute route is a REST tool (tools: %v); calling it with the hidden playbook's path: %v (engine started %d runs)",
			names, a.Messages, e.Counts().Started)
	}
}
