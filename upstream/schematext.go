package upstream

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The texts of a schema a client reads: every title, description, format
// and pattern, enum value, const, default and example (the strings inside
// them, and the keys of objects among them), and every property name. The audit lints them
// (SchemaTexts); the gateway serves them cleaned of characters a reader does
// not see (CleanSchema).

// schemaLists are the keywords whose value is a list of subschemas;
// schemaMaps those whose value maps names to subschemas (patternProperties'
// names are patterns, $defs' are made safe by newDefKey: neither is text);
// schemaOne those whose value is one subschema.
var (
	schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMaps  = []string{"patternProperties", "$defs"}
	schemaOne   = []string{"items", "additionalProperties", "not"}
	// textKeywords hold one text each.
	textKeywords = []string{"title", "description", "format", "pattern"}
	// valueKeywords hold values (instances), whose strings are text.
	valueKeywords = []string{"enum", "const", "default", "examples"}
)

// SchemaTexts calls f with every text of the schema s (see above) a client
// reads, with its JSON pointer (RFC 6901) under prefix; name says the text is
// the name of the member the pointer names (a property name, or a key in a
// value). Texts come in a fixed order: keywords as listed here, names
// sorted.
func SchemaTexts(s map[string]any, prefix string, f func(pointer string, name bool, text string)) {
	if s == nil {
		return
	}
	for _, k := range textKeywords {
		if text, ok := s[k].(string); ok {
			f(prefix+"/"+k, false, text)
		}
	}
	for _, k := range valueKeywords {
		if v, ok := s[k]; ok {
			valueTexts(v, prefix+"/"+k, f)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			p := prefix + "/properties/" + pointerToken(name)
			f(p, true, name)
			if sub, ok := props[name].(map[string]any); ok {
				SchemaTexts(sub, p, f)
			}
		}
	}
	for _, k := range schemaMaps {
		if m, ok := s[k].(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if sub, ok := m[name].(map[string]any); ok {
					SchemaTexts(sub, prefix+"/"+k+"/"+pointerToken(name), f)
				}
			}
		}
	}
	for _, k := range schemaOne {
		if sub, ok := s[k].(map[string]any); ok {
			SchemaTexts(sub, prefix+"/"+k, f)
		}
	}
	for _, k := range schemaLists {
		if list, ok := s[k].([]any); ok {
			for i, v := range list {
				if sub, ok := v.(map[string]any); ok {
					SchemaTexts(sub, prefix+"/"+k+"/"+strconv.Itoa(i), f)
				}
			}
		}
	}
}

// valueTexts calls f with the strings of a value (an enum member, a
// default…): strings, and the keys and strings of objects and lists in it.
func valueTexts(v any, pointer string, f func(pointer string, name bool, text string)) {
	switch x := v.(type) {
	case string:
		f(pointer, false, x)
	case []any:
		for i, e := range x {
			valueTexts(e, pointer+"/"+strconv.Itoa(i), f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := pointer + "/" + pointerToken(k)
			f(p, true, k)
			valueTexts(x[k], p, f)
		}
	}
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// CleanSchema returns s with clean applied to each of its texts (see
// SchemaTexts), and whether anything changed. It never changes s or what s
// holds (a default or an enum may be the document's own value): a changed
// schema is a copy along the path to each change, sharing the rest.
//
// A property renamed by clean is renamed in "required" too; when the clean
// name is taken already, the property is dropped. For an output schema
// (output), an enum or a const that clean would change is dropped instead:
// a client checks the API's answers against the output schema, and the API
// still answers with the value as the document declares it (dropping one
// only lets more through, as loosen does). In an input schema the cleaned
// value is what a model sends, and what the call carries.
func CleanSchema(s map[string]any, clean func(string) string, output bool) (map[string]any, bool) {
	if s == nil {
		return nil, false
	}
	var out map[string]any
	set := func(k string, v any, drop bool) {
		if out == nil {
			out = maps.Clone(s)
		}
		if drop {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	for _, k := range textKeywords {
		if text, ok := s[k].(string); ok {
			if c := clean(text); c != text {
				// A pattern cleaned would match other strings: leave it out
				// of what clients see (the gateway still checks calls
				// against the document's own, and the audit reports it).
				set(k, c, k == "pattern")
			}
		}
	}
	for _, k := range valueKeywords {
		if v, ok := s[k]; ok {
			if c, changed := cleanValue(v, clean); changed {
				set(k, c, output && (k == "enum" || k == "const"))
			}
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		renamed := map[string]string{} // old name → clean name; "" when dropped
		var np map[string]any
		for name, sub := range props {
			if m, ok := sub.(map[string]any); ok {
				if c, changed := CleanSchema(m, clean, output); changed {
					if np == nil {
						np = maps.Clone(props)
					}
					np[name], sub = c, c
				}
			}
			if c := clean(name); c != name {
				if np == nil {
					np = maps.Clone(props)
				}
				delete(np, name)
				renamed[name] = ""
				if _, taken := props[c]; !taken {
					np[c] = sub
					renamed[name] = c
				}
			}
		}
		if np != nil {
			set("properties", np, false)
		}
		if req, ok := s["required"].([]any); ok && len(renamed) > 0 {
			nr := make([]any, 0, len(req))
			for _, r := range req {
				if name, ok := r.(string); ok {
					if c, ok := renamed[name]; ok {
						if c == "" {
							continue // its property was dropped
						}
						r = c
					}
				}
				nr = append(nr, r)
			}
			set("required", nr, false)
		}
	}
	for _, k := range schemaMaps {
		if m, ok := s[k].(map[string]any); ok {
			var nm map[string]any
			for name, v := range m {
				if sub, ok := v.(map[string]any); ok {
					if c, changed := CleanSchema(sub, clean, output); changed {
						if nm == nil {
							nm = maps.Clone(m)
						}
						nm[name] = c
					}
				}
			}
			if nm != nil {
				set(k, nm, false)
			}
		}
	}
	for _, k := range schemaOne {
		if sub, ok := s[k].(map[string]any); ok {
			if c, changed := CleanSchema(sub, clean, output); changed {
				set(k, c, false)
			}
		}
	}
	for _, k := range schemaLists {
		if list, ok := s[k].([]any); ok {
			var nl []any
			for i, v := range list {
				if sub, ok := v.(map[string]any); ok {
					if c, changed := CleanSchema(sub, clean, output); changed {
						if nl == nil {
							nl = slices.Clone(list)
						}
						nl[i] = c
					}
				}
			}
			if nl != nil {
				set(k, nl, false)
			}
		}
	}
	if out == nil {
		return s, false
	}
	return out, true
}

// cleanValue returns v with clean applied to its strings and its objects'
// keys, copied where that changes anything.
func cleanValue(v any, clean func(string) string) (any, bool) {
	switch x := v.(type) {
	case string:
		c := clean(x)
		return c, c != x
	case []any:
		var nl []any
		for i, e := range x {
			if c, changed := cleanValue(e, clean); changed {
				if nl == nil {
					nl = slices.Clone(x)
				}
				nl[i] = c
			}
		}
		if nl == nil {
			return v, false
		}
		return nl, true
	case map[string]any:
		var nm map[string]any
		for k, e := range x {
			c, changed := cleanValue(e, clean)
			ck := clean(k)
			if !changed && ck == k {
				continue
			}
			if nm == nil {
				nm = maps.Clone(x)
			}
			delete(nm, k)
			if _, taken := x[ck]; !taken || ck == k {
				nm[ck] = c
			}
		}
		if nm == nil {
			return v, false
		}
		return nm, true
	}
	return v, false
}
