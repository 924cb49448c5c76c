package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxErrorBody bounds how much of a non-2xx body is quoted in the error text: a
// model needs the API's message, not a whole HTML error page.
const maxErrorBody = 2048

// maxMismatchBody bounds how much of a 2xx JSON answer that does not match its
// schema is quoted. It is larger than maxErrorBody because the call succeeded:
// a write's answer (the new id, the state it reached) must reach the model
// even though it cannot be sent as structuredContent, yet a listing that broke
// the schema should not flood the model's context.
const maxMismatchBody = 16 << 10

// maxSchemaProblems bounds how many schema violations an error names.
const maxSchemaProblems = 5

// result maps an upstream response to a tool result:
//   - non-2xx: IsError, naming the HTTP status and quoting the trimmed body
//     (3xx is not followed: see Client.Call);
//   - 2xx, for a tool with an outputSchema: see [Binding.structuredResult];
//   - 2xx, for a tool without one: JSON as text, and as structuredContent
//     (wrapped as {"result": v} when v is not an object); text as text
//     content; image/* and audio/* as image and audio content; other binary
//     as an embedded blob resource; 204 or an empty body as success with no
//     content; a body cut at the response cap as what was read, with a note
//     and the "mcpgate/truncated" meta, and no structuredContent.
//
// For a 2xx answer that is not what the operation declares, the error is what
// went wrong, without the answer's content: for the log, where an answer's
// data does not belong.
//
// room is called with the answer before it is decoded to be checked against
// the output schema; when it fails, result returns no result and its error.
func (b *Binding) result(resp *http.Response, body []byte, truncated bool, room func(body []byte) error) (*mcp.CallToolResult, error) {
	mt := mediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("upstream returned HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if t := strings.TrimSpace(trimText(body, maxErrorBody)); t != "" {
			msg += ": " + t
		}
		return errorResult(msg), nil
	}
	if b.OutputSchema != nil {
		return b.structuredResult(resp, mt, body, truncated, room)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	if len(body) == 0 || resp.StatusCode == http.StatusNoContent {
		return res, nil
	}
	note := ""
	if truncated {
		note = fmt.Sprintf("\n[response truncated at %d bytes]", len(body))
	}
	// The text is the answer's own bytes, not a copy (see bytesString);
	// a cut answer's note makes it one, and the answer is dropped.
	text := func() string {
		if note != "" {
			return string(body) + note
		}
		return bytesString(body)
	}
	switch {
	case isJSON(mt) || (mt == "" && json.Valid(body)):
		res.Content = append(res.Content, &mcp.TextContent{Text: text()})
		if !truncated {
			if sc := passJSON(body, b.wrapResult); sc != nil {
				res.StructuredContent = sc
			}
		}
	case isText(mt) || (mt == "" && utf8.Valid(body)):
		res.Content = append(res.Content, &mcp.TextContent{Text: text()})
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
	return res, nil
}

// structuredResult maps a 2xx answer of a tool that advertises an
// outputSchema. Strict clients (the official TypeScript SDK, the Inspector)
// throw on a success without structuredContent, and on structuredContent that
// does not validate against the outputSchema, so every answer becomes either
// structuredContent checked here against that very schema, or an IsError
// result that says in plain words what the API did:
//
//	answer                                    result
//	204, or an empty (blank) body             success: structuredContent {}, text "the API answered HTTP 204 No Content with no content"
//	JSON that matches the schema              success: structuredContent the value ({"result": v} when the schema is wrapped), text the body
//	JSON null/array/scalar, schema an object  error: "the API answered HTTP 200 with JSON null where an object was declared"
//	JSON that does not match the schema       error: "... does not match the API's documented schema: <field>: <rule>; ...", then the answer (up to 16 KiB)
//	not JSON (HTML login page, text, binary)  error: "the API answered HTTP 200 with text/html where JSON was declared", then a text excerpt (up to 2 KiB)
//	a JSON media type but malformed JSON      error: "... with application/json that is not valid JSON (<why>)", then an excerpt
//	a body cut at the response cap            error: "... its response exceeded 4 MiB and was cut; narrow the request ...", then its beginning (up to 2 KiB)
//
// A body with no Content-Type, or text/plain, that parses as JSON counts as
// JSON: some APIs mislabel their JSON, and the schema check still applies. An
// empty answer is a success because it is one (a write that returns 204): {}
// conforms to the advertised outputSchemas, which demand no properties (see
// loosen; the wrapper's "result" is not required either); it is checked all
// the same, and is an error if a schema demands more (minProperties). Every error that
// follows a request other than GET or HEAD says the API carried it out, so a
// model does not repeat a write to see its answer.
func (b *Binding) structuredResult(resp *http.Response, mt string, body []byte, truncated bool, room func([]byte) error) (*mcp.CallToolResult, error) {
	// Worded only when needed: a success never says it.
	answered := func() string { return fmt.Sprintf("the API answered HTTP %d", resp.StatusCode) }
	// fail words an error: msg, the note on writes, then lead and the
	// quoted body, trimmed to max bytes; msg alone is the error for the log.
	fail := func(msg, lead string, quote []byte, max int) (*mcp.CallToolResult, error) {
		cause := errors.New(msg)
		if b.Method != http.MethodGet && b.Method != http.MethodHead {
			msg += " (the API did carry out the request: do not repeat it to see the answer)"
		}
		if quote != nil {
			if t := strings.TrimSpace(trimText(quote, max)); t != "" {
				msg += lead + t
			}
		}
		res := errorResult(msg)
		if truncated {
			res.Meta = mcp.Meta{"mcpgate/truncated": true}
		}
		return res, cause
	}

	var v any
	fromBody := false         // v is the answer's JSON (not the {} of an empty answer)
	checked := false          // the answer is known to conform without v (see objectOnly)
	text := bytesString(body) // not a copy: see bytesString
	// Labelled JSON, or unlabelled (or text/plain) and parsing as JSON.
	jsonish := isJSON(mt) || ((mt == "" || mt == "text/plain") && looksJSON(body, truncated))
	switch {
	case resp.StatusCode == http.StatusNoContent || len(bytes.TrimSpace(body)) == 0:
		// {} even when the schema is wrapped: the wrapper does not require
		// "result", and {"result": null} would break one not nullable.
		v = map[string]any{}
		text = answered() + " " + http.StatusText(resp.StatusCode) + " with no content"
	case !jsonish:
		what := mt
		if mt == "" {
			what = "a body that is not JSON and has no Content-Type"
		}
		var quote []byte
		if isText(mt) || (mt == "" && utf8.Valid(body)) {
			quote = body
		}
		return fail(fmt.Sprintf("%s with %s where JSON was declared", answered(), what), ": ", quote, maxErrorBody)
	case truncated:
		return fail(fmt.Sprintf("%s, but its response exceeded %s and was cut; narrow the request (filter, page or ask for fewer fields)",
			answered(), formatBytes(int64(len(body)))), "; it began: ", body, maxErrorBody)
	case b.objectOnly() && looksObject(body):
		// The schema checks that the answer is an object, and no more:
		// that needs no decoded copy of it (see objectOnly).
		fromBody, checked = true, true
	default:
		if err := room(body); err != nil {
			return nil, err
		}
		var err error
		if v, err = decodeJSON(body); err != nil {
			return fail(fmt.Sprintf("%s with %s that is not valid JSON (%v)", answered(), mt, err), ": ", body, maxErrorBody)
		}
		fromBody = true
		if b.wrapResult {
			v = map[string]any{"result": v}
		} else if _, isObj := v.(map[string]any); !isObj {
			return fail(fmt.Sprintf("%s with %s where an object was declared", answered(), jsonKind(v)), ": ", body, maxMismatchBody)
		}
	}

	sch, err := b.outputValidator()
	if err != nil {
		// A gateway bug, not the API's: say so, and keep the answer.
		return fail(fmt.Sprintf("%s, but the tool's output schema cannot be checked (%v)", answered(), err), "; the answer was: ", body, maxMismatchBody)
	}
	if checked {
		// An object, under a schema that wants no more.
	} else if err := sch.Validate(v); err != nil {
		return fail(fmt.Sprintf("%s, but its answer does not match the API's documented schema: %s",
			answered(), strings.Join(schemaProblems(err, b.OutputSchema, v, "(answer)", maxSchemaProblems), "; ")), "; the answer was: ", body, maxMismatchBody)
	}
	var sc any = v
	if fromBody {
		// Checked: send the API's own bytes rather than encode v again. The
		// decoder has found them to be JSON; it would have replaced bytes
		// that are not UTF-8, so those keep v.
		if utf8.Valid(body) {
			if raw := rawJSON(bytes.TrimSpace(body), b.wrapResult); raw != nil {
				sc = raw
			}
		}
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: sc,
	}, nil
}

// passJSON returns a JSON answer as structuredContent without decoding it:
// the answer's own bytes when it is an object (and the schema is not
// wrapped), else the answer wrapped as {"result": ...} (a WrappedJSON, which
// does not copy it either). Decoding only to encode again cost a call a
// third of its allocations (issue 9). It returns nil for what has no
// structuredContent — JSON null, or not JSON — and for an answer that is
// not valid UTF-8, which is left to the decoder (it replaces the bad bytes,
// as it does in the text content).
//
// The bytes are the API's: key order and spacing are kept, and so would be a
// duplicate key (which a decoder resolves, last one winning, as a client's
// JSON.parse does).
func passJSON(body []byte, wrap bool) any {
	t := bytes.TrimSpace(body)
	if !json.Valid(t) || !utf8.Valid(t) {
		if v, err := decodeJSON(body); err == nil && v != nil {
			if _, isObj := v.(map[string]any); wrap || !isObj {
				v = map[string]any{"result": v}
			}
			return v
		}
		return nil
	}
	return rawJSON(t, wrap)
}

// rawJSON is passJSON for t known to be one valid JSON value in UTF-8,
// without spaces around it.
func rawJSON(t []byte, wrap bool) any {
	switch {
	case bytes.Equal(t, []byte("null")):
		return nil
	case t[0] == '{' && !wrap:
		return json.RawMessage(t)
	}
	return WrappedJSON(t)
}

// WrappedJSON is the structuredContent {"result": v} of an answer v that is
// not an object, or of any answer under a schema that wraps it (see Bind):
// v's JSON, as the API sent it. It holds the answer's own bytes rather than
// a copy with the wrapper around them — a list endpoint's answer is an
// array, and a copy would double what a large one holds (issue 20) — and
// marshals as the wrapper around them. A writer that knows the type writes
// the wrapper itself, without the copy MarshalJSON makes.
type WrappedJSON json.RawMessage

// MarshalJSON returns {"result": w}.
func (w WrappedJSON) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(w)+len(`{"result":}`))
	b = append(b, `{"result":`...)
	b = append(b, w...)
	return append(b, '}'), nil
}

