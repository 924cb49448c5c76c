package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/upstream"
)

// TestConfigRelativeOpenAPI: a relative openapi path in a configuration file
// is read from the file's folder, whatever the working directory; URLs and
// absolute paths are left alone.
func TestConfigRelativeOpenAPI(t *testing.T) {
	root := t.TempDir()
	spec, err := os.ReadFile("testdata/swagger-petstore-3.0.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "configs", "petstore")
	other := filepath.Join(root, "elsewhere")
	for _, d := range []string{sub, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(sub, "spec.yaml"), spec, 0o600)
	abs := filepath.Join(root, "abs.yaml")
	os.WriteFile(filepath.Join(sub, "mcpgate.yaml"), []byte(`upstreams:
  - {name: rel, openapi: spec.yaml, expose_all: true, base_url: "http://127.0.0.1:1"}
  - {name: url, openapi: "https://example.com/openapi.json"}
  - {name: abs, openapi: "`+abs+`"}
`), 0o600)
	t.Chdir(other)

	cfg, err := LoadConfig("../configs/petstore/mcpgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{filepath.Join("..", "configs", "petstore", "spec.yaml"), "https://example.com/openapi.json", abs} {
		if got := cfg.Upstreams[i].OpenAPI; got != want {
			t.Errorf("upstreams[%d].openapi = %q, want %q", i, got, want)
		}
	}
	cfg.Upstreams = cfg.Upstreams[:1]
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := BuildCatalog(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("the document next to the config was not found from another folder: %v", err)
	}
	if len(cat.Tools) != 19 {
		t.Errorf("%d tools, want petstore's 19", len(cat.Tools))
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
			cfg, err := ParseConfig([]byte("upstreams:\n  - openapi: a\n    base_url: " + srv.URL + "\n" + tt.line))
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
	if _, err := ParseConfig([]byte("upstreams:\n  - openapi: a\n    direct_transport: sometimes\n")); err == nil ||
		!strings.Contains(err.Error(), `line 3: upstreams[0].direct_transport is "sometimes", not true or false`) {
		t.Errorf("direct_transport: sometimes: %v", err)
	}
}
