// Package sdkwire holds what the gateway copies of go-sdk's wire behaviour
// (github.com/modelcontextprotocol/go-sdk, at SDKVersion): how it decodes a
// JSON-RPC message, compares request ids, checks a Streamable HTTP POST
// before it reads it, encodes cursors and results. The front door answers
// some requests itself (the stateless fast path, tasks, cancellations,
// protocol errors go-sdk would answer as text/plain) and must answer them as
// go-sdk would; the differential tests and fuzzers in package gateway
// compare the two on the same requests.
//
// The copies are pinned to one go-sdk version: TestSDKVersionPinned fails
// when go.mod names another, and lists the files to re-check (Mirrors).
package sdkwire

// SDKModule is go-sdk's module path.
const SDKModule = "github.com/modelcontextprotocol/go-sdk"

// SDKVersion is the go-sdk version whose behaviour the Mirrors copy.
const SDKVersion = "v1.8.0"

// Mirrors are the files, from the repository's root, that copy go-sdk
// behaviour at SDKVersion, each with what it copies: what to re-read when
// go-sdk changes.
var Mirrors = []string{
	"gateway/internal/sdkwire/*.go: decoding (segmentio, case-sensitive, depth limit), request ids, Accept and Host checks, cursors, result encoding",
	"gateway/fastpath.go: the stateless tools/list and tools/call answers (mcp/server.go listTools, callTool; mcp/streamable.go)",
	"gateway/frontdoor.go: message checks before go-sdk reads a POST (ids, batches, JSON-RPC shape); the initialize params are wire.go's InitializeProblem (initializeMethodInfo, initializeParamsV2)",
	"gateway/rpcerrors.go: go-sdk's text/plain protocol errors, rewritten as JSON-RPC errors",
	"gateway/fastresult.go: a CallToolResult written as its MarshalJSON writes it",
	"gateway/cancel.go: a notifications/cancelled answered as go-sdk answers any notification (202, no body); ids by wire.go's IDKey",
	"gateway/tasks.go: tools/list with execution.taskSupport, as go-sdk would list it",
	"gateway/stdio/stdio.go: the newline-delimited transport go-sdk's StdioTransport speaks; when a session serves calls (InitializeParams set), and that its answers depend on the version the client asked for (mcp/mrtr.go clientSupportsMultiRoundTrip)",
	"gateway/faststdio.go: a stdio tools/call answered as go-sdk's session answers it (mcp/server.go callTool, the request it builds without RequestExtra)",
	"auth/middleware.go: go-sdk's RequireBearerToken answers",
}
