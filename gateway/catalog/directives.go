package catalog

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/config"
	"gopkg.in/yaml.v3"
)

// Playbook-file directives.
//
// An engine's catalog may carry each playbook's YAML source (NoETL's catalog
// entries hold it as "content"; "source" is read too). Its top-level
// workload mapping gives the defaults, and a line comment on a workload key
// refines that input, as the config's inputs do:
//
//	workload:
//	  api_key: s3cr3t            # ui:secret
//	  region: eu-west            # ui:enum=[eu-west, us-east]
//	  label: demo                # ui:description=A label echoed in the result.
//
//   - ui:secret: the default is never shown in the input schema (it is
//     still sent when the caller gives no value).
//   - ui:enum=[a,b]: the values allowed. A string default makes every item a
//     string (quotes stripped); otherwise items are YAML scalars, and one of
//     another type than the default makes the directive malformed, as does
//     a default (not null or empty) that is not among the items.
//   - ui:description=text: the input's description (to the end of the
//     comment, or the next "# ui:").
//
// Several directives may share a comment ("# ui:secret # ui:description=The
// key"). Comment text before the first "ui:" is an ordinary comment.
// ui:credential (NoETL's credential picker) has no MCP meaning and is
// ignored. A malformed or unknown directive is ignored with a warning that
// names the playbook and the key: a playbook file is the engine's, and one
// bad comment must not cost the gateway the playbook. The config's inputs
// win over directives, key by key.

// directiveStart finds each directive in a comment: a "#" and "ui:".
var directiveStart = regexp.MustCompile(`#\s*ui:`)

