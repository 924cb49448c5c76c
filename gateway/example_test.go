package gateway_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway"
)

// petsDocument is the API's OpenAPI document: one operation, tagged
// agent-exposed, so it becomes the tool get_pet.
const petsDocument = `{
  "openapi": "3.0.3",
  "info": {"title": "pets", "version": "1"},
  "paths": {"/pets/{id}": {"get": {
    "operationId": "get_pet",
    "tags": ["agent-exposed"],
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "responses": {"200": {"description": "the pet", "content": {"application/json": {"schema": {
      "type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}}}}}
  }}}
}`

// ExampleNew mounts a gateway in front of a service's own http.Handler, in
// one process (see docs/embedding.md), and calls its tool with go-sdk's
// client over Streamable HTTP.
func ExampleNew() {
	// The service's REST API, which also serves its own document.
	api := http.NewServeMux()
	api.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, petsDocument)
	})
	api.HandleFunc("GET /pets/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"name":"Rex"}`, r.PathValue("id"))
	})

	// The gateway reads /openapi.json from the handler and serves every
	// tool call with it: no network hop.
	ctx := context.Background()
	g, err := gateway.New(ctx, &gateway.Config{Upstreams: []gateway.Upstream{
		{Name: "pets", OpenAPI: "/openapi.json", Handler: api},
	}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.Handler())
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// An MCP client, as Claude Desktop or Cursor would connect.
	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range list.Tools {
		a := t.Annotations
		fmt.Printf("%s %q: readOnly=%v destructive=%v idempotent=%v openWorld=%v\n",
			t.Name, a.Title, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_pet", Arguments: map[string]any{"id": "7"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	fmt.Println(res.StructuredContent)
	// Output:
	// get_pet "Get Pet": readOnly=true destructive=false idempotent=true openWorld=false
	// false {"id":"7","name":"Rex"}
	// map[id:7 name:Rex]
}
