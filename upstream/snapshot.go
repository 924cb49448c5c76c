package upstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	sjson "github.com/segmentio/encoding/json"
)

// BindingSnapshot is a Binding as data: what a snapshot of the catalog
// (`mcpgate build`, gateway/catalog/snapshot.go) keeps so that a gateway can
// serve the binding again without the OpenAPI document it was bound from.
// Everything a call reads is here; the validators are compiled on the first
// call, as for a binding made by Bind. The schemas are JSON, so that their
// numbers keep the exact text the document gave them.
type BindingSnapshot struct {
	Method         string            `json:"method"`
	Path           string            `json:"path"`
	InputSchema    json.RawMessage   `json:"inputSchema"`
	OutputSchema   json.RawMessage   `json:"outputSchema,omitempty"`
	Degraded       []string          `json:"degraded,omitempty"`
	Notes          []string          `json:"notes,omitempty"`
	Renamed        map[string]string `json:"renamed,omitempty"`
	RefusedHeaders []string          `json:"refusedHeaders,omitempty"`
	// DeclaredInputSHA256 is DeclaredInputSHA256(), made when the snapshot
	// was: the document it needs is not read again.
	DeclaredInputSHA256 string          `json:"declaredInputSHA256"`
	Params              []paramSnapshot `json:"params,omitempty"`
	Body                *bodySnapshot   `json:"body,omitempty"`
	WrapResult          bool            `json:"wrapResult,omitempty"`
	MaxResponse         int64           `json:"maxResponse,omitempty"`
}

// paramSnapshot is a paramBinding. Arg is left out when it is Name (most
// are), and a query parameter's nameKey is made again from Name as Bind
// makes it: Kubernetes' 1,123 tools have 12,000 parameters.
type paramSnapshot struct {
	Arg      string `json:"arg,omitempty"`
	Name     string `json:"name"`
	In       string `json:"in"`
	Style    string `json:"style,omitempty"`
	Explode  bool   `json:"explode,omitempty"`
	Required bool   `json:"required,omitempty"`
}

type bodySnapshot struct {
	MediaType  string            `json:"mediaType"`
	ContentKey string            `json:"contentKey"`
	Whole      bool              `json:"whole,omitempty"`
	Props      [][2]string       `json:"props,omitempty"` // argument, property
	Required   bool              `json:"required,omitempty"`
	PartTypes  map[string]string `json:"partTypes,omitempty"`
}

// Snapshot returns b as data (see BindingSnapshot). It makes the declared
// input schema's hash first, so it needs what Bind kept of the document:
// call it before ForgetDeclared.
func (b *Binding) Snapshot() (*BindingSnapshot, error) {
	s := &BindingSnapshot{
		Method: b.Method, Path: b.Path,
		Degraded: b.Degraded, Notes: b.Notes, Renamed: b.Renamed, RefusedHeaders: b.RefusedHeaders,
		DeclaredInputSHA256: b.DeclaredInputSHA256(),
		WrapResult:          b.wrapResult, MaxResponse: b.maxResponse,
	}
	var err error
	if b.rawIn != nil {
		s.InputSchema, s.OutputSchema = b.rawIn, b.rawOut // restored: its schemas as they were read
	} else {
		if s.InputSchema, err = marshalSchema(b.InputSchema); err != nil {
			return nil, fmt.Errorf("input schema: %v", err)
		}
		if b.OutputSchema != nil {
			if s.OutputSchema, err = marshalSchema(b.OutputSchema); err != nil {
				return nil, fmt.Errorf("output schema: %v", err)
			}
		}
	}
	for _, p := range b.params {
		ps := paramSnapshot{Arg: p.arg, Name: p.name, In: p.in, Style: p.style, Explode: p.explode, Required: p.required}
		if ps.Arg == ps.Name {
			ps.Arg = ""
		}
		s.Params = append(s.Params, ps)
	}
	if bb := b.body; bb != nil {
		s.Body = &bodySnapshot{MediaType: bb.mediaType, ContentKey: bb.contentKey, Whole: bb.whole, Required: bb.required, PartTypes: bb.partTypes}
		for _, p := range bb.props {
			s.Body.Props = append(s.Body.Props, [2]string{p.arg, p.name})
		}
	}
	return s, nil
}

