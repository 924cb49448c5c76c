package tagging_test

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mcpgate/mcpgate/tagging"
)

func TestProblems(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(`
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    get: {operationId: a, x-mcp-exposed: "false", responses: {"200": {description: ok}}}
    post: {operationId: b, x-mcp-name: 42, responses: {"200": {description: ok}}}
    put: {operationId: c, x-mcp-exposed: true, x-mcp-name: ok_name, responses: {"200": {description: ok}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := tagging.Problems(doc)
	if len(got) != 2 || !strings.HasPrefix(got[0], "GET /a: x-mcp-exposed is string false") || !strings.HasPrefix(got[1], "POST /a: x-mcp-name") {
		t.Errorf("Problems = %q", got)
	}
}
