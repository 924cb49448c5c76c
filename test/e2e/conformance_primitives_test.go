package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixturesDoc is a REST API whose GET operations are the conformance
// suite's resource fixtures, picked as resources by x-mcp-resource with
// the suite's URIs.
const fixturesDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "conformance fixtures", "version": "1"},
  "paths": {
    "/static-text": {"get": {"operationId": "static_text", "x-mcp-resource": {"uri": "test://static-text", "mimeType": "text/plain"},
      "responses": {"200": {"description": "text", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/static-binary": {"get": {"operationId": "static_binary", "x-mcp-resource": {"uri": "test://static-binary", "mimeType": "image/png"},
      "responses": {"200": {"description": "an image", "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}}}}}},
    "/template/{id}/data": {"get": {"operationId": "template_data", "x-mcp-resource": {"uri": "test://template/{id}/data"},
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "data", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
  }
}`

// png1x1 is a 1×1 PNG.
var png1x1 = []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89}

// fixturesConfig is the gateway's configuration: the fixtures API, and the
// suite's prompts (test_prompt_with_arguments' arg1 has values to
// complete, for completion-complete).
const fixturesConfig = `upstreams:
  - name: fixtures
    openapi: %[1]s/openapi.json
    base_url: %[1]s
    expose_tags: [none]
prompts:
  - name: test_simple_prompt
    description: A simple prompt without arguments
    template: This is a simple prompt for testing.
  - name: test_prompt_with_arguments
    description: A prompt with required arguments
    arguments:
      - {name: arg1, description: First test argument, required: true, enum: [testValue1, test-other]}
      - {name: arg2, description: Second test argument, required: true}
    template: "Prompt with arguments: arg1='{{ input.arg1 }}', arg2='{{ input.arg2 }}'"
`

// primitiveScenarios are the suite's resources, prompts and completion
// scenarios whose fixtures a gateway can serve: resources from a REST
// API's GET operations, prompts from its configuration. Not here: prompts
// with an embedded resource or an image (a configured prompt renders one
// text message), and resources-subscribe (a federated upstream's, run by
// TestConformanceFederated).
var primitiveScenarios = []string{
	"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
	"prompts-list", "prompts-get-simple", "prompts-get-with-args", "completion-complete",
}

// TestConformancePrimitives runs those scenarios against the real binary,
// stateless and stateful, in front of a real HTTP API.
func TestConformancePrimitives(t *testing.T) {
	b := setup(t)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi.json":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(fixturesDoc))
		case r.URL.Path == "/static-text":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("This is the content of the static text resource."))
		case r.URL.Path == "/static-binary":
			w.Header().Set("Content-Type", "image/png")
			w.Write(png1x1)
		case strings.HasPrefix(r.URL.Path, "/template/") && strings.HasSuffix(r.URL.Path, "/data"):
			id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/template/"), "/data")
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	cfg := filepath.Join(t.TempDir(), "fixtures.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(fixturesConfig, api.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"stateless", "stateful"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"serve", "--addr", "127.0.0.1:0", "--config", cfg}
			if mode == "stateful" {
				args = append(args, "--stateful")
			}
			url := startGateway(t, b.mcpgate, args)
			for _, sc := range primitiveScenarios {
				t.Run(sc, func(t *testing.T) {
					runScenario(t, url, sc, mode, nil)
				})
			}
		})
	}
}
