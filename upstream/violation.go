package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Limits of how much of a value, a list of allowed values or an anyOf's
// alternatives one problem quotes.
const (
	maxQuoted       = 64 // bytes of a value quoted
	maxAllowedShown = 20 // enum values or property names listed
	maxAltsShown    = 5  // alternatives of an anyOf/oneOf
	maxAltProblems  = 3  // problems listed per alternative
)

// schemaProblems words a validation error of instance against schema (the
// schema document compiled) as "field: what is allowed" items, sorted, at
// most max of them; root names the instance itself.
//
// Each item says what the schema allows, not only the keyword that failed
// ("petId: must be greater than 1, got 1", not the validator's
// "exclusiveMinimum: got 1, want 1"): the reader is a person or a model
// that must correct the call, and may not know JSON Schema's keywords.
// A keyword this does not know keeps the validator's own words.
func schemaProblems(err error, schema jsonSchema, instance any, root string, max int) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	w := violations{schema: schema, instance: instance, root: root}
	problems := w.leaves(ve)
	// The validator meets properties in map order: sort, so the same
	// answer is always worded the same.
	sort.Strings(problems)
	problems = slices.Compact(problems)
	if len(problems) > max {
		problems = append(problems[:max], fmt.Sprintf("and %d more", len(problems)-max))
	}
	return problems
}

// violations words the leaves of one validation error.
type violations struct {
	schema   jsonSchema // to list what additionalProperties: false allows
	instance any        // to quote the value a type error is about
	root     string
}

// leaves returns the problems under e, one per failed keyword.
func (w violations) leaves(e *jsonschema.ValidationError) []string {
	switch k := e.ErrorKind.(type) {
	case *kind.PropertyNames:
		// Its causes are the name's, at no location of their own.
		rules := make([]string, 0, len(e.Causes))
		for _, c := range e.Causes {
			rules = append(rules, w.nameRules(c)...)
		}
		return []string{fmt.Sprintf("%s: property name %s is not allowed: the name %s",
			w.at(e.InstanceLocation), jsonString(k.Property), strings.Join(rules, ", and "))}
	case *kind.Contains, *kind.MinContains:
		// Its causes are why each item does not match the contains
		// schema, which no item has to match: they would read as rules.
		return []string{w.problem(e, nil)}
	case *kind.AnyOf:
		if len(e.Causes) > 0 {
			return []string{w.alternatives(e)}
		}
	case *kind.OneOf:
		if k.Subschemas == nil && len(e.Causes) > 0 {
			return []string{w.alternatives(e)}
		}
	}
	if len(e.Causes) == 0 {
		return w.own(e)
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, w.leaves(c)...)
	}
	return out
}

// nameRules words what a property name broke, without a location.
func (w violations) nameRules(e *jsonschema.ValidationError) []string {
	if len(e.Causes) == 0 {
		return []string{w.rule(e, e.ErrorKind)}
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, w.nameRules(c)...)
	}
	return out
}

// alternatives words an anyOf or oneOf none of whose alternatives matched
// as one problem: listed one by one, the alternatives' rules would read as
// all required at once. When each alternative only wants another type,
// they read as one type rule: "must be a string or null, got 5".
func (w violations) alternatives(e *jsonschema.ValidationError) string {
	var types []string
	for _, c := range e.Causes {
		t, ok := c.ErrorKind.(*kind.Type)
		if !ok || len(c.Causes) > 0 || !slices.Equal(c.InstanceLocation, e.InstanceLocation) {
			types = nil
			break
		}
		for _, tw := range t.Want {
			if !slices.Contains(types, tw) {
				types = append(types, tw)
			}
		}
	}
	if types != nil {
		return w.problem(e, &kind.Type{Want: types})
	}
	var b strings.Builder
	b.WriteString("must match one of its alternatives, but matches none:")
	for i, c := range e.Causes {
		if i == maxAltsShown {
			fmt.Fprintf(&b, " (and %d more)", len(e.Causes)-i)
			break
		}
		ps := w.leaves(c)
		sort.Strings(ps)
		if len(ps) > maxAltProblems {
			ps = append(ps[:maxAltProblems], fmt.Sprintf("and %d more", len(ps)-maxAltProblems))
		}
		fmt.Fprintf(&b, " (%d) %s", i+1, strings.Join(ps, ", "))
	}
	return w.at(e.InstanceLocation) + ": " + b.String()
}

