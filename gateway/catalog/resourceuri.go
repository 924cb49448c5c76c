package catalog

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/yosida95/uritemplate/v3"
)

// uriTemplate is the subset of RFC 6570 a resource's URI is written in:
// literal text, simple expressions of one variable ({petId}: level 1, one
// path parameter each), and at most one form-style query expression at the
// end ({?limit,offset}: level 3). It is what the gateway writes for an
// operation, and what x-mcp-resource's uri may say instead; go-sdk matches
// a read's URI against the same template (its uritemplate regexp), then
// the read's handler extracts the values with Match.
//
// Matching is its own, not uritemplate's Template.Match, which takes the
// query's variables only in the template's order and one value each.
type uriTemplate struct {
	text  string
	parts []uriPart // literal text and simple variables, in order
	query []string  // the query expression's variables, in order
}

type uriPart struct {
	literal string // set for literal text
	name    string // set for a variable
}

// SchemeName writes an upstream name with only the characters a URI
// scheme allows (RFC 3986: letters, digits, "+", "-", "."), "+" excepted:
// a federated resource's URI uses it to separate the name from the
// upstream's own URI. A name that does not start with a letter gets a "u"
// before it.
func SchemeName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) == 0 || !('a' <= b[0] && b[0] <= 'z' || 'A' <= b[0] && b[0] <= 'Z') {
		b = append([]byte("u"), b...)
	}
	return string(b)
}

// parseURITemplate parses text in uriTemplate's subset. A template whose
// variables are not distinct, or that uritemplate (go-sdk's matcher)
// refuses, is an error.
func parseURITemplate(text string) (*uriTemplate, error) {
	if _, err := uritemplate.New(text); err != nil {
		return nil, err
	}
	t := &uriTemplate{text: text}
	seen := map[string]bool{}
	rest := text
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, uriPart{literal: rest})
			break
		}
		if t.query != nil {
			return nil, errors.New("the {?…} query expression must come last")
		}
		if open > 0 {
			t.parts = append(t.parts, uriPart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest, '}')
		if end < open {
			return nil, errors.New("unclosed {")
		}
		expr := rest[open+1 : end]
		rest = rest[end+1:]
		names := []string{expr}
		if q, ok := strings.CutPrefix(expr, "?"); ok {
			names = strings.Split(q, ",")
			t.query = names
		} else {
			if strings.ContainsAny(expr, ",+#./;?&=*:") {
				return nil, fmt.Errorf("{%s}: only {name} and a last {?a,b} are supported", expr)
			}
			if len(t.parts) > 0 && t.parts[len(t.parts)-1].name != "" {
				return nil, fmt.Errorf("{%s} follows another variable with no text between: its value could not be told apart", expr)
			}
			t.parts = append(t.parts, uriPart{name: expr})
		}
		for _, n := range names {
			if seen[n] {
				return nil, fmt.Errorf("variable %s appears twice", n)
			}
			seen[n] = true
		}
	}
	if t.query != nil && rest != "" {
		return nil, errors.New("the {?…} query expression must come last")
	}
	for _, p := range t.parts {
		if strings.ContainsAny(p.literal, "?#") {
			return nil, errors.New("literal text must not hold '?' or '#': write the query as {?name}")
		}
	}
	return t, nil
}

// vars returns the template's variables: the simple ones in order, then
// the query's.
func (t *uriTemplate) vars() []string {
	var out []string
	for _, p := range t.parts {
		if p.name != "" {
			out = append(out, p.name)
		}
	}
	return append(out, t.query...)
}

// errNoMatch says a URI is not one the template makes.
var errNoMatch = errors.New("the URI does not match the resource template")

// match extracts the values of t's variables from uri, percent-decoded: a
// simple variable's value is a non-empty run of characters up to the
// literal text after it (a '/' never belongs to it: an encoded %2F
// does, decoded, and the path builder escapes it again); the query's
// variables may come in any order, each at most once, and no other query
// parameter is taken. A fragment, or a byte no URI holds raw, is refused.
func (t *uriTemplate) match(uri string) (map[string]string, error) {
	for i := 0; i < len(uri); i++ {
		// Only what RFC 3986 lets a URI hold, raw: a space, a control or
		// a non-ASCII byte is percent-encoded or the URI is no URI.
		if c := uri[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}#", c) >= 0 {
			return nil, errNoMatch
		}
	}
	path, query, hasQuery := strings.Cut(uri, "?")
	values := map[string]string{}
	rest := path
	for i, p := range t.parts {
		if p.literal != "" {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, p.literal); !ok {
				return nil, errNoMatch
			}
			continue
		}
		// A variable ends at the next literal's first occurrence that is
		// not inside a value: values never hold '/', and the literal after
		// a variable (templates put one between any two) is found from
		// the left, as RFC 6570's unreserved expansion cannot produce it
		// unescaped when it holds '/'. Without a '/', the leftmost match
		// is taken too.
		end := len(rest)
		if i+1 < len(t.parts) {
			next := t.parts[i+1].literal
			end = strings.Index(rest, next)
			if end < 0 {
				return nil, errNoMatch
			}
		}
		raw := rest[:end]
		if raw == "" || strings.ContainsRune(raw, '/') {
			return nil, errNoMatch
		}
		v, err := url.PathUnescape(raw)
		if err != nil {
			return nil, errNoMatch
		}
		values[p.name] = v
		rest = rest[end:]
	}
	if rest != "" {
		return nil, errNoMatch
	}
	if !hasQuery {
		return values, nil
	}
	if t.query == nil {
		return nil, errNoMatch
	}
	if query == "" {
		return values, nil
	}
	for _, pair := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, errNoMatch
		}
		if !slices.Contains(t.query, name) {
			return nil, fmt.Errorf("the URI's query parameter %s is not one of the template's (%s)", strconv.Quote(name), strings.Join(t.query, ", "))
		}
		if _, dup := values[name]; dup {
			return nil, fmt.Errorf("the URI gives query parameter %s twice", name)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, errNoMatch
		}
		values[name] = value
	}
	return values, nil
}

// escapeURILiteral writes a path template's literal text for a URI
// template: RFC 3986's unreserved characters, '/' and the sub-delims ':'
// and '@' as they are, every other byte percent-encoded (a space, a
// non-ASCII letter, and '{', '}', '?', '#', which would be read as
// template or URI syntax).
func escapeURILiteral(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/', c == ':', c == '@':
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// varName makes an argument name a valid RFC 6570 variable name (letters,
// digits and '_'; "X-Trace" is X_Trace), distinct from those in taken.
func varName(arg string, taken map[string]bool) string {
	b := []byte(arg)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	name := string(b)
	if name == "" {
		name = "v"
	}
	for n := 2; taken[name]; n++ {
		name = string(b) + "_" + strconv.Itoa(n)
	}
	taken[name] = true
	return name
}
