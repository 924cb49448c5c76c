package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A Binding ties one OpenAPI operation to one MCP tool: the flat input schema the
// model fills in, and the map from each argument to where it goes in the HTTP
// request (path, query, header, cookie or body). Both are built together by
// [Bind], so the schema a client sees and the request the gateway sends cannot
// drift apart.
//
// A Binding is immutable after Bind and safe for concurrent use.
type Binding struct {
	// Method is the HTTP method, upper case.
	Method string
	// Path is the operation's path template, e.g. "/pets/{petId}".
	Path string
	// InputSchema is the tool's inputSchema: always {"type": "object", ...}.
	InputSchema map[string]any
	// OutputSchema is the tool's outputSchema, or nil. It is always of type
	// object; a non-object response schema is wrapped as {"result": ...}.
	OutputSchema map[string]any

	// Degraded says how the schemas were cut to fit the size budget, if
	// they were.
	Degraded []string
	// Notes are facts about the binding worth telling the model, e.g. the
	// concrete Content-Type chosen for a wildcard body.
	Notes []string
	// Renamed maps each argument whose name had to change to what it stands
	// for in the API (a parameter or body property name).
	Renamed map[string]string

	params      []paramBinding
	body        *bodyBinding
	wrapResult  bool  // structured output is {"result": value}
	maxResponse int64 // BindOptions.MaxResponseBytes

	compileOnce sync.Once
	validator   *jsonschema.Schema
	compileErr  error

	// The output schema, compiled on the first 2xx answer (see
	// Binding.outputValidator).
	outCompileOnce sync.Once
	outValidator   *jsonschema.Schema
	outCompileErr  error
}

// BindOptions configures [Bind]. The zero value is ready to use.
type BindOptions struct {
	// NoOutputSchema leaves outputSchema out even when the operation declares a
	// JSON response.
	NoOutputSchema bool
	// MaxResponseBytes, when positive, bounds how much of a response is
	// read for this operation, below the client's own bound; a tool known to
	// return many records (agent-large) gets a tighter one.
	MaxResponseBytes int64
	// SchemaBudget, when positive, bounds the bytes of the input and output
	// schemas together. Over it, the output schema is left out first, then
	// nested components are cut, nearest the leaves first; see
	// Binding.Degraded.
	SchemaBudget int
}

type paramBinding struct {
	arg      string // key in the tool arguments
	name     string // name in the request
	in       string // openapi3.ParameterInPath, ...
	style    string
	explode  bool
	required bool
}

type bodyBinding struct {
	mediaType  string // what is sent as Content-Type
	contentKey string // the requestBody content entry it came from
	// whole means the body is the single argument "body" (the request body
	// schema is not an object with properties); otherwise the body is an object
	// built from the arguments in props.
	whole    bool
	props    []bodyProp
	required bool
	// encoding of multipart/form parts: property → content type.
	partTypes map[string]string
}

// bodyProp is one body property and the argument that carries it.
type bodyProp struct{ arg, name string }

// bodyArg is the argument that carries a whole request body.
const bodyArg = "body"

