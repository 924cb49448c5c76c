package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
)

// reviewEngine is a playbook engine whose catalog serves one playbook with
// the given YAML source.
func reviewEngine(t *testing.T, src *atomic.Value) *httptest.Server {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"playbooks": []map[string]any{{"path": "kb/run", "workload": map[string]any{"q": ""}, "content": src.Load().(string)}}})
	}))
	t.Cleanup(engine.Close)
	return engine
}

// TestReviewPlaybookResourceBypassesLock: `serve --lock` withholds every
// resource the reviewed lock does not hold unchanged — but only OpenAPI
// resources (resources.go checks g.heldResources). addPlaybookResources
// never consults the lock, and the catalog's LockedResources does not list
// playbook resources at all. Attack: the engine's catalog (semi-trusted)
// gains an mcp.resources http entry after the lock was reviewed; the locked
// gateway serves it at once, making the gateway GET any URL the engine
// names (an internal address, say) for every client. Fix: put playbook
// resources in LockedResources (name, URL template, description/mime SHA)
// and skip those in g.heldResources in addPlaybookResources.
func TestReviewPlaybookResourceBypassesLock(t *testing.T) {
	kb := newKBServer(t)
	var src atomic.Value
	src.Store("steps: []\n")
	engine := reviewEngine(t, &src)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", BaseURL: engine.URL,
		Playbooks: &Playbooks{Execute: "POST /execute", Status: "GET /executions/{id}", Catalog: "GET /catalog"}}}}
	cat, err := BuildCatalog(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock := annotations.NewLock(cat.Facts())
	lock.SetResources(cat.LockedResources())
	lock.SetPrompts(cat.LockedPrompts(cfg))

	// After review, the engine's playbook gains a resource.
	src.Store(fmt.Sprintf(`
mcp:
  resources:
    - name: page
      type: http
      spec: {method: GET, url: "%s/pages/{{ input.id }}"}
`, kb.URL))
	g, err := New(t.Context(), cfg, &Options{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	s := connect(t, srv.URL+"/mcp", nil)
	templates, err := s.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(templates.ResourceTemplates) != 0 {
		t.Errorf("serve --lock serves a playbook resource the lock does not hold: %+v", templates.ResourceTemplates[0])
	}
}

// TestReviewPlaybookResourceNoRedirect: the doc promises a playbook
// resource's GET never follows a redirect. Attack: the playbook's origin
// answers 302 to another host (an internal service); the gateway must not
// fetch it.
func TestReviewPlaybookResourceNoRedirect(t *testing.T) {
	var hit atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"secret":"internal"}`))
	}))
	t.Cleanup(inner.Close)
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/x", http.StatusFound)
	}))
	t.Cleanup(kb.Close)
	var src atomic.Value
	src.Store(fmt.Sprintf(`
mcp:
  resources:
    - name: page
      type: http
      spec: {method: GET, url: "%s/pages/{{ input.id }}"}
`, kb.URL))
	engine := reviewEngine(t, &src)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", BaseURL: engine.URL,
		Playbooks: &Playbooks{Execute: "POST /execute", Status: "GET /executions/{id}", Catalog: "GET /catalog"}}}}
	g, err := New(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	s := connect(t, srv.URL+"/mcp", http.Header{"Authorization": {"Bearer caller-secret"}})
	res, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: kb.URL + "/pages/1"})
	if hit.Load() != 0 {
		t.Errorf("the redirect was followed to another origin")
	}
	if err == nil && res != nil && len(res.Contents) > 0 && strings.Contains(res.Contents[0].Text, "internal") {
		t.Errorf("the redirected body was served: %+v", res.Contents[0])
	}
}

// TestReviewPlaybookResourceCollisionIsFatal: the engine's catalog is
// semi-trusted and every other problem in a playbook's mcp: section is a
// warning with the rest served — but two mcp.resources entries with the
// same URL (in one playbook, under different names, or in two playbooks)
// make addPlaybookResources return an error, and New fails: the whole
// gateway (every upstream's tools) does not start because of one line of
// an engine's catalog. Fix: in addPlaybookResources, log a warning (and a
// finding) and skip the later resource instead of returning an error, as
// addPlaybookMCP does for a prompt name another prompt has.
func TestReviewPlaybookResourceCollisionIsFatal(t *testing.T) {
	var src atomic.Value
	src.Store(`
mcp:
  resources:
    - {name: a, type: http, spec: {method: GET, url: "https://kb.example.com/pages/{{ input.id }}"}}
    - {name: b, type: http, spec: {method: GET, url: "https://kb.example.com/pages/{{ input.id }}"}}
`)
	engine := reviewEngine(t, &src)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", BaseURL: engine.URL,
		Playbooks: &Playbooks{Execute: "POST /execute", Status: "GET /executions/{id}", Catalog: "GET /catalog"}}}}
	if _, err := New(t.Context(), cfg, nil); err != nil {
		t.Errorf("one duplicate URL in an engine's playbook stops the gateway: %v", err)
	}
}
