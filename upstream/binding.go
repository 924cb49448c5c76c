package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
	// A binding restored from a snapshot has it only once DecodeSchemas
	// (or its first call, or Compile) has run: see RawSchemas.
	InputSchema map[string]any
	// OutputSchema is the tool's outputSchema, or nil. It is always of type
	// object; a non-object response schema is wrapped as {"result": ...}.
	// From a snapshot, as InputSchema.
	OutputSchema map[string]any

	// rawIn and rawOut are a restored binding's schemas as the snapshot
	// holds them (BindingSnapshot.Restore), decoded into InputSchema and
	// OutputSchema once, by DecodeSchemas; nil for a binding made by Bind.
	rawIn, rawOut json.RawMessage
	rawOnce       sync.Once
	rawErr        error

	// Degraded says how the schemas were cut to fit the size budget, if
	// they were.
	Degraded []string
	// Notes are facts about the binding worth telling the model, e.g. the
	// concrete Content-Type chosen for a wildcard body.
	Notes []string
	// Renamed maps each argument whose name had to change to what it stands
	// for in the API (a parameter or body property name).
	Renamed map[string]string
	// declared makes the input schema as the operation declares it, before
	// size budgets cut it, for DeclaredInputSHA256; nil once hashed.
	declared     func() jsonSchema
	declaredOnce sync.Once
	declaredSHA  string
	// RefusedHeaders are header parameters the document declares but no
	// argument may set (hop-by-hop, credentials, forwarding, method
	// overrides): they are not arguments, and the audit lists them.
	RefusedHeaders []string

	params      []paramBinding
	pathParts   []pathPart // the path template, parsed; see buildPath
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
	outObjectOnly  bool // see objectOnly
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

// Bind builds the Binding of one operation. item is the path item the operation
// belongs to; its parameters apply to the operation unless overridden.
func Bind(method, path string, item *openapi3.PathItem, op *openapi3.Operation, opts *BindOptions) (*Binding, error) {
	var o BindOptions
	if opts != nil {
		o = *opts
	}
	b := &Binding{Method: strings.ToUpper(method), Path: path, maxResponse: o.MaxResponseBytes}

	params, refused := mergeParams(item, op)
	b.RefusedHeaders = refused
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
		if p.In == openapi3.ParameterInQuery {
			pb.nameKey = queryNameKey(p.Name)
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
					c.setDescription(s, DescriptionMarkdown(desc))
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
				// A body property is required only when the body itself is,
				// and never when it is readOnly (see schemaConverter.required).
				args = append(args, toolArg{name: arg, required: bodyRequired[name] && body.required && !readOnly(sr),
					schema: func(c *schemaConverter) jsonSchema { return c.convert(sr) }})
			}
		}
		b.body = body
	}

	parts, err := parsePathTemplate(path, b.params)
	if err != nil {
		return nil, err
	}
	b.pathParts = parts

	if len(b.Renamed) > 0 {
		var pairs []string
		for _, arg := range sortedKeys(b.Renamed) {
			pairs = append(pairs, fmt.Sprintf("%s is the API's %q", arg, b.Renamed[arg]))
		}
		b.Notes = append(b.Notes, "Arguments renamed for strict clients: "+strings.Join(pairs, ", "))
	}

	// A schema over the budget is stopped while it is converted, as output
	// schemas are (see sizeLimit): Kubernetes' request bodies run to MBs and
	// are cut anyway. Then in is nil and inSize over the budget.
	if testHookArgs != nil {
		testHookArgs(args)
	}
	in, inSize := inputSchemaWithin(args, o.SchemaBudget)
	// The lockfile's hash is of the schema the operation declares, taken
	// before any size budget cuts it: a tool's entry must change only when
	// its own operation does, not when unrelated operations change how much
	// room the catalog budget leaves it. It is made when it is asked for
	// (audit, the lock), not on every start.
	if declared := in; declared != nil {
		b.declared = func() jsonSchema { return declared }
	} else {
		b.declared = func() jsonSchema { return inputSchema(args, 0) }
	}
	var out jsonSchema
	outTooLarge := false
	if !o.NoOutputSchema {
		// The output schema may take what the input schema leaves; one that
		// cannot fit is stopped while it is converted (see sizeLimit).
		limit := 0
		if o.SchemaBudget > 0 {
			limit = max(o.SchemaBudget-inSize, 1)
		}
		out, b.wrapResult, outTooLarge = outputSchema(op, 0, limit)
	}
	if o.SchemaBudget > 0 {
		if outTooLarge || out != nil && inSize+jsonSizeUpTo(out, o.SchemaBudget) > o.SchemaBudget {
			// The output schema goes first: a client can do without it, and
			// structuredContent is still sent.
			out = nil
			// The sizes are only known up to the budget (and where counting
			// stopped depends on map order), so the note names the budget:
			// the catalog must be the same, byte for byte, on every start.
			b.Degraded = append(b.Degraded, fmt.Sprintf("outputSchema left out to fit the size budget (%s for both schemas)", budgetSize(o.SchemaBudget)))
		}
		// Then cut the input schema, a step at a time, until it fits:
		// follow fewer $ref hops, then none, then shorten the descriptions
		// inside it, then drop them.
		in, inSize = degradeInput(b, args, in, inSize, o.SchemaBudget)
	}
	b.InputSchema, b.OutputSchema = in, out

	return b, nil
}

