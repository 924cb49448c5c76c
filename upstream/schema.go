package upstream

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// maxSchemaDepth bounds how deep a schema is expanded. Deeper subtrees become a
// permissive schema with a description saying so; real documents (Kubernetes,
// Stripe) nest far deeper through recursion than any tool call needs.
const maxSchemaDepth = 16

// jsonSchema is a JSON Schema (draft 2020-12) object, as sent in tools/list.
type jsonSchema = map[string]any

// schemaConverter turns OpenAPI schemas (3.0 or 3.1 dialect) into JSON Schema
// 2020-12. A reference to a component schema becomes {"$ref": "#/$defs/Name"},
// and the component is converted once into defs: the output grows with the
// number of components a tool reaches, never with the number of paths through
// them (Stripe's and Kubernetes' schemas are recursive and densely shared, and
// explode when inlined). One converter serves one schema document.
type schemaConverter struct {
	defs     map[string]jsonSchema // converted components, by $defs key
	defKeys  map[string]string     // component $ref → $defs key
	defDepth map[string]int        // $defs key → the $ref depth it was converted at

	// maxRefDepth, when positive, bounds how many $ref hops from the root
	// are followed: a component further away becomes a permissive stub that
	// says so. Zero means no bound; negative, that every component is a
	// stub. It is how a tool over its size budget is degraded.
	maxRefDepth int

	// sizeLimit, when positive, stops a conversion whose result would be
	// larger than this many bytes of JSON: over is set, and the result is
	// to be thrown away. It is how an output schema is sized before it is
	// converted whole (Stripe's run to half a MiB, and are dropped by the
	// budget anyway). minSize is a lower bound of the result's size so far
	// (the descriptions, titles and property names, which the result keeps
	// whatever the order of conversion), so the decision is the same on
	// every run: a schema that fits is never stopped, and one that is
	// stopped would not have fit.
	sizeLimit int
	minSize   int
	over      bool
	// defOwn is what each $defs entry's own body (without the entries it
	// converted in turn) added to minSize, and defDelta the net change to
	// minSize of every $defs conversion so far: a component converted again
	// nearer the root replaces its body, so its old share is taken back and
	// minSize stays a lower bound of what the result keeps.
	defOwn   map[string]int
	defDelta int

	// loose says the result is for loosen (an output schema), which drops
	// a tuple's prefixItems and items: they are left out as converted.
	loose bool

	// dropRootDesc leaves out the description of the next schema converted
	// inline: one about to be replaced (a parameter's own description wins
	// over its schema's), which minSize must not count.
	dropRootDesc bool
}

const componentPrefix = "#/components/schemas/"

func (c *schemaConverter) convert(sr *openapi3.SchemaRef) jsonSchema {
	return c.convertDepth(sr, 0, 0)
}

// document returns s as a schema document: with the $defs it references.
func (c *schemaConverter) document(s jsonSchema) jsonSchema {
	if len(c.defs) > 0 {
		defs := make(jsonSchema, len(c.defs))
		for k, v := range c.defs {
			defs[k] = v
		}
		s["$defs"] = defs
	}
	return s
}

// convertDepth converts sr at nesting depth depth, refDepth $ref hops from the
// root.
func (c *schemaConverter) convertDepth(sr *openapi3.SchemaRef, depth, refDepth int) jsonSchema {
	if sr == nil || sr.Value == nil {
		return jsonSchema{}
	}
	if ref := sr.Ref; strings.HasPrefix(ref, componentPrefix) {
		c.dropRootDesc = false // a component keeps its description, in $defs
		name := strings.TrimPrefix(ref, componentPrefix)
		if c.maxRefDepth != 0 && refDepth >= max(c.maxRefDepth, 0) {
			return stub(name, sr.Value)
		}
		key, seen := c.defKeys[ref]
		// A component first met deep down was cut shorter than it must be
		// now that it is met nearer the root: convert it again.
		if !seen || (c.maxRefDepth > 0 && refDepth < c.defDepth[key]) {
			if !seen {
				key = c.newDefKey(name)
				c.defKeys[ref] = key
			}
			c.defDepth[key] = refDepth
			c.defs[key] = jsonSchema{} // placeholder: a recursive use finds the key
			prev := c.defOwn[key]
			c.minSize -= prev // the body it had is replaced
			m0, d0 := c.minSize, c.defDelta
			c.defs[key] = c.convertValue(sr.Value, 0, refDepth+1)
			// Without a sizeLimit nothing is counted: own and prev are 0.
			if own := (c.minSize - m0) - (c.defDelta - d0); own != 0 || prev != 0 {
				if c.defOwn == nil {
					c.defOwn = map[string]int{}
				}
				c.defOwn[key] = own
				c.defDelta += own - prev
			}
		}
		return jsonSchema{"$ref": "#/$defs/" + key}
	}
	return c.convertValue(sr.Value, depth, refDepth)
}

