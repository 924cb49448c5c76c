package upstream

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// A pathPart is one piece of an operation's path template, parsed once by
// [Bind]: literal text, already percent-encoded, or a path parameter.
//
// Why parse at all: splicing values into the template text and letting
// net/url re-encode it is how paths escape. url.URL keeps an escaped RawPath
// only while it is a valid encoding of Path; a template holding a non-ASCII
// literal (/café/{x}), a space or an undeclared {placeholder} makes it invalid,
// url.URL then re-escapes the *decoded* path, and an argument "../../admin"
// turns back into dot segments. Built from escaped parts, the path is valid
// by construction, and Request checks that what goes on the wire is exactly
// what was built.
type pathPart struct {
	literal string // percent-encoded template text; used when param < 0
	param   int    // index into Binding.params, or -1
}

// parsePathTemplate splits template into literal and parameter parts. Every
// {name} must be a declared path parameter: an undeclared one cannot be
// filled in, and is an error naming it. A literal '.' or '..' segment is an
// error too: no upstream means it as a name.
func parsePathTemplate(template string, params []paramBinding) ([]pathPart, error) {
	var parts []pathPart
	rest := template
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if close := strings.IndexByte(rest, '}'); close >= 0 && (open < 0 || close < open) {
			return nil, fmt.Errorf("path template %q has a '}' without its '{'", template)
		}
		if open < 0 {
			parts = append(parts, pathPart{literal: escapeLiteral(rest), param: -1})
			break
		}
		if open > 0 {
			parts = append(parts, pathPart{literal: escapeLiteral(rest[:open]), param: -1})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("path template %q has a '{' without its '}'", template)
		}
		name := rest[open+1 : open+end]
		idx := -1
		for i, p := range params {
			if p.in == openapi3.ParameterInPath && p.name == name {
				idx = i
				break
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("path template %q has {%s}, which no path parameter declares", template, name)
		}
		parts = append(parts, pathPart{param: idx})
		rest = rest[open+end+1:]
	}
	for seg := range strings.SplitSeq(template, "/") {
		if isDotSegment(seg) {
			return nil, fmt.Errorf("path template %q has a %q segment", template, seg)
		}
	}
	return parts, nil
}

// escapeLiteral percent-encodes template text for a path: RFC 3986 pchar and
// '/' stay, a valid %XX escape stays as the document wrote it, and every other
// byte (non-ASCII, space, '?', '#', a stray '%') is encoded.
func escapeLiteral(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf || literalEscaped(byte(r)) }) {
		return s // nearly every template's text: nothing to encode, nothing to allocate
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			sb.WriteByte(c)
		case isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' || c == '/':
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// buildPath expands the parsed template with the path arguments. Each value
// is encoded so that only RFC 3986 unreserved characters stay as they are, so
// no value can add a '/', and a segment that would read as '.' or '..', or
// hold one once %2F and %5C are decoded, is refused before anything is sent:
// percent-encoding is not enough, since normalising proxies (nginx, Envoy)
// decode it.
func (b *Binding) buildPath(args map[string]any) (string, error) {
	var sb strings.Builder
	segParams := []string{} // the arguments that wrote into the current segment
	var problems []string
	checkSegment := func(seg string) {
		if len(segParams) > 0 && isDotSegment(seg) {
			problems = append(problems, fmt.Sprintf("%s: a path value must not make a '.' or '..' segment, even through an encoded '/' or '\\' (it would change the path)", strings.Join(segParams, ", ")))
		}
	}
	segStart := 0
	for _, part := range b.pathParts {
		if part.param < 0 {
			for _, c := range []byte(part.literal) {
				if c == '/' {
					checkSegment(sb.String()[segStart:])
					segParams = segParams[:0]
					sb.WriteByte(c)
					segStart = sb.Len()
					continue
				}
				sb.WriteByte(c)
			}
			continue
		}
		p := b.params[part.param]
		v, ok := args[p.arg]
		if !ok || v == nil {
			return "", &ArgumentError{Problems: []string{p.arg + ": missing required path parameter"}}
		}
		s := expandPath(p, v)
		if s == "" {
			return "", &ArgumentError{Problems: []string{p.arg + ": path parameter must not be empty"}}
		}
		sb.WriteString(s)
		segParams = append(segParams, p.arg)
	}
	checkSegment(sb.String()[segStart:])
	if len(problems) > 0 {
		return "", &ArgumentError{Problems: problems}
	}
	return sb.String(), nil
}

// isDotSegment reports whether an escaped segment, decoded, is or holds a
// "." or ".." segment. Decoded means fully: %2E is a dot, and %2F and %5C are
// separators, because servers and proxies decode them (nginx with a path in
// proxy_pass decodes %2F, then removes dot segments; IIS and many frameworks
// read \ as /), so "..%2F..%2Fadmin" must be refused, not sent.
func isDotSegment(seg string) bool {
	if !strings.ContainsAny(seg, ".%") {
		return false // no dot, and none an escape could decode to
	}
	if d, err := url.PathUnescape(seg); err == nil {
		seg = d
	}
	for _, part := range strings.FieldsFunc(seg, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == "." || part == ".." {
			return true
		}
	}
	return seg == "." || seg == ".."
}

// expandPath serializes one path parameter value by its style, as RFC 6570
// expands {x} (simple, the default), {.x} (label) and {;x} (matrix), with
// explode as the OpenAPI parameter says. Values are percent-encoded to
// unreserved characters; the separators the style adds are not.
func expandPath(p paramBinding, v any) string {
	esc := escapeValue
	switch p.style {
	case "label":
		return "." + expandList(v, ".", ",", p.explode, "")
	case "matrix":
		name := esc(p.name)
		switch val := v.(type) {
		case []any:
			if p.explode {
				return ";" + expandList(v, ";", ",", true, name)
			}
			return ";" + name + "=" + expandList(val, ",", ",", false, "")
		case map[string]any:
			if p.explode {
				return ";" + expandList(v, ";", ",", true, "")
			}
			return ";" + name + "=" + expandList(val, ",", ",", false, "")
		}
		s := esc(scalar(v))
		if s == "" {
			return ";" + name
		}
		return ";" + name + "=" + s
	}
	return expandList(v, ",", ",", p.explode, "")
}

// expandList renders a value for expandPath: a scalar alone; a list joined by
// sep when exploded (each item as name=item when name is set, RFC 6570's
// matrix form) and by "," otherwise; an object as k=v pairs joined by sep when
// exploded, else as k,v,k,v. listSep is the separator of an unexploded list.
func expandList(v any, sep, listSep string, explode bool, name string) string {
	join := listSep
	if explode {
		join = sep
	}
	if val, ok := v.([]any); ok && explode && name != "" {
		// Matrix, exploded: each element carries the name (;v=a;v=b).
		parts := make([]string, len(val))
		for i, e := range val {
			parts[i] = name + "=" + escapeValue(scalar(e))
		}
		return strings.Join(parts, join)
	}
	return joinEscaped(v, join, explode, escapeValue)
}

// escapeValue percent-encodes every byte of s but RFC 3986's unreserved
// characters (what RFC 6570 simple expansion leaves alone).
func escapeValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isUnreserved(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		if c := s[i]; isUnreserved(c) {
			sb.WriteByte(c)
		} else {
			sb.WriteByte('%')
			sb.WriteByte(upperhex[c>>4])
			sb.WriteByte(upperhex[c&15])
		}
	}
	return sb.String()
}

