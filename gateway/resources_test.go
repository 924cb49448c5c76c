package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// resourceDoc is an API whose GET operations are resources: a plain one
// (readme), templates for JSON, binary and a cap-busting answer.
const resourceDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "pets", "version": "1"},
  "paths": {
    "/readme": {"get": {"operationId": "readme", "summary": "The API's readme", "tags": ["agent-resource"],
      "responses": {"200": {"description": "ok", "content": {"text/markdown": {}}}}}},
    "/pets/{petId}": {"get": {"operationId": "getPet", "x-mcp-resource": true,
      "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}},
                     {"name": "fields", "in": "query", "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    "/pets/{petId}/photo": {"get": {"operationId": "getPhoto", "x-mcp-resource": true,
      "parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "ok", "content": {"image/png": {}}}}}},
    "/big": {"get": {"operationId": "big", "tags": ["agent-resource"],
      "responses": {"200": {"description": "ok", "content": {"text/plain": {}}}}}}
  }
}`

// png is the start of a PNG file: not UTF-8.
var png = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0x0d, 0xff}

type resourceAPI struct {
	mu   sync.Mutex
	uris []string
	auth []string
}

func (a *resourceAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.uris = append(a.uris, r.RequestURI)
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	a.mu.Unlock()
	switch p := r.URL.EscapedPath(); {
	case p == "/readme":
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.Write([]byte("# Pets\n"))
	case p == "/big":
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bytes.Repeat([]byte("x"), upstream.DefaultMaxResponseBytes+1))
	case p == "/pets/1/photo":
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	case p == "/pets/missing":
		http.NotFound(w, r)
	case p == "/pets/boom":
		http.Error(w, "database on fire", http.StatusInternalServerError)
	case strings.HasPrefix(p, "/pets/"):
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": strings.TrimPrefix(p, "/pets/"), "fields": r.URL.Query().Get("fields")})
	default:
		http.NotFound(w, r)
	}
}

func (a *resourceAPI) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.uris...)
}

// TestOpenAPIResources serves an API's GET operations as resources to
// go-sdk's client over Streamable HTTP (stateful, so that JSON-RPC errors
// arrive with their codes): listed and templated with their names and
// types; read as text, JSON and base64 blobs with the caller's token; a
// 404 is -32002 with the URI, a 500 an error naming the status, an answer
// over the cap an error saying so, and hostile values never reach the
// upstream unescaped.
func TestOpenAPIResources(t *testing.T) {
	api := &resourceAPI{}
	up := httptest.NewServer(api)
	t.Cleanup(up.Close)
	g, err := New(t.Context(), &Config{Stateful: true, Upstreams: []Upstream{{Name: "petstore", OpenAPI: "pets.json", Document: []byte(resourceDoc), BaseURL: up.URL}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	cs := connect(t, srv.URL+"/mcp", http.Header{"Authorization": {"Bearer caller-token"}})

	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil {
		t.Errorf("capabilities %+v: no resources", caps)
	}
	l, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range l.Resources {
		listed = append(listed, r.URI+" "+r.Name+" "+r.MIMEType+" "+r.Title)
	}
	if want := []string{"petstore://big big text/plain Big", "petstore://readme readme text/markdown The API's readme"}; strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Errorf("resources/list:\n%s\nwant\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
	tl, err := cs.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var templates []string
	for _, r := range tl.ResourceTemplates {
		templates = append(templates, r.URITemplate+" "+r.Name+" "+r.MIMEType)
	}
	if want := []string{"petstore://pets/{petId}/photo getPhoto image/png", "petstore://pets/{petId}{?fields} getPet application/json"}; strings.Join(templates, "\n") != strings.Join(want, "\n") {
		t.Errorf("resources/templates/list:\n%s\nwant\n%s", strings.Join(templates, "\n"), strings.Join(want, "\n"))
	}

	read := func(uri string) (*mcp.ResourceContents, error) {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return nil, err
		}
		if len(res.Contents) != 1 {
			t.Fatalf("read %s: %d contents, want 1", uri, len(res.Contents))
		}
		return res.Contents[0], nil
	}
	ok := []struct{ uri, mime, text, upstream string }{
		{"petstore://readme", "text/markdown", "# Pets\n", "/readme"},
		{"petstore://pets/7", "application/json", `{"fields":"","id":"7"}` + "\n", "/pets/7"},
		{"petstore://pets/7?fields=name%20age", "application/json", `{"fields":"name age","id":"7"}` + "\n", "/pets/7?fields=name+age"},
		// An encoded slash stays inside its segment, escaped again.
		{"petstore://pets/a%2Fb", "application/json", `{"fields":"","id":"a%2Fb"}` + "\n", "/pets/a%2Fb"},
	}
	for _, tt := range ok {
		c, err := read(tt.uri)
		if err != nil {
			t.Errorf("read %s: %v", tt.uri, err)
			continue
		}
		if c.URI != tt.uri || c.MIMEType != tt.mime || c.Text != tt.text || c.Blob != nil {
			t.Errorf("read %s: %+v, want text %q as %s", tt.uri, c, tt.text, tt.mime)
		}
		if got := api.seen(); got[len(got)-1] != tt.upstream {
			t.Errorf("read %s reached the upstream as %s, want %s", tt.uri, got[len(got)-1], tt.upstream)
		}
	}
	if c, err := read("petstore://pets/1/photo"); err != nil || c.MIMEType != "image/png" || !bytes.Equal(c.Blob, png) || c.Text != "" {
		t.Errorf("read photo: %+v, %v; want the PNG as a blob", c, err)
	}
	api.mu.Lock()
	for _, a := range api.auth {
		if a != "Bearer caller-token" {
			t.Errorf("the upstream got Authorization %q, want the caller's token", a)
		}
	}
	api.mu.Unlock()

	before := len(api.seen())
	fails := []struct {
		uri  string
		code int64
		says string
	}{
		{"petstore://pets/missing", -32002, "Resource not found: petstore://pets/missing"},
		{"petstore://pets/boom", jsonrpc.CodeInternalError, "upstream petstore answered HTTP 500 Internal Server Error"},
		{"petstore://big", jsonrpc.CodeInternalError, "larger than the gateway's response cap"},
		{"petstore://pets/x/photo", jsonrpc.CodeInvalidParams, "petId"}, // not an integer
		{"petstore://pets/%2E%2E", jsonrpc.CodeInvalidParams, "'..' segment"},
		{"petstore://pets/..%2F..%2Fadmin", jsonrpc.CodeInvalidParams, "'..' segment"},
		{"petstore://pets/7?debug=1", jsonrpc.CodeInvalidParams, `query parameter "debug"`},
	}
	sent := 3 // missing, boom and big reach the upstream; the rest must not
	for _, tt := range fails {
		_, err := read(tt.uri)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != tt.code || !strings.Contains(je.Message, tt.says) {
			t.Errorf("read %s: %v; want %d saying %q", tt.uri, err, tt.code, tt.says)
			continue
		}
		if tt.code == -32002 && !strings.Contains(string(je.Data), `"uri":"petstore://pets/missing"`) {
			t.Errorf("read %s: data %s lacks the URI", tt.uri, je.Data)
		}
	}
	if got := api.seen()[before:]; len(got) != sent {
		t.Errorf("the upstream got %v; want only the 404, the 500 and the big answer", got)
	}
}

// TestOpenAPIResourceURIClash: two operations that ask for one URI (here
// through x-mcp-resource's uri) are a warning and a finding for the later
// one, in document order, not two handlers for one URI.
func TestOpenAPIResourceURIClash(t *testing.T) {
	doc := strings.Replace(resourceDoc, `"operationId": "big", "tags": ["agent-resource"]`, `"operationId": "big", "x-mcp-resource": {"uri": "petstore://readme"}`, 1)
	g, err := New(t.Context(), &Config{Upstreams: []Upstream{{Name: "petstore", OpenAPI: "pets.json", Document: []byte(doc), BaseURL: "http://127.0.0.1:1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(g.Catalog().Resources); n != 3 {
		t.Errorf("%d resources, want 3 (readme refused)", n)
	}
	if w := strings.Join(g.Catalog().Warnings, "\n"); !strings.Contains(w, "GET /readme: not a resource (selected by tag agent-resource): its URI petstore://readme is petstore GET /big's already") {
		t.Errorf("warnings:\n%s", w)
	}
}

// TestOpenAPIResourcesLock: serve --lock withholds the resources the lock
// does not hold unchanged, and serves those it does.
func TestOpenAPIResourcesLock(t *testing.T) {
	cfg := &Config{Upstreams: []Upstream{{Name: "petstore", OpenAPI: "pets.json", Document: []byte(resourceDoc), BaseURL: "http://127.0.0.1:1"}}}
	cat, err := BuildCatalog(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock := annotations.NewLock(cat.Facts())
	locked := cat.LockedResources()
	// readme is locked with another description: changed; big is not
	// locked: added. Both are withheld; the templates are served.
	for i := range locked {
		if locked[i].Name == "readme" {
			locked[i].DescriptionSHA256 = "0000"
		}
	}
	lock.SetResources(slices.DeleteFunc(locked, func(r annotations.LockedResource) bool { return r.Name == "big" }))
	g, err := New(t.Context(), cfg, &Options{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Drift().HeldResources(), " "); got != "petstore://big petstore://readme" {
		t.Errorf("held %q", got)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	l, err := cs.ListResources(t.Context(), nil)
	if err != nil || len(l.Resources) != 0 {
		t.Errorf("resources/list: %v %+v; want none served", err, l)
	}
	tl, err := cs.ListResourceTemplates(t.Context(), nil)
	if err != nil || len(tl.ResourceTemplates) != 2 {
		t.Errorf("resources/templates/list: %v %+v; want both templates", err, tl)
	}
}

// TestOpenAPIResourceFederatedClash: an OpenAPI resource and an MCP
// upstream's on one URI are a start-up error naming both.
func TestOpenAPIResourceFederatedClash(t *testing.T) {
	up := newFedUpstream(t)
	doc := strings.Replace(resourceDoc, `"operationId": "readme", "summary": "The API's readme", "tags": ["agent-resource"]`,
		`"operationId": "readme", "x-mcp-resource": {"uri": "file:///motd"}`, 1)
	none := auth.Upstream{Mode: auth.ModeNone}
	cfg := &Config{Upstreams: []Upstream{
		{Name: "petstore", OpenAPI: "pets.json", Document: []byte(doc), BaseURL: "http://127.0.0.1:1", Auth: none},
		{Name: "fs", MCP: &federation.Config{URL: up.srv.URL}, ToolPrefixSet: true, Auth: none},
	}}
	g, err := New(t.Context(), cfg, nil)
	if err == nil {
		g.Close()
		t.Fatal("an OpenAPI resource and an upstream's of one URI: no error")
	}
	if !strings.Contains(err.Error(), `resource "file:///motd" is served by upstream petstore (GET /readme) and by upstream fs (file:///motd)`) {
		t.Errorf("error: %v", err)
	}
}

// TestOpenAPIResourceStdio: over a transport with no HTTP header (stdio,
// here in memory), a read carries the static token, as a tool call does.
func TestOpenAPIResourceStdio(t *testing.T) {
	api := &resourceAPI{}
	up := httptest.NewServer(api)
	t.Cleanup(up.Close)
	g, err := New(t.Context(), &Config{Upstreams: []Upstream{{Name: "petstore", OpenAPI: "pets.json", Document: []byte(resourceDoc), BaseURL: up.URL}}},
		&Options{StaticToken: "local-user"})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "petstore://pets/3"})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"id":"3"`) {
		t.Fatalf("read: %v %+v", err, res)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if got := api.auth[len(api.auth)-1]; got != "Bearer local-user" {
		t.Errorf("Authorization = %q, want the static token", got)
	}
}
