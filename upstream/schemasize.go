package upstream

// This file holds how big a tool's JSON is, and how its input schema is cut
// to fit Upstream.MaxToolBytes (the schema size a client is sent). It is not
// the response memory budget: that is admission.go's ResponseBudget.

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"
)

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
// sentence within limit bytes, or drops them all when limit is negative. It
// walks the schema's subschemas only, never its values (enum, const,
// default, examples): those are the document's own, shared with every other
// tool that uses them, and a "description" inside one is data.
func trimDescriptions(s jsonSchema, limit int) {
	if s == nil {
		return
	}
	if d, ok := s["description"].(string); ok {
		if limit < 0 {
			delete(s, "description")
		} else {
			s["description"] = shorten(d, limit)
		}
	}
	eachSubschema(s, func(sub jsonSchema) { trimDescriptions(sub, limit) })
}

// eachSubschema calls f with each subschema directly inside s: those under
// the keywords the converter writes subschemas to (see convertValue), and the
// $defs of a document.
func eachSubschema(s jsonSchema, f func(jsonSchema)) {
	for k, v := range s {
		switch k {
		case "properties", "patternProperties", "$defs":
			if m, ok := v.(jsonSchema); ok {
				for _, sub := range m {
					if ss, ok := sub.(jsonSchema); ok {
						f(ss)
					}
				}
			}
		case "items", "additionalProperties", "not":
			if ss, ok := v.(jsonSchema); ok {
				f(ss)
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			if list, ok := v.([]any); ok {
				for _, sub := range list {
					if ss, ok := sub.(jsonSchema); ok {
						f(ss)
					}
				}
			}
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

// JSONSize is the size of a decoded JSON value (maps, slices, strings,
// numbers, booleans, nil: what a schema is made of) as encoding/json writes
// it, counted without writing it.
func JSONSize(v any) int {
	return sizeOf(v, 0, math.MaxInt)
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
