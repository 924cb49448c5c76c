package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestGolden pins the whole catalog of small real documents, every
// operation exposed.
func TestGolden(t *testing.T) {
	for _, doc := range []struct {
		file  string
		tools int
	}{
		{"swagger-petstore-3.0.yaml", 19},
		{"oai-petstore-3.0.yaml", 3},
		{"swagger-petstore-2.0.json", 20},
		{"readme-petstore-3.1.json", 20},
		{"readme-security-3.1.json", 15},
		{"readme-parameters-common-3.0.json", 5},
		{"readme-schema-circular-3.0.json", 3},
		{"readme-discriminators-3.0.json", 10},
	} {
		t.Run(doc.file, func(t *testing.T) {
			cfg := &Config{Upstreams: []Upstream{{OpenAPI: filepath.Join("testdata", doc.file), ExposeAll: true}}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cat, err := BuildCatalog(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := cat.Listing().WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(doc.file, filepath.Ext(doc.file))+".golden.json")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gateway -run Golden -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("catalog differs from %s; rerun with -update and review the diff", golden)
			}
			if len(cat.Tools) != doc.tools {
				t.Errorf("%d tools, want %d", len(cat.Tools), doc.tools)
			}
			// The same document must give byte-identical output every time.
			cat2, _ := BuildCatalog(context.Background(), cfg, nil)
			var buf2 bytes.Buffer
			cat2.Listing().WriteJSON(&buf2)
			if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
				t.Error("catalog is not stable across builds")
			}
		})
	}
}

// upstreamLog is an in-process or remote API that records the headers of every
// call.
type upstreamLog struct {
	mu      sync.Mutex
	headers []http.Header
}

const testDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/things/{id}": {
      "get": {"operationId": "get_thing", "tags": ["agent-exposed"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}},
      "delete": {"operationId": "delete_thing", "tags": ["internal"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"204": {"description": "gone"}}}
    },
    "/things": {
      "post": {"operationId": "create_thing", "tags": ["agent-exposed"],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}},
        "responses": {"201": {"description": "made", "content": {"application/json": {"schema": {"type": "object"}}}}}}
    }
  }
}`

func (u *upstreamLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	if r.URL.Path == "/things/missing" {
		http.Error(w, `{"detail":"no such thing"}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/things/"), "name": "thing"})
}

func (u *upstreamLog) last() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.headers) == 0 {
		return nil
	}
	return u.headers[len(u.headers)-1]
}

// headerTransport adds headers to every request of the MCP client.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestForwarding drives the gateway over real Streamable HTTP with the go-sdk
// client, against an upstream that is in-process in one case and remote in the
// other, and checks the bearer token — and only it — reaches the API.
func TestForwarding(t *testing.T) {
	for _, mode := range []string{"in-process", "remote", "remote-stateful"} {
		t.Run(mode, func(t *testing.T) {
			api := &upstreamLog{}
			u := Upstream{Name: "things", OpenAPI: "things.json", Document: []byte(testDoc)}
			if mode == "in-process" {
				u.Handler = api
			} else {
				srv := httptest.NewServer(api)
				t.Cleanup(srv.Close)
				u.BaseURL = srv.URL
			}
			cfg := &Config{Upstreams: []Upstream{u}, Stateful: mode == "remote-stateful"}
			g, err := New(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			gw := httptest.NewServer(g.Handler())
			t.Cleanup(gw.Close) // after the session's Cleanup: LIFO

			session := connect(t, gw.URL+"/mcp", http.Header{
				"Authorization":   {"Bearer caller-token"},
				"Cookie":          {"session=secret"},
				"X-Forwarded-For": {"10.0.0.1"},
				"X-Custom":        {"must-not-leak"},
			})
			tools, err := session.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
				a := tool.Annotations
				if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
					t.Errorf("%s: hints not all explicit: %+v", tool.Name, a)
				}
			}
			if got := strings.Join(names, ","); got != "create_thing,get_thing" {
				t.Errorf("tools = %s, want create_thing,get_thing (delete_thing is not exposed)", got)
			}

			res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_thing", Arguments: map[string]any{"id": "a/b"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("get_thing: %v", res.Content)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(sc), `"id":"a/b"`) {
				t.Errorf("structuredContent = %s", sc)
			}
			h := api.last()
			if got := h.Get("Authorization"); got != "Bearer caller-token" {
				t.Errorf("Authorization upstream = %q", got)
			}
			for _, leak := range []string{"Cookie", "X-Forwarded-For", "X-Custom", "Mcp-Session-Id", "Mcp-Protocol-Version"} {
				if v := h.Get(leak); v != "" {
					t.Errorf("%s reached the upstream: %q", leak, v)
				}
			}

			res, err = session.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_thing", Arguments: map[string]any{"name": "n"}})
			if err != nil || res.IsError {
				t.Fatalf("create_thing: %v %v", err, res)
			}
			res, _ = session.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_thing", Arguments: map[string]any{"id": "missing"}})
			if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "404") {
				t.Errorf("404 not an error result: %+v", res)
			}
			n := len(api.headers)
			res, _ = session.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_thing", Arguments: map[string]any{"name": 5}})
			if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "name") {
				t.Errorf("schema violation: %+v", res)
			}
			if len(api.headers) != n {
				t.Error("a call with invalid arguments reached the upstream")
			}
			if _, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_thing", Arguments: map[string]any{"id": "x"}}); err == nil {
				t.Error("calling an unexposed tool: want a protocol error")
			}
		})
	}
}

// sessionOpts pins go-sdk's client to 2025-11-25, the last protocol version
// with sessions: a test of what a stateful session gets (notifications,
// subscriptions, logging/setLevel) needs one, and go-sdk's client otherwise
// speaks 2026-07-28, which a stateful gateway answers without a session.
var sessionOpts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func connect(t *testing.T, endpoint string, h http.Header) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, endpoint, h, nil)
}

// connectSession connects at 2025-11-25 (see sessionOpts).
func connectSession(t *testing.T, endpoint string, h http.Header) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, endpoint, h, sessionOpts)
}

func connectWith(t *testing.T, endpoint string, h http.Header, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: headerTransport{h}}}
	session, err := client.Connect(context.Background(), transport, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// TestStaticToken checks the stdio path: no inbound HTTP header, so the static
// token is what the upstream sees.
func TestStaticToken(t *testing.T) {
	api := &upstreamLog{}
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: "things.json", Document: []byte(testDoc), Handler: api}}}
	g, err := New(context.Background(), cfg, &Options{StaticToken: "local-user"})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_thing", Arguments: map[string]any{"id": "1"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if got := api.last().Get("Authorization"); got != "Bearer local-user" {
		t.Errorf("Authorization = %q", got)
	}
}

// TestCapabilities: the gateway advertises only what it does.
// tools.listChanged only when stateful: a reload's changes reach a session
// (follow.go), where a stateless POST has no stream to notify on (and
// without MCP upstreams its catalog changes only with a reload).
func TestCapabilities(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		cfg := &Config{Stateful: stateful, Upstreams: []Upstream{{OpenAPI: "things.json", Document: []byte(testDoc), Handler: &upstreamLog{}}}}
		g, err := New(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		session := connect(t, srv.URL+"/mcp", nil)
		caps := session.InitializeResult().Capabilities
		if caps.Tools == nil || caps.Tools.ListChanged != stateful {
			t.Errorf("stateful=%v: tools capability %+v, want listChanged %v", stateful, caps.Tools, stateful)
		}
		session.Close() // before the server: a stateful session holds a GET stream open
		srv.Close()
	}
}