// own words a leaf: usually one problem at its location; one per property
// for the keywords that name properties, at the property's location.
func (w violations) own(e *jsonschema.ValidationError) []string {
	per := func(props []string, text string) []string {
		out := make([]string, len(props))
		for i, p := range props {
			out[i] = w.at(append(slices.Clone(e.InstanceLocation), p)) + ": " + text
		}
		return out
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		return per(k.Missing, "is required, but missing")
	case *kind.DependentRequired:
		return per(k.Missing, fmt.Sprintf("is required when %s is given, but missing", jsonString(k.Prop)))
	case *kind.Dependency:
		return per(k.Missing, fmt.Sprintf("is required when %s is given, but missing", jsonString(k.Prop)))
	case *kind.AdditionalProperties:
		return per(k.Properties, "is not allowed; "+w.allowedProperties(e.SchemaURL))
	}
	return []string{w.problem(e, nil)}
}

// problem words one failed keyword at e's location; k, when not nil,
// stands for e's own kind.
func (w violations) problem(e *jsonschema.ValidationError, k jsonschema.ErrorKind) string {
	if k == nil {
		k = e.ErrorKind
	}
	return w.at(e.InstanceLocation) + ": " + w.rule(e, k)
}

// rule says what k allows and what it got.
func (w violations) rule(e *jsonschema.ValidationError, k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		// "a string or null", not the validator's sorted "null or a string".
		want := slices.Clone(k.Want)
		slices.SortStableFunc(want, func(a, b string) int { return btoi(a == "null") - btoi(b == "null") })
		return fmt.Sprintf("must be %s, got %s", orList(want, typeName), w.gotAt(e.InstanceLocation))
	case *kind.Enum:
		return fmt.Sprintf("must be %s, got %s", oneOf(k.Want), shown(k.Got))
	case *kind.Const:
		return fmt.Sprintf("must be %s, got %s", literal(k.Want), shown(k.Got))
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", number(k.Want), number(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", number(k.Want), number(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", number(k.Want), number(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", number(k.Want), number(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", number(k.Want), number(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %s long, got %d", count(k.Want, "character"), k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %s long, got %d", count(k.Want, "character"), k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("must match the regular expression %s, got %s", jsonString(k.Want), jsonString(k.Got))
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s, got %s (%v)", k.Want, shown(k.Got), k.Err)
	case *kind.UniqueItems:
		return fmt.Sprintf("must have unique items, but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.AdditionalItems:
		if n, ok := w.prefixItems(e.SchemaURL); ok {
			return fmt.Sprintf("must have at most %s, got %d", count(n, "item"), n+k.Count)
		}
		return fmt.Sprintf("must have fewer items: remove the last %d", k.Count)
	case *kind.Contains:
		return `must contain at least one item that matches its "contains" schema, got none`
	case *kind.MinContains:
		return fmt.Sprintf(`must contain at least %s that match its "contains" schema, got %d`, count(k.Want, "item"), len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf(`must contain at most %s that match its "contains" schema, got %d`, count(k.Want, "item"), len(k.Got))
	case *kind.OneOf:
		return fmt.Sprintf("must match exactly one of its alternatives, but matches alternatives %d and %d", k.Subschemas[0]+1, k.Subschemas[1]+1)
	case *kind.Not:
		return `must not match its "not" schema`
	case *kind.FalseSchema:
		return w.notAllowed(e.SchemaURL)
	case *kind.PropertyNames:
		return fmt.Sprintf("property name %s is not allowed", jsonString(k.Property))
	case *kind.ContentEncoding:
		return fmt.Sprintf("must be %s-encoded (%v)", k.Want, k.Err)
	case *kind.ContentMediaType:
		return fmt.Sprintf("must be %s (%v)", k.Want, k.Err)
	}
	return k.LocalizedString(printer)
}

// at names an instance location: its path, dotted, or root.
func (w violations) at(loc []string) string {
	if len(loc) == 0 {
		return w.root
	}
	return strings.Join(loc, ".")
}

// gotAt shows the instance's value at loc.
func (w violations) gotAt(loc []string) string {
	v := w.instance
	for _, tok := range loc {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return "another value"
			}
			v = x[i]
		default:
			return "another value"
		}
	}
	return shown(v)
}

// schemaAt returns the schema object at a schema location
// ("mcpgate:///tool.json#/$defs/Pet"), or nil.
func (w violations) schemaAt(loc string) map[string]any {
	_, frag, ok := strings.Cut(loc, "#")
	if !ok {
		return nil
	}
	var v any = map[string]any(w.schema)
	if frag == "" {
		return w.schema
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	m, _ := v.(map[string]any)
	return m
}

// notAllowed words a false schema at loc: an item past a tuple, a
// property the schema forbids, or any value where none may be.
func (w violations) notAllowed(loc string) string {
	parent, ok := strings.CutSuffix(loc, "/items")
	if !ok {
		return "is not allowed here"
	}
	if n, ok := w.prefixItems(parent); ok {
		return fmt.Sprintf("is not allowed: the array takes at most %s", count(n, "item"))
	}
	return "is not allowed: the array takes no items"
}

// allowedProperties says which properties the object schema at loc
// allows.
func (w violations) allowedProperties(loc string) string {
	s := w.schemaAt(loc)
	if s == nil {
		return "see the schema's properties"
	}
	props, _ := s["properties"].(map[string]any)
	patterns, _ := s["patternProperties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	var b strings.Builder
	switch len(names) {
	case 0:
		b.WriteString("no properties are allowed")
	case 1:
		b.WriteString("the only property allowed is " + jsonString(names[0]))
	default:
		b.WriteString("the properties allowed are " + listQuoted(names))
	}
	if len(patterns) > 0 {
		ps := make([]string, 0, len(patterns))
		for p := range patterns {
			ps = append(ps, p)
		}
		b.WriteString(", and names matching " + orList(ps, jsonString))
		if len(names) == 0 {
			return "the properties allowed are names matching " + orList(ps, jsonString)
		}
	}
	return b.String()
}

// prefixItems returns the length of the prefixItems of the array schema at
// loc.
func (w violations) prefixItems(loc string) (int, bool) {
	items, ok := w.schemaAt(loc)["prefixItems"].([]any)
	return len(items), ok
}

// listQuoted lists names, sorted and quoted, at most maxAllowedShown.
func listQuoted(names []string) string {
	names = slices.Sorted(slices.Values(names))
	var more string
	if len(names) > maxAllowedShown {
		more = fmt.Sprintf(" (and %d more)", len(names)-maxAllowedShown)
		names = names[:maxAllowedShown]
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = jsonString(n)
	}
	return strings.Join(q, ", ") + more
}

// oneOf says an enum: "1", or "one of 1, 2, 3", values as JSON.
func oneOf(values []any) string {
	if len(values) == 1 {
		return literal(values[0])
	}
	var more string
	if len(values) > maxAllowedShown {
		more = fmt.Sprintf(" (and %d more)", len(values)-maxAllowedShown)
		values = values[:maxAllowedShown]
	}
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = literal(v)
	}
	return "one of " + strings.Join(q, ", ") + more
}

// orList joins items, each worded by f: "a", "a or b", "a, b or c".
func orList(items []string, f func(string) string) string {
	w := make([]string, len(items))
	for i, it := range items {
		w[i] = f(it)
	}
	if len(w) <= 1 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// typeName words a JSON Schema type with its article: "an integer".
func typeName(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}

// count says n of a thing: "1 item", "3 items", "2 properties".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(thing, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// number writes a schema bound or a value exactly: integers in full (a
// float64 would round 2^53+1), other rationals as their shortest float.
func number(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// shown writes a value as JSON, the way the caller wrote it: a string
// quoted, an object or array by its kind; cut at maxQuoted bytes.
func shown(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return literal(v)
}

// jsonString writes s as a JSON string, cut at maxQuoted bytes.
func jsonString(s string) string {
	return shown(s)
}

// literal writes an allowed value as JSON, cut at maxQuoted bytes: unlike
// shown, objects and arrays too, since they are what the caller must send.
func literal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" as the caller wrote it
	if enc.Encode(v) != nil {
		return "another value"
	}
	return clip(strings.TrimSuffix(b.String(), "\n"))
}

// clip shortens s to maxQuoted bytes, on a character boundary, marking the
// cut with an ellipsis.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	s = s[:maxQuoted]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