// Bind builds the Binding of one operation. item is the path item the operation
// belongs to; its parameters apply to the operation unless overridden.
func Bind(method, path string, item *openapi3.PathItem, op *openapi3.Operation, opts *BindOptions) (*Binding, error) {
	var o BindOptions
	if opts != nil {
		o = *opts
	}
	b := &Binding{Method: strings.ToUpper(method), Path: path, maxResponse: o.MaxResponseBytes}

	params := mergeParams(item, op)
	body, bodySchema := pickBody(op)
	if body != nil && (body.mediaType == "*/*" || body.mediaType == "application/*") {
		// A wildcard says nothing of the encoding. kin-openapi's Swagger 2.0
		// converter produces it, e.g. for Kubernetes' PATCH operations, whose
		// consumes list JSON, merge and strategic-merge patch types: JSON
		// merge patch (RFC 7396) is the one every such API accepts for a
		// plain JSON object.
		body.mediaType = "application/json"
		if b.Method == http.MethodPatch {
			body.mediaType = "application/merge-patch+json"
		}
		b.Notes = append(b.Notes, fmt.Sprintf("The document gives the request body type as %q; mcpgate sends it as %s.", body.contentKey, body.mediaType))
	}
	var bodyProps map[string]*openapi3.SchemaRef
	var bodyRequired map[string]bool
	if body != nil && !body.whole {
		bodyProps, bodyRequired = objectProperties(bodySchema)
	}

	// Count where each name occurs, so a name used in two places can be told
	// apart as {name}__{location}. Body properties keep their names.
	seen := map[string]int{}
	for _, p := range params {
		seen[p.Name]++
	}
	for name := range bodyProps {
		seen[name]++
	}

	// args lists every argument and how to convert its schema, so that the
	// input schema can be built again, smaller, when it is over budget.
	var args []toolArg
	taken := map[string]bool{}
	for _, p := range params {
		arg := p.Name
		if seen[p.Name] > 1 {
			arg = p.Name + "__" + p.In
		}
		if taken[arg] {
			return nil, fmt.Errorf("parameter %q in %s is declared twice", p.Name, p.In)
		}
		arg = b.safeArg(arg, p.Name, taken)
		taken[arg] = true
		pb := paramBinding{arg: arg, name: p.Name, in: p.In, required: p.Required || p.In == openapi3.ParameterInPath}
		if sm, err := p.SerializationMethod(); err == nil && sm != nil {
			pb.style, pb.explode = sm.Style, sm.Explode
		}
		b.params = append(b.params, pb)
		args = append(args, toolArg{name: arg, required: pb.required, schema: func(c *schemaConverter) jsonSchema { return paramSchema(c, p) }})
	}
	if body != nil {
		if body.whole {
			if taken[bodyArg] {
				return nil, errors.New(`a parameter named "body" clashes with the request body argument`)
			}
			ref, desc, mt := bodySchemaRef(op, body.contentKey), op.RequestBody.Value.Description, body.mediaType
			args = append(args, toolArg{name: bodyArg, required: body.required, schema: func(c *schemaConverter) jsonSchema {
				if mt == "application/octet-stream" {
					return jsonSchema{"type": "string", "contentEncoding": "base64", "description": "The request body, base64-encoded."}
				}
				s := jsonSchema{}
				if ref != nil {
					s = c.convert(ref)
				}
				if s["description"] == nil && desc != "" {
					s["description"] = desc
				}
				return s
			}})
		} else {
			for _, name := range sortedKeys(bodyProps) {
				if taken[name] {
					// A body property shares its name with a renamed
					// parameter's new name ({name}__{location}); keep the
					// parameter.
					continue
				}
				arg := b.safeArg(name, name, taken)
				taken[arg] = true
				body.props = append(body.props, bodyProp{arg: arg, name: name})
				sr := bodyProps[name]
				// A body property is required only when the body itself is.
				args = append(args, toolArg{name: arg, required: bodyRequired[name] && body.required,
					schema: func(c *schemaConverter) jsonSchema { return c.convert(sr) }})
			}
		}
		b.body = body
	}

	if len(b.Renamed) > 0 {
		var pairs []string
		for _, arg := range sortedKeys(b.Renamed) {
			pairs = append(pairs, fmt.Sprintf("%s is the API's %q", arg, b.Renamed[arg]))
		}
		b.Notes = append(b.Notes, "Arguments renamed for strict clients: "+strings.Join(pairs, ", "))
	}

	in := inputSchema(args, 0)
	var out jsonSchema
	if !o.NoOutputSchema {
		out, b.wrapResult = outputSchema(op, 0)
	}
	if o.SchemaBudget > 0 {
		// Sizes are counted only up to the budget: Stripe's output schemas
		// run to half a MiB, and need not be written out to be refused.
		inSize, outSize := jsonSizeUpTo(in, o.SchemaBudget), jsonSizeUpTo(out, o.SchemaBudget)
		if out != nil && inSize+outSize > o.SchemaBudget {
			// The output schema goes first: a client can do without it, and
			// structuredContent is still sent.
			out = nil
			b.Degraded = append(b.Degraded, fmt.Sprintf("outputSchema left out (%d KiB) to fit the size budget", (outSize+1023)/1024))
		}
		// Then cut the input schema, a step at a time, until it fits:
		// follow fewer $ref hops, then none, then shorten the descriptions
		// inside it, then drop them.
		for _, step := range degradeSteps {
			if inSize <= o.SchemaBudget {
				break
			}
			in = inputSchema(args, step.refDepth)
			if step.descLimit != 0 {
				trimDescriptions(in, step.descLimit)
			}
			if n := jsonSizeUpTo(in, o.SchemaBudget); n <= o.SchemaBudget || step.last {
				b.Degraded = append(b.Degraded, fmt.Sprintf("input schema %s to fit the size budget (%d KiB before)", step.what, (inSize+1023)/1024))
				inSize = n
			}
		}
	}
	b.InputSchema, b.OutputSchema = in, out

	return b, nil
}

