package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/upstream"
)

// codeResourceNotFound is the JSON-RPC error of a resources/read whose
// upstream answered 404: -32002, as the MCP specification (2025-11-25)
// names it and issue 23 asks. go-sdk v1.8.0's mcp.ResourceNotFoundError
// answers -32602 (SEP-2164) unless MCPGODEBUG says otherwise, so it is
// not used: the code must not depend on an environment switch.
const codeResourceNotFound = -32002

// addOpenAPIResources serves the catalog's OpenAPI resources and
// templates, but those Options.Lock withholds. Each claims its URI in
// held (what addPromptsAndResources keeps), so that an MCP upstream's
// resource with the same URI is an error naming both.
func (g *Gateway) addOpenAPIResources(held map[string]string) {
	for _, r := range g.catalog.Resources {
		kind := "resource"
		if r.Template != nil {
			kind = "resource template"
		}
		held[kind+" "+r.URI()] = fmt.Sprintf("upstream %s (%s %s)", r.Upstream, r.Operation.Method, r.Operation.Path)
		if g.heldResources[r.URI()] {
			g.logger.Warn("lock: not serving a resource that is not in the lock unchanged", "resource", r.URI())
			continue
		}
		if r.Template != nil {
			g.addSDKTemplate(r.Template, g.readResource(r))
		} else {
			g.addSDKResource(r.Resource, g.readResource(r))
		}
	}
}

// readResource answers a resources/read of r: the GET sent through the
// same binding, validation, path builder, client bounds and credential as
// a tool call of the operation would be. A 2xx answer is one content, text
// for text and JSON, else a base64 blob; a 404 is codeResourceNotFound
// with the URI; any other answer, no answer, or one over the response cap
// is a JSON-RPC error that says which. Never empty contents.
func (g *Gateway) readResource(r *catalog.Resource) mcp.ResourceHandler {
	return g.resourceReader(func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, int, error) {
		return g.fetchResource(ctx, r, req.Params.URI, req.Extra)
	}, "resource", r.URI(), "upstream", r.Upstream)
}

// resourceReader is the go-sdk handler of a resource that fetch reads:
// the read cancelled when the client's POST ends, as a tool call is (see
// toolHandler), and one log line with attrs — which name the template,
// never the URI, which holds the caller's values — the status and the
// outcome.
func (g *Gateway) resourceReader(fetch func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, int, error), attrs ...any) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		start := time.Now()
		res, status, err := fetch(ctx, req)
		level, outcome := slog.LevelDebug, "ok"
		if err != nil {
			level, outcome = slog.LevelWarn, err.Error()
		}
		g.logger.Log(ctx, level, "resource read", slices.Concat(attrs, []any{"status", status, "duration", time.Since(start), "outcome", outcome})...)
		return res, err
	}
}

// fetchResource reads r at uri; status is the upstream's (0 without an
// answer), for the log line.
func (g *Gateway) fetchResource(ctx context.Context, r *catalog.Resource, uri string, extra *mcp.RequestExtra) (*mcp.ReadResourceResult, int, error) {
	args := map[string]any{}
	if r.Template != nil {
		var err error
		if args, err = r.Arguments(uri); err != nil {
			return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/read %s: %v", uri, strings.TrimPrefix(err.Error(), "catalog: "))}
		}
	}
	cred, err := g.credentials(ctx, &Tool{Upstream: r.Upstream}, &mcp.CallToolRequest{Extra: extra})
	if err != nil {
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gateway could not obtain a credential for upstream " + r.Upstream}
	}
	client := g.clients[r.Upstream]
	if client == nil { // not reached: every OpenAPI upstream has one
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "upstream " + r.Upstream + " is not served"}
	}
	a, err := client.Fetch(ctx, r.Binding, args, cred)
	if err != nil {
		var ae *upstream.ArgumentError
		if errors.As(err, &ae) {
			// A hostile or mistyped value ("..", "a/../b", "x" for an
			// integer): refused before anything was sent.
			return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/read %s: %s", uri, ae.Error())}
		}
		var se *upstream.SendError
		msg := "the upstream could not be reached"
		if errors.As(err, &se) {
			msg = se.Msg
		}
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resources/read %s: upstream %s: %s", uri, r.Upstream, msg)}
	}
	if e := answerError(uri, "upstream "+r.Upstream, a); e != nil {
		return nil, a.Status, e
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{resourceContents(uri, r.MIMEType(), a)}}, a.Status, nil
}

// answerError is the JSON-RPC error of a read whose answer is not a 2xx
// one (or is over the response cap), nil for a good one; who names the
// server that answered ("upstream api"). A 404 is codeResourceNotFound
// with the URI, any other status an error naming it.
func answerError(uri, who string, a *upstream.Answer) *jsonrpc.Error {
	data := func(status int) json.RawMessage {
		raw, _ := json.Marshal(struct {
			URI    string `json:"uri"`
			Status int    `json:"status"`
		}{uri, status})
		return raw
	}
	switch {
	case a.Status == http.StatusNotFound:
		return &jsonrpc.Error{Code: codeResourceNotFound, Message: "Resource not found: " + uri, Data: data(a.Status)}
	case a.Status < 200 || a.Status > 299:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("resources/read %s: %s answered HTTP %d %s", uri, who, a.Status, http.StatusText(a.Status)), Data: data(a.Status)}
	case a.Truncated:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("resources/read %s: the resource is larger than the gateway's response cap (%d bytes): not served cut", uri, len(a.Body)), Data: data(a.Status)}
	}
	return nil
}

// resourceContents is a 2xx answer as one content: text when its media
// type is text, JSON, XML, YAML or JavaScript and the bytes are UTF-8,
// else a blob (base64 on the wire), and so is an empty answer. Its mimeType is the answer's, else
// the resource's declared one.
func resourceContents(uri, declared string, a *upstream.Answer) *mcp.ResourceContents {
	mt, _, err := mime.ParseMediaType(a.Header.Get("Content-Type"))
	if err != nil || mt == "" {
		mt = declared
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: mt}
	// An empty text would be left out of the JSON (go-sdk's text is
	// omitempty), and a content with neither text nor blob is refused by
	// clients (the TS SDK's schema): an empty answer is an empty blob.
	if textual(mt) && utf8.Valid(a.Body) && len(a.Body) > 0 {
		c.Text = string(a.Body)
		return c
	}
	if c.MIMEType == "" {
		c.MIMEType = "application/octet-stream"
	}
	c.Blob = a.Body
	if c.Blob == nil {
		c.Blob = []byte{} // an empty blob, not a content with neither
	}
	return c
}

// textual reports whether a media type is text a client reads as such.
func textual(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"), strings.HasSuffix(mt, "+yaml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript",
		"application/x-ndjson", "application/graphql", "application/sql":
		return true
	}
	return false
}
