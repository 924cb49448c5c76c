package catalog

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream"
)

// corpusDir holds the real public OpenAPI documents (../shared/corpus from
// the repository's root); tests over them skip when it is absent.
const corpusDir = "../../../shared/corpus"

// TestToolSize: toolSize, which the size budgets use, is json.Marshal's size
// for every tool of the corpus's big catalogs.
func TestToolSize(t *testing.T) {
	for _, name := range []string{"github-api-2020.json", "stripe-spec3-2022.json", "kubernetes-swagger-2.0.json", "asana-3.0.yaml"} {
		path := filepath.Join(corpusDir, name)
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s: the shared corpus is not beside this clone", path)
			}
			cfg := &config.Config{Upstreams: []config.Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cat, err := Build(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range cat.Tools {
				raw, _ := json.Marshal(tool.Tool)
				if got := toolSize(tool.Tool); got != len(raw) {
					t.Errorf("%s: toolSize %d, json.Marshal %d", tool.Tool.Name, got, len(raw))
				}
			}
		})
	}
}

func TestWorkloadSchemaSecrets(t *testing.T) {
	s := workloadSchema(config.PlaybookItem{Workload: map[string]any{"api_key": "s3cr3t", "n": 3.0, "ratio": 0.5, "on": true, "empty": "", "none": nil, "list": []any{}, "tags": []any{"a"}},
		Inputs: map[string]config.PlaybookInput{"api_key": {Secret: true}}})
	raw, _ := json.Marshal(s)
	if strings.Contains(string(raw), "s3cr3t") || strings.Contains(string(raw), `"null"`) {
		t.Errorf("schema shows a secret or a null type: %s", raw)
	}
	for _, want := range []string{`"n":{"default":3,"type":"integer"}`, `"ratio":{"default":0.5,"type":"number"}`, `"empty":{}`, `"none":{}`, `"list":{}`, `"tags":{"default":["a"],"type":"array"}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("schema %s lacks %s", raw, want)
		}
	}
}

// TestConfigDirectTransport: direct_transport (default true) keeps a
// plain-http upstream's calls on the direct transport; false sends them
// through net/http's Transport. Observable at the server: net/http asks for
// gzip (Accept-Encoding), the direct transport asks for nothing.
func TestConfigDirectTransport(t *testing.T) {
	accept := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept <- r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		name, line string
		direct     bool
	}{
		{"default", "", true},
		{"true", "    direct_transport: true\n", true},
		{"false", "    direct_transport: false\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte("upstreams:\n  - openapi: a\n    base_url: " + srv.URL + "\n" + tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if cfg, err = cfg.Resolve(); err != nil {
				t.Fatal(err)
			}
			u := &cfg.Upstreams[0]
			if u.Direct() != tt.direct {
				t.Errorf("Direct() = %t, want %t", u.Direct(), tt.direct)
			}
			c, err := newClient(u, resolveBase(u, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Send(context.Background(), http.MethodGet, "/x", nil, upstream.Credentials{})
			if err != nil || a.Status != http.StatusOK {
				t.Fatalf("Send: %+v, %v", a, err)
			}
			want := "gzip" // net/http's Transport
			if tt.direct {
				want = ""
			}
			if got := <-accept; got != want {
				t.Errorf("Accept-Encoding %q, want %q (the %s transport)", got, want, map[bool]string{true: "direct", false: "net/http"}[tt.direct])
			}
		})
	}
	if _, err := config.Parse([]byte("upstreams:\n  - openapi: a\n    direct_transport: sometimes\n")); err == nil ||
		!strings.Contains(err.Error(), `line 3: upstreams[0].direct_transport is "sometimes", not true or false`) {
		t.Errorf("direct_transport: sometimes: %v", err)
	}
}
