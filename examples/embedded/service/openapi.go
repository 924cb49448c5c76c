package service

import (
	_ "embed"
	"net/http"
)

// openAPI is the API's OpenAPI 3.0 document. Its operations are tagged the
// orchestrator-core way: agent-exposed is the gate that makes an operation a
// tool, agent-destructive marks the delete. Its server URL is "/", so paths
// resolve against wherever the document was read from — the in-process
// handler, for the gateway.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}
