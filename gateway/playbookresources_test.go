package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kbServer is a real HTTP server a playbook's http resource reads, which
// records what reaches it.
type kbServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string // "RequestURI Authorization"
}

func newKBServer(t *testing.T) *kbServer {
	kb := &kbServer{}
	kb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kb.mu.Lock()
		kb.reqs = append(kb.reqs, r.RequestURI+" "+r.Header.Get("Authorization"))
		kb.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/pages/missing") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"page": r.URL.Path, "lang": r.URL.Query().Get("lang")})
	}))
	t.Cleanup(kb.Close)
	return kb
}

func (kb *kbServer) requests() []string {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	return append([]string(nil), kb.reqs...)
}

// TestPlaybookHTTPResources: a playbook's http GET resource (its mcp:
// section) is a resource template whose URI is its URL; a read sends the
// GET there with no credential (the caller's token stays with the
// configured upstream), each value escaped as one value, a dot segment
// refused, a 404 -32002 naming the URI.
func TestPlaybookHTTPResources(t *testing.T) {
	kb := newKBServer(t)
	src := fmt.Sprintf(`
mcp:
  resources:
    - name: page
      type: http
      description: A page of the knowledge base.
      spec: {method: GET, url: "%s/pages/{{ input.id }}?lang={{ input.lang }}"}
    - {name: rows, type: postgres, spec: {sql: "SELECT 1"}}
`, kb.URL)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"playbooks": []map[string]any{{"path": "kb/run", "workload": map[string]any{"q": ""}, "content": src}}})
	}))
	t.Cleanup(engine.Close)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", BaseURL: engine.URL,
		Playbooks: &Playbooks{Execute: "POST /execute", Status: "GET /executions/{id}", Catalog: "GET /catalog"}}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	s := connect(t, srv.URL+"/mcp", http.Header{"Authorization": {"Bearer caller-secret"}})
	ctx := context.Background()

	templates, err := s.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := kb.URL + "/pages/{id}?lang={lang}"
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != want || templates.ResourceTemplates[0].Name != "kb_run_page" {
		t.Fatalf("templates: %+v, want %s", templates.ResourceTemplates, want)
	}
	for _, tc := range []struct {
		uri, sent, err string
		code           int64
	}{
		{uri: kb.URL + "/pages/42?lang=en", sent: "/pages/42?lang=en"},
		{uri: kb.URL + "/pages/a%2Fb?lang=e%26x%3D1", sent: "/pages/a%2Fb?lang=e%26x%3D1"},
		{uri: kb.URL + "/pages/%2E%2E?lang=en", code: jsonrpc.CodeInvalidParams, err: `id: ".." is not a value the gateway sends`},
		{uri: kb.URL + "/pages/..?lang=en", code: jsonrpc.CodeInvalidParams, err: `id: ".." is not a value the gateway sends`},
		{uri: kb.URL + "/pages/missing?lang=en", sent: "/pages/missing?lang=en", code: codeResourceNotFound, err: "Resource not found: " + kb.URL + "/pages/missing?lang=en"},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			before := len(kb.requests())
			res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: tc.uri})
			reqs := kb.requests()[before:]
			if tc.sent == "" && len(reqs) != 0 {
				t.Errorf("sent %v", reqs)
			}
			if tc.sent != "" && (len(reqs) != 1 || reqs[0] != tc.sent+" ") {
				t.Errorf("sent %q, want %q with no Authorization", reqs, tc.sent)
			}
			if tc.code != 0 {
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != tc.code || !strings.Contains(we.Message, tc.err) {
					t.Errorf("error %v, want %d %q", err, tc.code, tc.err)
				}
				return
			}
			if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"page"`) || res.Contents[0].URI != tc.uri {
				t.Errorf("read: %+v %v", res, err)
			}
		})
	}
	// In the audit's facts and the lockfile; withheld by a lock without it.
	facts := g.Catalog().ResourceFacts()
	if len(facts) != 1 || facts[0].URITemplate != want || facts[0].SelectedBy != "playbook kb/run mcp.resources" || facts[0].DescriptionSHA256 == "" {
		t.Errorf("facts: %+v", facts)
	}
	locked, err := New(context.Background(), cfg, &Options{Lock: annotations.NewLock(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if d := locked.Drift(); len(d.ResourcesAdded) != 1 || d.ResourcesAdded[0] != want {
		t.Errorf("drift: %+v", d.ResourcesAdded)
	}
	lsrv := httptest.NewServer(locked.Handler())
	t.Cleanup(lsrv.Close)
	if lt, err := connect(t, lsrv.URL+"/mcp", nil).ListResourceTemplates(ctx, nil); err != nil || len(lt.ResourceTemplates) != 0 {
		t.Errorf("a resource not in the lock is served: %+v %v", lt, err)
	}
	var parts []string
	for _, p := range g.Catalog().PlaybookParts {
		parts = append(parts, p.Name+": "+p.Reason)
	}
	if got := strings.Join(parts, "; "); got != "page: served as resource template kb_run_page; rows: not served: a postgres resource runs inside the engine" {
		t.Errorf("explain: %s", got)
	}
}

// FuzzPlaybookResourceTarget: whatever URI a client reads, the URL a
// playbook resource's GET goes to keeps the playbook's origin and path
// prefix, has no dot segment, and its values hold unreserved characters
// and percent-escapes only.
func FuzzPlaybookResourceTarget(f *testing.F) {
	parts, err := config.ParseTemplate("https://kb.example.com/pages/{{ input.id }}?lang={{ input.lang }}")
	if err != nil {
		f.Fatal(err)
	}
	p := &playbookResource{r: &catalog.PlaybookHTTPResource{Parts: parts}}
	for _, s := range []string{"https://kb.example.com/pages/1?lang=en", "https://kb.example.com/pages/%2E%2E?lang=x", "https://kb.example.com/pages/a/b?lang=c&d=e",
		"https://kb.example.com/pages/%zz?lang=", "https://kb.example.com/pages/é?lang=?", "https://evil.example.com/pages/1?lang=en"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		target, err := p.target(uri)
		if err != nil {
			return
		}
		rest, ok := strings.CutPrefix(target, "https://kb.example.com/pages/")
		if !ok {
			t.Fatalf("%q → %q: another origin or path", uri, target)
		}
		id, lang, ok := strings.Cut(rest, "?lang=")
		if !ok {
			t.Fatalf("%q → %q: the query is not the template's", uri, target)
		}
		for _, v := range []string{id, lang} {
			if v == "" || v == "." || v == ".." || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%") != "" {
				t.Fatalf("%q → %q: value %q", uri, target, v)
			}
		}
	})
}
