package gateway

import (
	"context"
	"os"
	"path/filepath"
	"testing"
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