// testHookArgs, when set by a test, is handed the arguments of each Bind.
var testHookArgs func([]toolArg)

// degradeInput cuts an input schema of inSize bytes down to budget by the
// degradeSteps, in order, until one fits (the last is taken whatever its
// size), and notes the step taken in b.Degraded. It returns the schema and its
// size.
//
// A step that keeps the descriptions whole is converted under the budget
// (schemaConverter.sizeLimit) and given up as soon as it is known not to fit:
// Kubernetes' request bodies run to MBs at 4 levels of components, and were
// converted whole only to be thrown away, step after step (0.3 s of its
// start-up). The steps that trim descriptions share one conversion, trimmed
// further at each: each trims what the one before left, which is what it
// would make of the untrimmed schema (a first sentence cut shorter, then
// none).
func degradeInput(b *Binding, args []toolArg, in jsonSchema, inSize, budget int) (jsonSchema, int) {
	var trimmed jsonSchema // the shared conversion of the trimming steps
	trimmedDepth := 0
	for _, step := range degradeSteps {
		if inSize <= budget {
			break
		}
		var cand jsonSchema
		switch {
		case step.descLimit == 0:
			conv := &schemaConverter{maxRefDepth: step.refDepth, sizeLimit: budget}
			if cand = inputSchemaWith(conv, args); conv.over {
				continue // would not fit whole either: passed over, as before
			}
		default:
			if trimmed == nil || trimmedDepth != step.refDepth {
				trimmed, trimmedDepth = inputSchema(args, step.refDepth), step.refDepth
			}
			trimDescriptions(trimmed, step.descLimit)
			cand = trimmed
		}
		if n := jsonSizeUpTo(cand, budget); n <= budget || step.last {
			b.Degraded = append(b.Degraded, fmt.Sprintf("input schema %s to fit the size budget of %s", step.what, budgetSize(budget)))
			in, inSize = cand, n
		}
	}
	return in, inSize
}

