package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
)

const hiddenEverywhereDoc = `openapi: 3.0.3
info: {title: Pets, version: "1"}
servers: [{url: "https://api.example.com/v1"}]
paths:
  /pets/{id}:
    post:
      operationId: get_pet
      tags: [agent-exposed]
      summary: "Get a pet."
      parameters:
        - name: id
          in: path
          required: true
          example: "ex\u200Bample-param"
          schema: {type: string, pattern: "^a\u200Bb$", format: "fo\u200Brmat", example: "sch\u200Bema-example", x-hint: "x\u200Bhint"}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                a:
                  type: array
                  items: {type: string, description: "items\u200Bdesc"}
                b:
                  type: object
                  additionalProperties: {type: string, description: "addl\u200Bdesc"}
                c:
                  not: {description: "not\u200Bdesc"}
                d:
                  type: string
                  externalDocs: {description: "ext\u200Bdocs", url: "https://x.example"}
                e:
                  type: object
                  discriminator: {propertyName: "ki\u200Bnd"}
                  properties: {"ki\u200Bnd": {type: string}}
                f:
                  type: string
                  enum: ["one\u200B"]
                  x-enum-descriptions: ["enum\u200Bdesc"]
                g:
                  type: string
                  deprecated: true
                  readOnly: false
                  xml: {name: "x\u200Bml"}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  out: {type: string, example: "out\u200Bexample", pattern: "^o\u200Bk$"}
`

// TestServedTextsHideNothing: a document that hides a zero-width space in
// every string a schema can carry (examples, pattern, format, extensions,
// nested and composed schemas, discriminators) is served with none in
// tools/list: what the gateway serves of it is sanitized, or left out.
func TestServedTextsHideNothing(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: "d.yaml", Document: []byte(hiddenEverywhereDoc), Handler: api}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	body := answerJSON(t, sendRaw(t, srv.URL+"/mcp", rpc("1", "tools/list", ""), nil))
	var msg any
	json.Unmarshal([]byte(body), &msg)
	eachString(msg, func(s string) {
		if annotations.SanitizeText(s) != s || strings.Contains(s, "\u200b") {
			t.Errorf("served with a hidden character: %q", s)
		}
	})
}
