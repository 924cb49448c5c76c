package gateway

import (
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What writing a tool call's answer holds besides its result, for
// max_response_memory (see upstream.AnswerCost). A result holds its
// upstream answer's bytes once: its text content and structuredContent
// share them.
var (
	// fastAnswerCost is the fast path's: it writes a plain result
	// (plainResult, every REST tool's but for binary content) through
	// answerWriter's few KiB, and marshals any other once, with go-sdk's
	// CallToolResult.MarshalJSON.
	fastAnswerCost = upstream.AnswerCost{Of: func(res *mcp.CallToolResult) int64 {
		if plainResult(res) {
			return 0
		}
		return encodedSize(res)
	}}

	// sdkAnswerCost is go-sdk's (v1.8.0), which makes two encodings of the
	// result to write it — the JSON-RPC message (jsonrpc2.EncodeMessage,
	// the result's JSON within it) and the SSE event made from it
	// (writeEvent), the event alive until the write returns — in buffers
	// that encoding/json keeps pooled until the next collections. Counted:
	// two encoded sizes. TestHeldMemory finds about one live while the
	// write blocks once the pools are emptied, two before. The JSON of a
	// result is at most 3 bytes for each byte of an answer in JSON without
	// HTML characters — its text content escaped, 2 at most, and its
	// structuredContent, 1 — so a call counts 7 for each byte it reads, and
	// settles on the exact figure once its result is made.
	sdkAnswerCost = upstream.AnswerCost{PerByte: 2 * 3, Of: func(res *mcp.CallToolResult) int64 {
		return 2 * encodedSize(res)
	}}
)

// encodedSize is the size of a tools/call answer carrying res as
// encoding/json writes it (HTML characters escaped, as CallToolResult.
// MarshalJSON does), give or take the few bytes of its envelope.
func encodedSize(res *mcp.CallToolResult) int64 {
	const envelope = 96 // {"jsonrpc":"2.0","id":...,"result":{"content":[],"isError":true}}
	n := int64(envelope)
	var texts int64 // the texts' escaped sizes
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			e := escapedSize(c.Text)
			n += int64(len(`{"type":"text","text":""},`)) + e
			texts += e
		case *mcp.ImageContent:
			n += int64(len(`{"type":"image","mimeType":"","data":""},`)+len(c.MIMEType)) + int64(base64.StdEncoding.EncodedLen(len(c.Data)))
		case *mcp.AudioContent:
			n += int64(len(`{"type":"audio","mimeType":"","data":""},`)+len(c.MIMEType)) + int64(base64.StdEncoding.EncodedLen(len(c.Data)))
		case *mcp.EmbeddedResource:
			n += int64(len(`{"type":"resource","resource":{"uri":"","mimeType":"","blob":"","text":""}},`))
			if r := c.Resource; r != nil {
				n += escapedSize(r.URI) + escapedSize(r.MIMEType) + escapedSize(r.Text) + int64(base64.StdEncoding.EncodedLen(len(r.Blob)))
			}
		default:
			n += 256 // a kind no REST tool returns: small
		}
	}
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		n += int64(len(`,"structuredContent":`)) + rawSize(sc)
	case upstream.WrappedJSON:
		n += int64(len(`,"structuredContent":{"result":}`)) + rawSize(sc)
	default:
		// Decoded (an answer that is not valid UTF-8, or the {} of an empty
		// one): about as large as the text that carries the same answer,
		// escaped as encoding/json escapes it (<, > and & take 6 bytes).
		n += int64(len(`,"structuredContent":`)) + texts + 2
	}
	for k := range res.Meta {
		n += int64(len(k)) + 64
	}
	return n
}

// rawSize is the size of JSON p once encoding/json has compacted it and
// escaped its HTML characters (which valid JSON has only within strings),
// or a little more: spaces are counted, as they may be within strings.
func rawSize(p []byte) int64 {
	n := int64(len(p))
	for _, c := range p {
		switch c {
		case '<', '>', '&':
			n += 5 // \u003c
		case '\t', '\r', '\n':
			n-- // only outside strings (inside, they are escaped): compacted away
		}
	}
	return n
}

// escapedSize is the size of s as a JSON string written by encoding/json
// (HTML characters escaped, invalid UTF-8 replaced by \ufffd), without its
// quotes.
func escapedSize(s string) int64 {
	n := int64(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // one byte as \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 3 // three bytes as \u2028
		}
		i += size
	}
	return n
}