// budgetSize formats a schema budget for a note: "16 KiB", or bytes when it is
// not a whole number of KiB.
func budgetSize(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d bytes", n)
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

// DeclaredInputSHA256 is the hex SHA-256 of the input schema as the operation
// declares it, before size budgets cut it (InputSchema is what is served). The
// lockfile records it. It is made on the first call; after ForgetDeclared, it
// is whatever was made by then ("" if nothing was).
func (b *Binding) DeclaredInputSHA256() string {
	b.declaredOnce.Do(func() {
		if b.declared != nil {
			b.declaredSHA = schemaSHA256(b.declared())
			b.declared = nil
		}
	})
	return b.declaredSHA
}

// ForgetDeclared lets go of what DeclaredInputSHA256 would need (pointers into
// the parsed document), once nothing will ask for it: a gateway that serves
// does so after comparing its lock.
func (b *Binding) ForgetDeclared() {
	b.declaredOnce.Do(func() { b.declared = nil })
}

// inputSchemaWithin builds the flat input schema whole when budget <= 0, else
// stops as soon as it is known to be over budget bytes (nil, and a size over
// budget). size is the schema's JSON size, counted up to budget.
func inputSchemaWithin(args []toolArg, budget int) (schema jsonSchema, size int) {
	if budget <= 0 {
		return inputSchema(args, 0), 0
	}
	conv := &schemaConverter{sizeLimit: budget}
	in := inputSchemaWith(conv, args)
	if conv.over {
		return nil, budget + 1
	}
	return in, jsonSizeUpTo(in, budget)
}

// inputSchema builds the flat input schema; maxRefDepth as in schemaConverter.
func inputSchema(args []toolArg, maxRefDepth int) jsonSchema {
	return inputSchemaWith(&schemaConverter{maxRefDepth: maxRefDepth}, args)
}

func inputSchemaWith(conv *schemaConverter, args []toolArg) jsonSchema {
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
//
// With sizeLimit positive, a schema whose JSON would pass sizeLimit bytes is
// not converted whole: tooLarge is true and schema nil.
func outputSchema(op *openapi3.Operation, maxRefDepth, sizeLimit int) (schema jsonSchema, wrap, tooLarge bool) {
	sr := successSchema(op)
	if sr == nil {
		return nil, false, false
	}
	isObject := sr.Value.Type.Is("object")
	if props, _ := objectProperties(sr.Value); len(props) > 0 {
		isObject = true
	}
	conv := &schemaConverter{maxRefDepth: maxRefDepth, sizeLimit: sizeLimit, loose: true}
	out := conv.convert(sr)
	if conv.over {
		return nil, !isObject, true
	}
	doc := jsonSchema{"type": "object", "properties": jsonSchema{"result": out}} // not required: see structuredResult
	if isObject {
		doc = objectRoot(out)
	}
	// Clients check structuredContent against the outputSchema and fail the
	// call on a mismatch (the TypeScript SDK does). APIs routinely leave out
	// fields their document calls required, and add fields over time, so
	// the advertised schema describes shapes but does not demand them.
	loosen(out)
	for _, d := range conv.defs {
		loosen(d)
	}
	return conv.document(doc), !isObject, false
}

// schemaSHA256 is the hex SHA-256 of s as JSON (encoding/json sorts map
// keys, so equal schemas hash alike).
func schemaSHA256(s jsonSchema) string {
	raw, _ := json.Marshal(s)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// objectRoot returns s as the root of an advertised schema, which must say
// "type": "object" itself: the TypeScript SDK client and the Inspector
// reject the whole tools/list otherwise, whatever an allOf or $ref below
// would imply (GitHub's catalog has top-level allOf responses). A schema with
// neither a type nor a $ref of its own gets "object" beside what it says; one
// that is a $ref, or whose type is a list (["object", "null"]), is wrapped in
// an allOf, so its meaning is kept and the root is still an object.
func objectRoot(s jsonSchema) jsonSchema {
	if s["type"] == "object" {
		return s
	}
	_, hasType := s["type"]
	_, hasRef := s["$ref"]
	if !hasType && !hasRef {
		s["type"] = "object"
		return s
	}
	return jsonSchema{"type": "object", "allOf": []any{s}}
}

// loosen removes from an output schema what a strict client would hold a
// real answer to, so that a success the gateway accepts is one every client
// accepts. It walks schema keywords, so a property named "required" stays.
//
//   - "required" and "additionalProperties": false: APIs leave out fields
//     their document calls required, and add fields over time.
//   - The keywords whose meaning differs between the gateway's validator
//     (Draft 2020-12, formats as annotations, exact decimals) and the
//     TypeScript SDK client's (Ajv draft-07 with ajv-formats asserting
//     formats, float64 arithmetic, JavaScript regular expressions):
//     "format" (a naive FastAPI date-time, a relative "uri", an empty
//     "email"), "multipleOf" (1.13 is not a multiple of 0.01 in float64),
//     "pattern" (RE2 and ECMAScript disagree) and "prefixItems" (draft-07
//     applies "items" to every element, so the tuple's "items" goes too).
//
// Each of these only ever narrows what is valid, so removing one never makes
// a valid answer invalid.
func loosen(s jsonSchema) {
	if s == nil {
		return
	}
	delete(s, "required")
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		delete(s, "additionalProperties")
	}
	delete(s, "format")
	delete(s, "multipleOf")
	delete(s, "pattern")
	if _, ok := s["prefixItems"]; ok {
		delete(s, "prefixItems")
		delete(s, "items")
	}
	eachSubschema(s, loosen)
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
		// Several JSON media types (GitHub's application/json beside
		// application/vnd.github.v3.star+json): plain application/json is
		// what a request without a special Accept gets, else the first by
		// name, so the choice is the same on every start.
		types := sortedKeys(rr.Value.Content)
		sort.SliceStable(types, func(i, j int) bool {
			return normalizeMedia(types[i]) == "application/json" && normalizeMedia(types[j]) != "application/json"
		})
		for _, mt := range types {
			if media := rr.Value.Content[mt]; isJSON(mt) && media != nil && media.Schema != nil && media.Schema.Value != nil {
				return media.Schema
			}
		}
	}
	return nil
}

func isJSON(mediaType string) bool {
	if mediaType == "application/json" {
		return true // what APIs send, and what mediaType returns for it
	}
	mt, _, _ := strings.Cut(mediaType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