// Compile compiles the input schema for Validate, once; later calls return
// the first outcome. Bind leaves it to the caller, because a catalog binds a
// tool again when it must shrink, and only the final binding is worth
// compiling. Validate compiles on first use if Compile was not called.
func (b *Binding) Compile() error {
	b.compileOnce.Do(func() {
		raw, err := json.Marshal(b.InputSchema)
		if err == nil {
			b.validator, err = compileSchema(raw)
		}
		if err != nil {
			b.compileErr = fmt.Errorf("input schema does not compile: %v", err)
		}
	})
	return b.compileErr
}

// degradeSteps are the ways an input schema is cut to fit its budget, mildest
// first.
var degradeSteps = []struct {
	refDepth  int // as schemaConverter.maxRefDepth
	descLimit int // as trimDescriptions' limit; 0: keep them whole
	what      string
	last      bool
}{
	{refDepth: 4, what: "cut to 4 levels of nested components"},
	{refDepth: 3, what: "cut to 3 levels of nested components"},
	{refDepth: 2, what: "cut to 2 levels of nested components"},
	{refDepth: 1, what: "cut to 1 level of nested components"},
	{refDepth: -1, what: "cut to its top-level arguments"},
	{refDepth: -1, descLimit: 100, what: "cut to its top-level arguments, with short descriptions"},
	{refDepth: -1, descLimit: -1, what: "cut to its top-level arguments, without descriptions", last: true},
}

// trimDescriptions shortens every description in a schema to its first
// sentence within limit bytes, or drops them all when limit is negative.
func trimDescriptions(s any, limit int) {
	switch v := s.(type) {
	case map[string]any:
		if d, ok := v["description"].(string); ok {
			if limit < 0 {
				delete(v, "description")
			} else {
				v["description"] = shorten(d, limit)
			}
		}
		for _, x := range v {
			trimDescriptions(x, limit)
		}
	case []any:
		for _, x := range v {
			trimDescriptions(x, limit)
		}
	}
}

// shorten returns the first sentence of s, cut to at most limit bytes on a
// word boundary.
func shorten(s string, limit int) string {
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) <= limit {
		return s
	}
	cut := s[:limit]
	if i := strings.LastIndexByte(cut, ' '); i > limit/2 {
		cut = cut[:i]
	}
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + "…"
}

// safeArg returns arg, made a property name that strict LLM providers accept
// (^[a-zA-Z0-9_.-]{1,64}$), unique among taken. A changed name is recorded in
// b.Renamed, as is what it stands for (orig). Comparison operators, common in
// filter parameters (Twilio's StartTime<), are spelled out so that
// StartTime< and StartTime> stay apart.
func (b *Binding) safeArg(arg, orig string, taken map[string]bool) string {
	safe := arg
	for _, r := range [][2]string{{"<=", "_lte"}, {">=", "_gte"}, {"<", "_lt"}, {">", "_gt"}, {"!=", "_ne"}} {
		safe = strings.ReplaceAll(safe, r[0], r[1])
	}
	bs := []byte(safe)
	for i, c := range bs {
		if !isUnreserved(c) || c == '~' {
			bs[i] = '_'
		}
	}
	safe = string(bs)
	if safe == "" {
		safe = "arg"
	}
	if len(safe) > 64 {
		safe = safe[:64]
	}
	base := safe
	for i := 2; taken[safe]; i++ {
		suffix := fmt.Sprintf("_%d", i)
		safe = base[:min(len(base), 64-len(suffix))] + suffix
	}
	if safe != arg {
		if b.Renamed == nil {
			b.Renamed = map[string]string{}
		}
		b.Renamed[safe] = orig
	}
	return safe
}

