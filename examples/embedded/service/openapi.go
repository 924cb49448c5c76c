package service

import (
	_ "embed"
	"net/http"
	"slices"
)

// openAPI is the API's OpenAPI 3.0 document. Its operations are tagged the
// orchestrator-core way: agent-exposed is the gate that makes an operation a
// tool, agent-destructive marks the delete. Its server URL is "/", so paths
// resolve against wherever the document was read from — the in-process
// handler, for the gateway.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI document (a copy: callers may keep or
// change it). The service serves it at GET /openapi.json.
func OpenAPI() []byte { return slices.Clone(openAPI) }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}