// bytesString returns b as a string without copying it. Every caller passes
// an upstream answer's body, which nothing writes once it is read (see
// readBody and bufferedResponse): the result's text content then shares the
// answer's bytes with its structuredContent instead of holding a second copy
// of them, which is most of what a large answer held after its call
// returned (issue 20).
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// objectOnly reports whether the output schema checks that an answer is a
// JSON object and nothing more — {"type": "object"}, with notes for
// readers at most — as the schema of an operation whose document does not
// describe its answer is. Such an answer is checked on its bytes, without
// decoding it: decoding a 4 MB listing takes about 30 MB.
func (b *Binding) objectOnly() bool {
	b.outCompileOnce.Do(b.compileOutput)
	return b.outObjectOnly
}

// looksObject reports whether body is one JSON object, in UTF-8 (the
// decoder would replace other bytes), nested no deeper than the decoder
// allows: what a decoded answer would be, to a schema that wants an
// object. Anything else is decoded, to be worded as it always is.
func looksObject(body []byte) bool {
	t := bytes.TrimSpace(body)
	return len(t) > 0 && t[0] == '{' && utf8.Valid(t) && json.Valid(t) && WithinDepth(t, maxJSONDepth)
}

// outputValidator compiles the advertised output schema, once: on the first
// call rather than at Bind, because a catalog binds a tool again when it
// must shrink, and only the final binding answers calls.
func (b *Binding) outputValidator() (*jsonschema.Schema, error) {
	b.outCompileOnce.Do(b.compileOutput)
	return b.outValidator, b.outCompileErr
}