// toolArg is one argument of a tool.
type toolArg struct {
	name     string
	required bool
	schema   func(*schemaConverter) jsonSchema
}

// inputSchema builds the flat input schema; maxRefDepth as in schemaConverter.
func inputSchema(args []toolArg, maxRefDepth int) jsonSchema {
	conv := &schemaConverter{maxRefDepth: maxRefDepth}
	props := jsonSchema{}
	var required []string
	for _, a := range args {
		props[a.name] = a.schema(conv)
		if a.required {
			required = append(required, a.name)
		}
	}
	in := jsonSchema{"type": "object", "properties": props}
	if len(required) > 0 {
		sort.Strings(required)
		in["required"] = toAny(required)
	}
	return conv.document(in)
}

// outputSchema builds the output schema from the first 2xx JSON response. It
// is always an object: another type is wrapped as {"result": ...}, and wrap
// says so.
func outputSchema(op *openapi3.Operation, maxRefDepth int) (schema jsonSchema, wrap bool) {
	sr := successSchema(op)
	if sr == nil {
		return nil, false
	}
	conv := &schemaConverter{maxRefDepth: maxRefDepth}
	out := conv.convert(sr)
	isObject := sr.Value.Type.Is("object")
	if props, _ := objectProperties(sr.Value); len(props) > 0 {
		isObject = true
	}
	doc := jsonSchema{"type": "object", "properties": jsonSchema{"result": out}} // not required: see structuredResult
	if isObject {
		doc = out
		if _, isRef := out["$ref"]; isRef {
			doc = jsonSchema{"allOf": []any{out}, "type": "object"}
		}
	}
	// Clients check structuredContent against the outputSchema and fail the
	// call on a mismatch (the TypeScript SDK does). APIs routinely leave out
	// fields their document calls required, and add fields over time, so
	// the advertised schema describes shapes but does not demand them.
	loosen(out)
	for _, d := range conv.defs {
		loosen(d)
	}
	return conv.document(doc), !isObject
}

// loosen removes "required" and "additionalProperties": false throughout a
// schema. It walks schema keywords, so a property named "required" stays.
func loosen(s jsonSchema) {
	if s == nil {
		return
	}
	delete(s, "required")
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		delete(s, "additionalProperties")
	}
	for k, v := range s {
		switch k {
		case "properties", "patternProperties", "$defs":
			if m, ok := v.(jsonSchema); ok {
				for _, sub := range m {
					if ss, ok := sub.(jsonSchema); ok {
						loosen(ss)
					}
				}
			}
		case "items", "additionalProperties", "not":
			if ss, ok := v.(jsonSchema); ok {
				loosen(ss)
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if list, ok := v.([]any); ok {
				for _, sub := range list {
					if ss, ok := sub.(jsonSchema); ok {
						loosen(ss)
					}
				}
			}
		}
	}
}

// objectProperties returns the properties of an object schema and which are
// required, merging those its allOf members declare.
func objectProperties(s *openapi3.Schema) (map[string]*openapi3.SchemaRef, map[string]bool) {
	props, req := map[string]*openapi3.SchemaRef{}, map[string]bool{}
	var walk func(s *openapi3.Schema, depth int)
	walk = func(s *openapi3.Schema, depth int) {
		if s == nil || depth > 8 {
			return
		}
		for name, p := range s.Properties {
			if _, ok := props[name]; !ok {
				props[name] = p
			}
		}
		for _, r := range s.Required {
			req[r] = true
		}
		for _, sub := range s.AllOf {
			if sub != nil {
				walk(sub.Value, depth+1)
			}
		}
	}
	walk(s, 0)
	return props, req
}

func jsonSize(s jsonSchema) int {
	return jsonSizeUpTo(s, math.MaxInt)
}

// jsonSizeUpTo returns the size of s as JSON (as encoding/json writes it), or
// a number over limit as soon as it passes limit: Stripe's output schemas run
// to half a MiB, and need not be measured whole to be refused.
func jsonSizeUpTo(s jsonSchema, limit int) int {
	if s == nil {
		return 0
	}
	return sizeOf(s, 0, limit)
}

