package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxErrorBody bounds how much of a non-2xx body is quoted in the error text: a
// model needs the API's message, not a whole HTML error page.
const maxErrorBody = 2048

// result maps an upstream response to a tool result:
//   - 2xx JSON: the JSON as text, and as structuredContent (wrapped as
//     {"result": v} when the output schema says so, or when v is not an object);
//   - 2xx text: text content; image/* and audio/*: image and audio content;
//     other binary: an embedded blob resource;
//   - 204 or an empty body: success with no content;
//   - anything else: IsError, naming the HTTP status and quoting the trimmed
//     body. (3xx is not followed: see Client.Call.)
func (b *Binding) result(resp *http.Response, body []byte, truncated bool) *mcp.CallToolResult {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	mt = strings.ToLower(mt)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("upstream returned HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if t := strings.TrimSpace(trimText(body, maxErrorBody)); t != "" {
			msg += ": " + t
		}
		return errorResult(msg)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	if len(body) == 0 || resp.StatusCode == http.StatusNoContent {
		return res
	}
	note := ""
	if truncated {
		note = fmt.Sprintf("\n[response truncated at %d bytes]", len(body))
	}
	switch {
	case isJSON(mt) || (mt == "" && json.Valid(body)):
		var v any
		if !truncated {
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				v = nil
			}
		}
		res.Content = append(res.Content, &mcp.TextContent{Text: string(body) + note})
		if v != nil {
			if _, isObj := v.(map[string]any); b.wrapResult || !isObj {
				v = map[string]any{"result": v}
			}
			res.StructuredContent = v
		}
	case strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") ||
		(mt == "" && utf8.Valid(body)):
		res.Content = append(res.Content, &mcp.TextContent{Text: string(body) + note})
	case strings.HasPrefix(mt, "image/"):
		res.Content = append(res.Content, &mcp.ImageContent{Data: body, MIMEType: mt})
	case strings.HasPrefix(mt, "audio/"):
		res.Content = append(res.Content, &mcp.AudioContent{Data: body, MIMEType: mt})
	default:
		if mt == "" {
			mt = "application/octet-stream"
		}
		res.Content = append(res.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI:      "mcpgate://response" + b.Path,
			MIMEType: mt,
			Blob:     body,
		}})
	}
	if truncated {
		res.Meta = mcp.Meta{"mcpgate/truncated": true}
	}
	return res
}

// trimText returns at most max bytes of body as valid UTF-8 text.
func trimText(body []byte, max int) string {
	if len(body) > max {
		body = body[:max]
		for len(body) > 0 && !utf8.Valid(body) {
			body = body[:len(body)-1]
		}
		return string(body) + "…"
	}
	return string(body)
}