// setDescription sets s's description, converted already, to desc, keeping
// minSize a lower bound of the result: a description desc replaces (a
// parameter's own over its schema's) is taken back out of it.
func (c *schemaConverter) setDescription(s jsonSchema, desc string) {
	if c.sizeLimit > 0 {
		if old, ok := s["description"].(string); ok {
			c.minSize -= len(old)
		}
		c.minSize += len(desc)
		if c.minSize > c.sizeLimit {
			c.over = true
		}
	}
	s["description"] = desc
}

// stub stands for a component left out to fit the size budget: it accepts any
// value (of the component's type, when it has one) and says so.
func stub(name string, s *openapi3.Schema) jsonSchema {
	out := jsonSchema{"description": fmt.Sprintf("%s: nested schema omitted to fit the tool's size budget; see the API documentation.", name)}
	if types := s.Type.Slice(); len(types) == 1 {
		out["type"] = types[0]
	} else if len(s.Properties) > 0 {
		out["type"] = "object"
	}
	return out
}

// newDefKey turns a component name into a $defs key that is safe inside a JSON
// pointer and a URI fragment, unique within this document.
func (c *schemaConverter) newDefKey(name string) string {
	if c.defs == nil {
		c.defs = map[string]jsonSchema{}
		c.defKeys = map[string]string{}
		c.defDepth = map[string]int{}
	}
	b := []byte(name)
	for i, ch := range b {
		if !isUnreserved(ch) {
			b[i] = '_'
		}
	}
	key := string(b)
	if key == "" {
		key = "schema"
	}
	for i := 2; ; i++ {
		if _, taken := c.defs[key]; !taken {
			return key
		}
		key = fmt.Sprintf("%s_%d", b, i)
	}
}