// sizeOf adds the JSON size of v to n, stopping once n passes limit.
func sizeOf(v any, n, limit int) int {
	if n > limit {
		return n
	}
	switch x := v.(type) {
	case map[string]any:
		n += 2 + max(len(x)-1, 0) // braces, commas
		for k, e := range x {
			n = sizeOf(e, n+stringSize(k)+1, limit)
			if n > limit {
				return n
			}
		}
		return n
	case []any:
		n += 2 + max(len(x)-1, 0)
		for _, e := range x {
			if n = sizeOf(e, n, limit); n > limit {
				return n
			}
		}
		return n
	case string:
		return n + stringSize(x)
	case nil:
		return n + 4
	case bool:
		if x {
			return n + 4
		}
		return n + 5
	default:
		raw, _ := json.Marshal(x)
		return n + len(raw)
	}
}

// stringSize is the size of s as a JSON string, with encoding/json's escapes
// (HTML characters included).
func stringSize(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5
		}
	}
	return n
}

// compileSchema compiles a JSON Schema 2020-12 document. Nothing outside the
// document is ever loaded.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network loads
	const loc = "mcpgate:///tool.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// mergeParams returns the operation's parameters: the path item's, overridden by
// the operation's own with the same name and location. Header parameters that
// OpenAPI says to ignore (Accept, Content-Type, Authorization) are left out.
func mergeParams(item *openapi3.PathItem, op *openapi3.Operation) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	idx := map[string]int{}
	add := func(list openapi3.Parameters) {
		for _, pr := range list {
			if pr == nil || pr.Value == nil {
				continue
			}
			p := pr.Value
			if p.In == openapi3.ParameterInHeader {
				switch http.CanonicalHeaderKey(p.Name) {
				case "Accept", "Content-Type", "Authorization":
					continue
				}
			}
			key := p.In + "\x00" + p.Name
			if i, ok := idx[key]; ok {
				out[i] = p
				continue
			}
			idx[key] = len(out)
			out = append(out, p)
		}
	}
	if item != nil {
		add(item.Parameters)
	}
	add(op.Parameters)
	return out
}

func paramSchema(conv *schemaConverter, p *openapi3.Parameter) jsonSchema {
	var s jsonSchema
	switch {
	case p.Schema != nil:
		s = conv.convert(p.Schema)
	case len(p.Content) > 0:
		for _, mt := range p.Content {
			if mt != nil && mt.Schema != nil {
				s = conv.convert(mt.Schema)
				break
			}
		}
	}
	if s == nil {
		s = jsonSchema{"type": "string"}
	}
	if p.Description != "" {
		s["description"] = p.Description
	}
	if p.Deprecated {
		s["deprecated"] = true
	}
	return s
}

// mediaRank orders the request body media types the gateway can send,
// best first; -1 for one it cannot.
func mediaRank(mt string) int {
	switch {
	case mt == "application/json":
		return 0
	case strings.HasSuffix(mt, "+json"):
		return 1
	case mt == "application/x-www-form-urlencoded":
		return 2
	case mt == "multipart/form-data":
		return 3
	case strings.HasPrefix(mt, "text/"):
		return 4
	case mt == "application/octet-stream":
		return 5
	case mt == "*/*" || mt == "application/*":
		return 6
	}
	return -1
}

func pickBody(op *openapi3.Operation) (*bodyBinding, *openapi3.Schema) {
	if op.RequestBody == nil || op.RequestBody.Value == nil || len(op.RequestBody.Value.Content) == 0 {
		return nil, nil
	}
	rb := op.RequestBody.Value
	best, bestRank := "", 99
	for mt := range rb.Content {
		if r := mediaRank(normalizeMedia(mt)); r >= 0 && (r < bestRank || (r == bestRank && mt < best)) {
			best, bestRank = mt, r
		}
	}
	if best == "" {
		return nil, nil
	}
	media := rb.Content[best]
	bb := &bodyBinding{mediaType: normalizeMedia(best), contentKey: best, required: rb.Required}
	var schema *openapi3.Schema
	if media != nil && media.Schema != nil {
		schema = media.Schema.Value
	}
	props, _ := objectProperties(schema)
	if !rb.Required && len(props) == 0 && schema != nil && schema.Type.Is("object") &&
		schema.AdditionalProperties.Has == nil && schema.AdditionalProperties.Schema == nil &&
		len(schema.OneOf) == 0 && len(schema.AnyOf) == 0 {
		// An optional body that can hold nothing: Stripe declares one on
		// every operation, GETs included. No argument, and no body sent.
		return nil, nil
	}
	isObject := len(props) > 0 && (schema.Type == nil || schema.Type.Is("object") || schema.Type.IsEmpty())
	if strings.HasPrefix(bb.mediaType, "text/") || bb.mediaType == "application/octet-stream" {
		isObject = false
	}
	bb.whole = !isObject
	if media != nil && len(media.Encoding) > 0 {
		bb.partTypes = map[string]string{}
		for name, enc := range media.Encoding {
			if enc != nil && enc.ContentType != "" {
				bb.partTypes[name] = enc.ContentType
			}
		}
	}
	return bb, schema
}