const upperhex = "0123456789ABCDEF"

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool {
	return strings.IndexByte("!$&'()*+,;=", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// A PathTemplate is a path with {name} placeholders that plain strings fill,
// such as a playbook engine's "/api/executions/{id}/status". It is built by
// the code that builds an operation's path ([Binding]), so a value the
// gateway read from an upstream and sends back to it (an execution id, a
// task id) is escaped and checked exactly as a tool argument is: it cannot
// add a segment, and one that would read as '.' or '..' is refused.
type PathTemplate struct {
	template string
	b        Binding // one simple, required path parameter per placeholder
}

// ParsePathTemplate parses template: literal text and {name} placeholders.
// An empty or repeated placeholder, an unbalanced brace or a '.' or '..'
// segment is an error naming it.
func ParsePathTemplate(template string) (*PathTemplate, error) {
	t := &PathTemplate{template: template}
	seen := map[string]bool{}
	for rest := template; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			break // parsePathTemplate names it
		}
		name := rest[open+1 : open+end]
		switch {
		case name == "" || strings.ContainsAny(name, "{/"):
			return nil, fmt.Errorf("path template %q has an empty or malformed placeholder", template)
		case seen[name]:
			return nil, fmt.Errorf("path template %q has {%s} twice", template, name)
		}
		seen[name] = true
		t.b.params = append(t.b.params, paramBinding{arg: name, name: name, in: openapi3.ParameterInPath, style: "simple", required: true})
		rest = rest[open+end+1:]
	}
	parts, err := parsePathTemplate(template, t.b.params)
	if err != nil {
		return nil, err
	}
	t.b.pathParts = parts
	return t, nil
}

// Names lists the template's placeholders in order.
func (t *PathTemplate) Names() []string {
	names := make([]string, len(t.b.params))
	for i, p := range t.b.params {
		names[i] = p.arg
	}
	return names
}

// String returns the template as parsed.
func (t *PathTemplate) String() string { return t.template }

// Expand fills the placeholders with values, each encoded to unreserved
// characters. A missing or empty value, or one that would make a '.' or
// '..' segment (even through an encoded '/' or '\'), is an *ArgumentError
// naming the placeholder.
func (t *PathTemplate) Expand(values map[string]string) (string, error) {
	args := make(map[string]any, len(values))
	for k, v := range values {
		args[k] = v
	}
	return t.b.buildPath(args)
}

// hasDotSegment reports whether an escaped path has a segment that reads as
// '.' or '..' once decoded (see isDotSegment).
func hasDotSegment(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if isDotSegment(seg) {
			return true
		}
	}
	return false
}

// literalEscaped reports whether escapeLiteral may encode the ASCII byte c:
// a '%' (kept only as the start of a valid escape) or a byte outside RFC
// 3986's pchar and '/'.
func literalEscaped(c byte) bool {
	return c == '%' || !(isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' || c == '/')
}