func (c *schemaConverter) convertValue(s *openapi3.Schema, depth, refDepth int) jsonSchema {
	dropDesc := c.dropRootDesc
	c.dropRootDesc = false
	if c.over {
		return jsonSchema{}
	}
	if depth > maxSchemaDepth {
		return jsonSchema{"description": "Nested too deeply to describe here; any value is accepted."}
	}
	if s.Always != nil { // a boolean schema: true or false
		if *s.Always {
			return jsonSchema{}
		}
		return jsonSchema{"not": jsonSchema{}}
	}
	out := jsonSchema{}
	if types := s.Type.Slice(); len(types) > 0 {
		types = append([]string(nil), types...)
		if s.Nullable && !contains(types, "null") {
			types = append(types, "null")
		}
		if len(types) == 1 {
			out["type"] = types[0]
		} else {
			out["type"] = toAny(types)
		}
	}
	setString(out, "title", s.Title)
	desc := ""
	if !dropDesc {
		desc = DescriptionMarkdown(s.Description)
	}
	setString(out, "description", desc)
	if c.sizeLimit > 0 {
		c.minSize += len(s.Title) + len(desc)
		for name := range s.Properties {
			c.minSize += len(name) + 3
		}
		if c.minSize > c.sizeLimit {
			c.over = true
			return jsonSchema{}
		}
	}
	setString(out, "format", s.Format)
	if len(s.Enum) > 0 {
		enum := append([]any(nil), s.Enum...)
		if s.Nullable && !containsAny(enum, nil) {
			enum = append(enum, nil)
		}
		out["enum"] = enum
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if s.Const != nil {
		out["const"] = s.Const
	}
	if len(s.Examples) > 0 {
		out["examples"] = s.Examples
	} else if s.Example != nil {
		out["examples"] = []any{s.Example}
	}
	if s.Deprecated {
		out["deprecated"] = true
	}
	if s.ReadOnly {
		out["readOnly"] = true
	}
	if s.WriteOnly {
		out["writeOnly"] = true
	}

	// Numbers. OpenAPI 3.0 spells exclusive bounds as booleans beside
	// minimum/maximum; 2020-12 wants the bound itself.
	if s.MultipleOf != nil && *s.MultipleOf > 0 {
		out["multipleOf"] = *s.MultipleOf
	}
	if s.Min != nil {
		if s.ExclusiveMin.IsTrue() {
			out["exclusiveMinimum"] = *s.Min
		} else {
			out["minimum"] = *s.Min
		}
	}
	if s.ExclusiveMin.Value != nil {
		out["exclusiveMinimum"] = *s.ExclusiveMin.Value
	}
	if s.Max != nil {
		if s.ExclusiveMax.IsTrue() {
			out["exclusiveMaximum"] = *s.Max
		} else {
			out["maximum"] = *s.Max
		}
	}
	if s.ExclusiveMax.Value != nil {
		out["exclusiveMaximum"] = *s.ExclusiveMax.Value
	}

	// Strings. OpenAPI patterns are ECMA-262; one that Go's RE2 (and so the
	// validator) cannot compile is dropped rather than failing the whole tool.
	if s.MinLength > 0 {
		out["minLength"] = s.MinLength
	}
	if s.MaxLength != nil {
		out["maxLength"] = *s.MaxLength
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err == nil {
			out["pattern"] = s.Pattern
		}
	}

	// Arrays. A tuple (prefixItems) in a schema to be loosened is not
	// converted at all, its items neither: loosen would drop both, and
	// what they held must not count against the size budget.
	if !c.loose || len(s.PrefixItems) == 0 {
		if s.Items != nil {
			out["items"] = c.convertDepth(s.Items, depth+1, refDepth)
		}
		if len(s.PrefixItems) > 0 {
			out["prefixItems"] = c.convertList(s.PrefixItems, depth, refDepth)
		}
	}
	if s.MinItems > 0 {
		out["minItems"] = s.MinItems
	}
	if s.MaxItems != nil {
		out["maxItems"] = *s.MaxItems
	}
	if s.UniqueItems {
		out["uniqueItems"] = true
	}

	// Objects.
	if len(s.Properties) > 0 {
		props := make(jsonSchema, len(s.Properties))
		// Sorted, so that a budget-limited conversion is the same on
		// every run.
		for _, name := range sortedKeys(s.Properties) {
			props[name] = c.convertDepth(s.Properties[name], depth+1, refDepth)
		}
		out["properties"] = props
	}
	if req := c.required(s); len(req) > 0 {
		out["required"] = toAny(req)
	}
	if s.MinProps > 0 {
		out["minProperties"] = s.MinProps
	}
	if s.MaxProps != nil {
		out["maxProperties"] = *s.MaxProps
	}
	if ap := s.AdditionalProperties; ap.Has != nil && !*ap.Has {
		out["additionalProperties"] = false
	} else if ap.Schema != nil {
		out["additionalProperties"] = c.convertDepth(ap.Schema, depth+1, refDepth)
	}
	if len(s.PatternProperties) > 0 {
		pp := make(jsonSchema, len(s.PatternProperties))
		for _, pat := range sortedKeys(s.PatternProperties) {
			if _, err := regexp.Compile(pat); err == nil {
				pp[pat] = c.convertDepth(s.PatternProperties[pat], depth+1, refDepth)
			}
		}
		if len(pp) > 0 {
			out["patternProperties"] = pp
		}
	}

	// Composition.
	if len(s.AllOf) > 0 {
		out["allOf"] = c.convertList(s.AllOf, depth, refDepth)
	}
	if len(s.AnyOf) > 0 {
		out["anyOf"] = c.convertList(s.AnyOf, depth, refDepth)
	}
	if len(s.OneOf) > 0 {
		out["oneOf"] = c.convertList(s.OneOf, depth, refDepth)
	}
	if s.Not != nil {
		out["not"] = c.convertDepth(s.Not, depth+1, refDepth)
	}
	return out
}

// required is s's required list as the result keeps it. In an input schema
// (not loose) a readOnly property is left out of it: OpenAPI 3.0 says such a
// property is required "on the response only", and 3.1 (JSON Schema's
// readOnly) that the API owns its value. Kept, it would refuse a correct call
// (a create without the id the server assigns) and push the model to make a
// value up. The property itself stays, marked readOnly.
func (c *schemaConverter) required(s *openapi3.Schema) []string {
	isReadOnly := func(name string) bool { return readOnly(s.Properties[name]) }
	if c.loose || !slices.ContainsFunc(s.Required, isReadOnly) {
		return s.Required
	}
	return slices.DeleteFunc(slices.Clone(s.Required), isReadOnly) // a copy: s.Required is the document's
}

// readOnly reports whether sr is a schema marked readOnly.
func readOnly(sr *openapi3.SchemaRef) bool {
	return sr != nil && sr.Value != nil && sr.Value.ReadOnly
}

func (c *schemaConverter) convertList(list openapi3.SchemaRefs, depth, refDepth int) []any {
	out := make([]any, 0, len(list))
	for _, sr := range list {
		out = append(out, c.convertDepth(sr, depth+1, refDepth))
	}
	return out
}

func setString(m jsonSchema, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsAny(list []any, v any) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func toAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}