func normalizeMedia(mt string) string {
	return strings.ToLower(strings.TrimSpace(strings.Split(mt, ";")[0]))
}

func bodySchemaRef(op *openapi3.Operation, contentKey string) *openapi3.SchemaRef {
	if media := op.RequestBody.Value.Content[contentKey]; media != nil {
		return media.Schema
	}
	return nil
}

// successSchema returns the schema of the first 2xx JSON response, by status
// code order ("200" before "201" before "2XX").
func successSchema(op *openapi3.Operation) *openapi3.SchemaRef {
	if op.Responses == nil {
		return nil
	}
	codes := make([]string, 0, op.Responses.Len())
	for code := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") {
			codes = append(codes, code)
		}
	}
	sort.Strings(codes)
	for _, code := range codes {
		rr := op.Responses.Value(code)
		if rr == nil || rr.Value == nil {
			continue
		}
		for mt, media := range rr.Value.Content {
			if isJSON(mt) && media != nil && media.Schema != nil && media.Schema.Value != nil {
				return media.Schema
			}
		}
	}
	return nil
}

func isJSON(mediaType string) bool {
	mt := strings.ToLower(strings.TrimSpace(strings.Split(mediaType, ";")[0]))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// ArgumentError reports tool arguments that do not fit the tool's input schema.
// Its message names each field and the rule it broke, so that a model can
// correct the call.
type ArgumentError struct {
	Problems []string
}

func (e *ArgumentError) Error() string {
	return "invalid arguments: " + strings.Join(e.Problems, "; ")
}

var printer = message.NewPrinter(language.English)

// Validate checks decoded arguments against the input schema.
func (b *Binding) Validate(args map[string]any) error {
	if args == nil {
		args = map[string]any{}
	}
	if err := b.Compile(); err != nil {
		return &ArgumentError{Problems: []string{err.Error()}}
	}
	err := b.validator.Validate(any(args))
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgumentError{Problems: []string{err.Error()}}
	}
	var problems []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			if len(e.InstanceLocation) > 0 {
				loc = e.InstanceLocation[0]
				for _, p := range e.InstanceLocation[1:] {
					loc += "." + p
				}
			} else {
				loc = "(arguments)"
			}
			problems = append(problems, fmt.Sprintf("%s: %s", loc, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
	}
	return &ArgumentError{Problems: problems}
}

// DecodeArguments decodes raw tool arguments, keeping numbers exact.
func DecodeArguments(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &ArgumentError{Problems: []string{"arguments are not valid JSON: " + err.Error()}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ArgumentError{Problems: []string{"arguments must be a JSON object"}}
	}
	return m, nil
}

// Request builds the HTTP request for validated arguments, against base (the
// upstream's base URL; the operation path is appended to its path).
func (b *Binding) Request(ctx context.Context, base *url.URL, args map[string]any) (*http.Request, error) {
	path := b.Path
	var rawQuery []string // deepObject and delimited forms are written by hand
	header := http.Header{}
	var cookies []string

	for _, p := range b.params {
		v, ok := args[p.arg]
		if !ok || v == nil {
			if p.in == openapi3.ParameterInPath {
				return nil, &ArgumentError{Problems: []string{p.arg + ": missing required path parameter"}}
			}
			continue
		}
		switch p.in {
		case openapi3.ParameterInPath:
			seg, err := pathValue(p, v)
			if err != nil {
				return nil, err
			}
			path = strings.ReplaceAll(path, "{"+p.name+"}", seg)
		case openapi3.ParameterInQuery:
			rawQuery = append(rawQuery, queryPairs(p, v)...)
		case openapi3.ParameterInHeader:
			s := joinValue(v, ",", p.explode)
			if strings.ContainsAny(s, "\r\n\x00") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": header values must not contain CR, LF or NUL"}}
			}
			header.Set(p.name, s)
		case openapi3.ParameterInCookie:
			s := joinValue(v, ",", false)
			if strings.ContainsAny(s, ";\r\n\x00") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": cookie values must not contain ';', CR, LF or NUL"}}
			}
			cookies = append(cookies, p.name+"="+url.QueryEscape(s))
		}
	}
	u := *base
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = strings.Join(rawQuery, "&")
	u.Fragment = ""

	body, ctype, err := b.encodeBody(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, b.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req, nil
}