// Restore makes the Binding s describes. It checks what a call relies on
// (the schemas are JSON objects, the input schema of type object, every
// parameter's location known, the path template's parameters declared), so
// that a snapshot that decodes but was not written by Snapshot is an error,
// never a call that panics.
func (s *BindingSnapshot) Restore() (*Binding, error) {
	b := &Binding{
		Method: s.Method, Path: s.Path,
		Degraded: s.Degraded, Notes: s.Notes, Renamed: s.Renamed, RefusedHeaders: s.RefusedHeaders,
		declaredSHA: s.DeclaredInputSHA256,
		wrapResult:  s.WrapResult, maxResponse: s.MaxResponse,
	}
	b.declaredOnce.Do(func() {}) // the hash is the snapshot's
	if s.Method == "" || s.Method != strings.ToUpper(s.Method) {
		return nil, fmt.Errorf("method %q is not an upper-case HTTP method", s.Method)
	}
	// The schemas are checked here and decoded on first use
	// (DecodeSchemas): decoding them into maps was half of a start from a
	// snapshot, for tools most replicas never call.
	if err := checkSchemaJSON(s.InputSchema, true); err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	// Capped at their length: a snapshot's reader decodes them in place
	// (segmentio's ZeroCopy), so each may alias the file's buffer with
	// the rest of the file behind it, and an append to one — a tool's
	// schema is handed to go-sdk and to whoever embeds the gateway —
	// would write over the schemas after it instead of copying.
	b.rawIn = slices.Clip(s.InputSchema)
	if len(s.OutputSchema) > 0 {
		if err := checkSchemaJSON(s.OutputSchema, false); err != nil {
			return nil, fmt.Errorf("output schema: %v", err)
		}
		b.rawOut = slices.Clip(s.OutputSchema)
	}
	var err error
	if len(s.Params) > 0 {
		b.params = make([]paramBinding, 0, len(s.Params))
	}
	for _, p := range s.Params {
		switch p.In {
		case openapi3.ParameterInPath, openapi3.ParameterInQuery, openapi3.ParameterInHeader, openapi3.ParameterInCookie:
		default:
			return nil, fmt.Errorf("parameter %q: unknown location %q", p.Name, p.In)
		}
		if p.In == openapi3.ParameterInHeader && !argumentHeader(p.Name) {
			// Bind never makes it an argument (mergeParams): a model
			// would set a credential, a forwarding or framing header.
			return nil, fmt.Errorf("header parameter %q: no argument may set it", p.Name)
		}
		pb := paramBinding{arg: cmp.Or(p.Arg, p.Name), name: p.Name, in: p.In, style: p.Style, explode: p.Explode, required: p.Required}
		if p.In == openapi3.ParameterInQuery {
			pb.nameKey = queryNameKey(p.Name)
		}
		b.params = append(b.params, pb)
	}
	if sb := s.Body; sb != nil {
		if sb.MediaType == "" {
			return nil, errors.New("request body without a media type")
		}
		for name, ct := range sb.PartTypes {
			if ct == "" || partContentType(ct) != ct {
				// Bind writes a part's type as partContentType makes it:
				// one media type, never a header's worth of other text.
				return nil, fmt.Errorf("body part %q: content type %q is not one Bind makes", name, ct)
			}
		}
		b.body = &bodyBinding{mediaType: sb.MediaType, contentKey: sb.ContentKey, whole: sb.Whole, required: sb.Required, partTypes: sb.PartTypes}
		if len(sb.Props) > 0 {
			b.body.props = make([]bodyProp, 0, len(sb.Props))
		}
		for _, p := range sb.Props {
			b.body.props = append(b.body.props, bodyProp{arg: p[0], name: p[1]})
		}
	}
	if b.pathParts, err = parsePathTemplate(s.Path, b.params); err != nil {
		return nil, err
	}
	return b, nil
}

// RawSchemas returns a restored binding's input and output schemas as the
// snapshot holds them — the JSON a tools/list serves, written by
// marshalSchema — and nil for a binding made by Bind (its schemas are
// InputSchema and OutputSchema). out is nil when the tool has no output
// schema.
func (b *Binding) RawSchemas() (in, out json.RawMessage) { return b.rawIn, b.rawOut }

// DecodeSchemas makes a restored binding's InputSchema and OutputSchema
// from its snapshot's JSON, once; later calls return the first outcome. It
// is nil at once for a binding made by Bind. A call decodes them first
// (Compile), so only code that reads the schemas of a restored binding
// before any call needs it.
//
// Restore checked the JSON (checkSchemaJSON), so this fails only for a
// schema nested past what the decoder takes; the error names the
// operation, and the tool's calls answer with it.
func (b *Binding) DecodeSchemas() error {
	b.rawOnce.Do(func() {
		if b.rawIn == nil {
			return
		}
		in, err := decodeSchema(b.rawIn)
		if err != nil {
			b.rawErr = fmt.Errorf("%s %s: the snapshot's input schema cannot be read: %v", b.Method, b.Path, err)
			return
		}
		var out map[string]any
		if b.rawOut != nil {
			if out, err = decodeSchema(b.rawOut); err != nil {
				b.rawErr = fmt.Errorf("%s %s: the snapshot's output schema cannot be read: %v", b.Method, b.Path, err)
				return
			}
		}
		b.InputSchema, b.OutputSchema = in, out
	})
	return b.rawErr
}

