package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

type paramBinding struct {
	arg      string // key in the tool arguments
	name     string // name in the request
	in       string // openapi3.ParameterInPath, ...
	style    string
	explode  bool
	required bool
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