// pathValue encodes one path parameter value (simple style) as a single path
// segment. Every reserved character is percent-encoded (RFC 3986 §3.3), and a
// value of "." or ".." is encoded too, so a value can never change which path
// the request names.
func pathValue(p paramBinding, v any) (string, error) {
	var s string
	switch p.style {
	case "label":
		s = "." + joinValue(v, ".", p.explode)
	case "matrix":
		s = ";" + p.name + "=" + joinValue(v, ",", p.explode)
	default:
		s = joinValue(v, ",", p.explode)
	}
	if s == "" {
		return "", &ArgumentError{Problems: []string{p.arg + ": path parameter must not be empty"}}
	}
	return escapeSegment(s), nil
}

func escapeSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || c == ',' || c == ';' || c == '=' || c == ':' || c == '@' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, "%%%02X", c)
	}
	return sb.String()
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// queryPairs serializes one query parameter by its style and explode
// (OpenAPI 3 §4.8.12.4): form (default), spaceDelimited, pipeDelimited,
// deepObject. Returns already-escaped "k=v" pairs.
func queryPairs(p paramBinding, v any) []string {
	esc := url.QueryEscape
	name := esc(p.name)
	switch val := v.(type) {
	case []any:
		if len(val) == 0 {
			return nil
		}
		if p.explode && p.style != "spaceDelimited" && p.style != "pipeDelimited" {
			out := make([]string, 0, len(val))
			for _, e := range val {
				out = append(out, name+"="+esc(scalar(e)))
			}
			return out
		}
		sep := ","
		switch p.style {
		case "spaceDelimited":
			sep = " "
		case "pipeDelimited":
			sep = "|"
		}
		parts := make([]string, len(val))
		for i, e := range val {
			parts[i] = scalar(e)
		}
		return []string{name + "=" + esc(strings.Join(parts, sep))}
	case map[string]any:
		keys := sortedKeys(val)
		var out []string
		switch {
		case p.style == "deepObject":
			var walk func(prefix string, m map[string]any)
			walk = func(prefix string, m map[string]any) {
				for _, k := range sortedKeys(m) {
					key := prefix + "[" + k + "]"
					switch e := m[k].(type) {
					case map[string]any:
						walk(key, e)
					case []any:
						for _, x := range e {
							out = append(out, esc(key+"[]")+"="+esc(scalar(x)))
						}
					default:
						out = append(out, esc(key)+"="+esc(scalar(e)))
					}
				}
			}
			walk(p.name, val)
		case p.explode:
			for _, k := range keys {
				out = append(out, esc(k)+"="+esc(scalar(val[k])))
			}
		default:
			parts := make([]string, 0, 2*len(keys))
			for _, k := range keys {
				parts = append(parts, k, scalar(val[k]))
			}
			out = append(out, name+"="+esc(strings.Join(parts, ",")))
		}
		return out
	default:
		return []string{name + "=" + esc(scalar(v))}
	}
}

// joinValue serializes a value in the simple style (path and header
// parameters).
func joinValue(v any, sep string, explode bool) string {
	switch val := v.(type) {
	case []any:
		parts := make([]string, len(val))
		for i, e := range val {
			parts[i] = scalar(e)
		}
		return strings.Join(parts, sep)
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(val) {
			if explode {
				parts = append(parts, k+"="+scalar(val[k]))
			} else {
				parts = append(parts, k, scalar(val[k]))
			}
		}
		return strings.Join(parts, sep)
	}
	return scalar(v)
}