// marshalSchema is a schema's JSON as a tools/list serves it: compact, map
// keys sorted, and <, > and & left as they are (the gateway's encoder, see
// sdkwire.Marshal). An encoder that escapes them (go-sdk's) escapes them
// in this JSON too, when it writes it as a json.RawMessage; so a snapshot's
// tool, whose schemas are this JSON, is served byte for byte as the tool
// made from the document.
func marshalSchema(schema map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(schema); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// checkSchemaJSON checks, without decoding it whole, what a served schema
// must be: one JSON object and nothing after it, and for an input schema
// one whose "type" is "object" (go-sdk's AddTool panics on any other; the
// check is on the JSON text "object", so an escaped spelling of it is
// refused too). The schema is served as these bytes (RawSchemas), so its
// syntax is checked as the encoder that serves it checks it (encoding/json's
// Valid): a payload that was not written by Snapshot is refused here, at
// the start, not at its first tools/list.
func checkSchemaJSON(raw json.RawMessage, input bool) error {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	if !json.Valid(t) {
		return errors.New("not valid JSON")
	}
	// Served as these bytes: JSON is UTF-8 (RFC 8259 §8.1), and a client
	// with a strict decoder would refuse the whole tools/list page.
	// encoding/json's Valid lets invalid UTF-8 through in strings.
	if !utf8.Valid(t) {
		return errors.New("not valid UTF-8")
	}
	if err := checkSchemaGoSDK(t); err != nil {
		return err
	}
	if !input {
		return nil
	}
	// Only the top level's "type", matched exactly as go-sdk's map lookup
	// matches it (not case-insensitively, as struct fields are by
	// default); the rest is skipped, and the last "type" wins, as in a map.
	var top struct {
		Type json.RawMessage `json:"type"`
	}
	if _, err := sjson.Parse(t, &top, sjson.ZeroCopy|sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return err
	}
	if string(top.Type) != `"object"` {
		return errors.New(`not of type "object"`)
	}
	return nil
}

// MaxSchemaDepth bounds how deep a snapshot's schema nests (objects and
// arrays, the schema itself at depth 1): go-sdk's decoder refuses JSON
// deeper than 1000 (its internal/json defaultMaxDepth), and its AddTool
// panics on a schema it cannot decode — in the background, for a gateway
// started from a snapshot, where the panic ends the process at every
// start. encoding/json's Valid takes 10,000. A schema made from a
// document nests a few dozen levels at most.
const MaxSchemaDepth = 1000

// checkSchemaGoSDK refuses valid JSON that go-sdk's AddTool cannot decode
// (see MaxSchemaDepth), read as its decoder reads it: nested deeper than
// MaxSchemaDepth (every '{' and '[' outside strings counted, as go-sdk
// counts them), or holding a number out of float64's range (1e400: go-sdk
// decodes a schema into map[string]any, its numbers into float64, and
// fails on one too large). A schema Build made never has either: its
// numbers are the document's, which kin-openapi read into float64. One
// pass: strings are skipped a quote at a time (bytes.IndexByte), and only
// a number with an exponent or over 308 digits is parsed.
func checkSchemaGoSDK(t []byte) error {
	depth := 0
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '"':
			for {
				q := bytes.IndexByte(t[i+1:], '"')
				if q < 0 {
					return nil // cannot happen: the JSON is valid
				}
				i += 1 + q
				k := i - 1
				for k >= 0 && t[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 { // not escaped
					break
				}
			}
		case c == '{' || c == '[':
			if depth++; depth > MaxSchemaDepth {
				return fmt.Errorf("nested deeper than %d levels (go-sdk's bound)", MaxSchemaDepth)
			}
		case c == '}' || c == ']':
			depth--
		case c == '-' || c >= '0' && c <= '9':
			j, exp := i+1, false
			for ; j < len(t); j++ {
				d := t[j]
				if d == 'e' || d == 'E' {
					exp = true
				} else if !(d >= '0' && d <= '9' || d == '.' || d == '+' || d == '-') {
					break
				}
			}
			if exp || j-i > 308 {
				if _, err := strconv.ParseFloat(string(t[i:j]), 64); err != nil {
					return fmt.Errorf("the number %.40s is out of range of a float64 (go-sdk reads it as one)", t[i:j])
				}
			}
			i = j - 1
		}
	}
	return nil
}

// decodeSchema decodes a JSON object with numbers kept as json.Number: a
// schema's 9007199254740993 or 1e400 must come back as the document wrote
// it, not as the nearest float64. It uses segmentio's decoder (go-sdk's):
// 2–3× encoding/json's speed on the schemas of a snapshot, which are most of
// a start from one, and without a buffer per call.
func decodeSchema(raw json.RawMessage) (map[string]any, error) {
	var m map[string]any
	rest, err := sjson.Parse(raw, &m, sjson.UseNumber)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, errors.New("data after the schema")
	}
	return m, nil
}

// ReadSource returns the bytes of the document at src — a file path or an
// http(s) URL, read or fetched as LoadDocument does (same bound, same
// same-origin redirects) — and the URL they were read from (nil for a
// file). A snapshot of the catalog hashes them to tell whether the
// document changed.
func ReadSource(ctx context.Context, src string, opts *LoadOptions) ([]byte, *url.URL, error) {
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	if u, err := url.Parse(src); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return fetch(ctx, o.Client, u)
	}
	data, err := readFile(src)
	return data, nil, err
}