func (b *Binding) compileOutput() {
	if b.outCompileErr = b.DecodeSchemas(); b.outCompileErr != nil {
		return
	}
	b.outValidator, b.outCompileErr = compileTool(b.OutputSchema, "output")
	b.outObjectOnly = !b.wrapResult && b.outCompileErr == nil && objectOnlySchema(b.OutputSchema)
}

// objectOnlySchema reports whether s asks only that a value be an object.
func objectOnlySchema(s jsonSchema) bool {
	if s["type"] != "object" {
		return false
	}
	for k, v := range s {
		switch k {
		case "type", "title", "description", "$comment", "examples", "deprecated", "readOnly", "writeOnly":
		case "properties":
			if p, ok := v.(jsonSchema); !ok || len(p) > 0 {
				return false
			}
		case "additionalProperties":
			if v != true {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// jsonKind names the kind of a decoded JSON value the way an error message
// should: "JSON null", "a JSON array".
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "JSON null"
	case []any:
		return "a JSON array"
	case string:
		return "a JSON string"
	case json.Number:
		return "a JSON number"
	case bool:
		return "a JSON boolean"
	}
	return "a JSON object"
}

// looksJSON reports whether an unlabelled body is JSON; a body cut at the cap
// cannot parse, and is judged by its first character.
func looksJSON(body []byte, truncated bool) bool {
	if truncated {
		t := bytes.TrimLeft(body, " \t\r\n")
		return len(t) > 0 && (t[0] == '{' || t[0] == '[')
	}
	return json.Valid(body)
}

// isText reports whether a media type is text a model can read.
func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml")
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

// mediaType is the media type of a Content-Type header, lower case, without
// parameters; "" when there is none or it does not parse. The common answer,
// application/json alone, is taken as it is: ParseMediaType allocates a map.
func mediaType(contentType string) string {
	if contentType == "application/json" {
		return contentType
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return strings.ToLower(mt)
}