// scalar renders a primitive argument as text. Numbers keep their exact
// decimal form; nested structures are rendered as JSON.
func scalar(v any) string {
	switch val := v.(type) {
	case nil:
		return ""
	case string:
		return val
	case json.Number:
		return val.String()
	case float64:
		return strconv.FormatFloat(val, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(val)
	default:
		raw, _ := json.Marshal(val)
		return string(raw)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// encodeBody builds the request body and its Content-Type. It returns a nil
// body when the operation takes none or the caller gave no body arguments, so a
// GET never carries a body it did not ask for.
func (b *Binding) encodeBody(args map[string]any) (io.Reader, string, error) {
	bb := b.body
	if bb == nil {
		return nil, "", nil
	}
	var value any
	if bb.whole {
		v, ok := args[bodyArg]
		if !ok {
			return nil, "", nil
		}
		value = v
	} else {
		obj := map[string]any{}
		for _, p := range bb.props {
			if v, ok := args[p.arg]; ok {
				obj[p.name] = v
			}
		}
		if len(obj) == 0 && !bb.required {
			return nil, "", nil
		}
		value = obj
	}
	mt := bb.mediaType
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		raw, err := json.Marshal(value)
		if err != nil {
			return nil, "", err
		}
		return bytes.NewReader(raw), mt, nil
	case mt == "application/x-www-form-urlencoded":
		obj, ok := value.(map[string]any)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": a form body must be an object"}}
		}
		var pairs []string
		for _, k := range sortedKeys(obj) {
			pairs = append(pairs, formPairs(k, obj[k])...)
		}
		return strings.NewReader(strings.Join(pairs, "&")), mt, nil
	case mt == "multipart/form-data":
		obj, ok := value.(map[string]any)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": a multipart body must be an object"}}
		}
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for _, k := range sortedKeys(obj) {
			if err := writePart(w, k, obj[k], bb.partTypes[k]); err != nil {
				return nil, "", err
			}
		}
		if err := w.Close(); err != nil {
			return nil, "", err
		}
		return &buf, w.FormDataContentType(), nil
	case mt == "application/octet-stream":
		s, ok := value.(string)
		if !ok {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": must be a base64 string"}}
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, "", &ArgumentError{Problems: []string{bodyArg + ": not valid base64: " + err.Error()}}
		}
		return bytes.NewReader(raw), mt, nil
	default: // text/*
		if s, ok := value.(string); ok {
			return strings.NewReader(s), mt, nil
		}
		return strings.NewReader(scalar(value)), mt, nil
	}
}

// formPairs encodes a form field: arrays repeat the key; objects use the
// deepObject-like key[sub]=v convention that form APIs (Stripe, Twilio) expect.
func formPairs(key string, v any) []string {
	switch val := v.(type) {
	case []any:
		var out []string
		for i, e := range val {
			switch e.(type) {
			case map[string]any:
				out = append(out, formPairs(key+"["+strconv.Itoa(i)+"]", e)...)
			default:
				out = append(out, url.QueryEscape(key)+"="+url.QueryEscape(scalar(e)))
			}
		}
		return out
	case map[string]any:
		var out []string
		for _, k := range sortedKeys(val) {
			out = append(out, formPairs(key+"["+k+"]", val[k])...)
		}
		return out
	}
	return []string{url.QueryEscape(key) + "=" + url.QueryEscape(scalar(v))}
}

func writePart(w *multipart.Writer, name string, v any, ctype string) error {
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if err := writePart(w, name, e, ctype); err != nil {
				return err
			}
		}
		return nil
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, name))
	var data []byte
	switch {
	case ctype != "" && !strings.HasPrefix(ctype, "text/") && !isJSON(ctype):
		// Binary part: the argument is base64.
		s, _ := v.(string)
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return &ArgumentError{Problems: []string{name + ": not valid base64: " + err.Error()}}
		}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, name))
		h.Set("Content-Type", ctype)
		data = raw
	case isObjectOrArray(v) || isJSON(ctype):
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		h.Set("Content-Type", "application/json")
		data = raw
	default:
		data = []byte(scalar(v))
	}
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = pw.Write(data)
	return err
}

func isObjectOrArray(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}