// directiveName is a directive's name, at the start of its text.
var directiveName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*`)

// sourceWorkload reads a playbook's YAML source: the defaults of its
// workload mapping (nil when it has none) and what the directives on its
// keys say. Warnings name the playbook (path) and the key.
func sourceWorkload(path, src string) (map[string]any, map[string]config.PlaybookInput, []string) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, nil, []string{fmt.Sprintf("playbook %s: its source is not YAML (%v); its directives are ignored", path, err)}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, nil
	}
	top := doc.Content[0]
	var wl *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "workload" {
			wl = top.Content[i+1]
		}
	}
	if wl == nil {
		return nil, nil, nil
	}
	if wl.Kind != yaml.MappingNode {
		return nil, nil, []string{fmt.Sprintf("playbook %s: its source's workload is not a mapping; its directives are ignored", path)}
	}
	defaults := map[string]any{}
	inputs := map[string]config.PlaybookInput{}
	var warnings []string
	for i := 0; i+1 < len(wl.Content); i += 2 {
		k, v := wl.Content[i], wl.Content[i+1]
		var def any
		if err := v.Decode(&def); err != nil {
			warnings = append(warnings, fmt.Sprintf("playbook %s: workload key %s: its default does not decode (%v)", path, k.Value, err))
			continue
		}
		defaults[k.Value] = def
		// yaml.v3 keeps "key: value # c" on the value, and "key: # c" (a
		// mapping or list below) on the key.
		in, problems := parseDirectives(strings.TrimSpace(k.LineComment+" "+v.LineComment), def)
		for _, p := range problems {
			warnings = append(warnings, fmt.Sprintf("playbook %s: workload key %s: %s; ignored", path, k.Value, p))
		}
		if in.Secret || in.Description != "" || in.Enum != nil {
			inputs[k.Value] = in
		}
	}
	return defaults, inputs, warnings
}

// parseDirectives reads the ui: directives of one key's comment; def is the
// key's default, which an enum must agree with. It returns what the
// well-formed directives say and why each other one was ignored.
func parseDirectives(comment string, def any) (config.PlaybookInput, []string) {
	var in config.PlaybookInput
	var problems []string
	starts := directiveStart.FindAllStringIndex(comment, -1)
	for i, s := range starts {
		end := len(comment)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		text := strings.TrimSpace(comment[s[1]:end])
		name := directiveName.FindString(text)
		rest := strings.TrimSpace(text[len(name):])
		value, hasValue := strings.CutPrefix(rest, "=")
		value = strings.TrimSpace(value)
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("%q is not a directive (ui:NAME or ui:NAME=VALUE)", "ui:"+text))
		case !hasValue && rest != "" && !strings.HasPrefix(rest, "#"):
			problems = append(problems, fmt.Sprintf("%q: expected = or the end of the directive after ui:%s", "ui:"+text, name))
		default:
			if p := applyDirective(&in, name, value, hasValue, def); p != "" {
				problems = append(problems, fmt.Sprintf("%q: %s", "ui:"+text, p))
			}
		}
	}
	return in, problems
}

// applyDirective sets in what one directive says, or returns why it cannot.
func applyDirective(in *config.PlaybookInput, name, value string, hasValue bool, def any) string {
	switch name {
	case "secret":
		if hasValue {
			return "ui:secret takes no value"
		}
		in.Secret = true
	case "description":
		d := unquote(value)
		if d == "" {
			return "ui:description needs text, e.g. ui:description=Whom to greet."
		}
		in.Description = d
	case "enum":
		enum, p := parseEnum(value, def)
		if p != "" {
			return p
		}
		in.Enum = enum
	case "credential":
		// NoETL's credential picker: nothing an MCP client can use.
	default:
		return fmt.Sprintf("unknown directive ui:%s (known: secret, enum, description)", name)
	}
	return ""
}

// parseEnum reads "[a, b]" into values typed like def.
func parseEnum(value string, def any) ([]any, string) {
	inner, ok := strings.CutPrefix(value, "[")
	var after string
	if ok {
		inner, after, ok = strings.Cut(inner, "]")
	}
	if after = strings.TrimSpace(after); !ok || after != "" && !strings.HasPrefix(after, "#") {
		return nil, "ui:enum needs a list in brackets, e.g. ui:enum=[a,b]"
	}
	_, isString := def.(string)
	var out []any
	for item := range strings.SplitSeq(inner, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, "ui:enum has an empty item"
		}
		var v any = unquote(item)
		if !isString { // typed as YAML reads it; a string default keeps the text
			if err := yaml.Unmarshal([]byte(item), &v); err != nil {
				return nil, fmt.Sprintf("ui:enum item %s is not a YAML value", item)
			}
			k, dk := kindOf(v), kindOf(def)
			if def != nil && k != dk && (k != "integer" || dk != "number") {
				return nil, fmt.Sprintf("ui:enum item %s is a %s, the default a %s", item, k, dk)
			}
		}
		out = append(out, v)
	}
	if !isEmptyDefault(def) && !containsValue(out, def) {
		return nil, fmt.Sprintf("the default %v is not among the ui:enum values", def)
	}
	return out, ""
}

// kindOf names a decoded YAML scalar's JSON Schema type.
func kindOf(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64, uint64:
		return "integer"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case nil:
		return "null"
	}
	return "non-scalar"
}

// isEmptyDefault reports a default the schema leaves out (workloadSchema: a
// null or empty value is an unconstrained, optional input).
func isEmptyDefault(v any) bool { return v == nil || v == "" }

func containsValue(list []any, v any) bool {
	for _, x := range list {
		if x == v || fmt.Sprint(x) == fmt.Sprint(v) && kindOf(x) == kindOf(v) {
			return true
		}
	}
	return false
}

// unquote strips one pair of matching quotes.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// applySource lays what a catalog entry's YAML source says under it: its
// workload when the entry gives none, and its directives wherever the
// entry's own inputs (its secrets list) say nothing more.
func applySource(it *config.PlaybookItem, src string) []string {
	defaults, inputs, warnings := sourceWorkload(it.Path, src)
	if it.Workload == nil {
		it.Workload = defaults
	}
	for k, d := range inputs {
		if it.Inputs == nil {
			it.Inputs = map[string]config.PlaybookInput{}
		}
		in := it.Inputs[k]
		in.Secret = in.Secret || d.Secret
		if in.Description == "" {
			in.Description = d.Description
		}
		if in.Enum == nil {
			in.Enum = d.Enum
		}
		it.Inputs[k] = in
	}
	return warnings
}
