package tagging

import (
	"fmt"
	"slices"
	"strings"
)

// A Rule picks operations for [Options.Include] and [Options.Exclude]. Make
// one with [ParseRule]; the zero Rule matches nothing.
//
// A rule is one of four forms, told apart by its text (surrounding spaces are
// trimmed, and matching is case-sensitive except for methods):
//
//	tag:NAME      operations tagged NAME, exactly (no globs)
//	METHOD PATH   operations with that method and path template: METHOD is an
//	              HTTP method in any case, or * for every method; PATH starts
//	              with "/" or "*"
//	METHOD        a bare HTTP method, upper case: GET, PUT, POST, DELETE,
//	              OPTIONS, HEAD, PATCH or TRACE
//	OPERATIONID   anything else with no space in it: the operationId, with *
//	              globs ("list*"); it never matches an operation that has no
//	              operationId
//
// PATH is matched against the path template as the document writes it, so a
// parameter is its placeholder ("* /pets/{petId}"), never a value. In PATH and
// OPERATIONID, * matches any run of characters, none included, and "/"
// included: "GET /v1/customers*" matches /v1/customers,
// /v1/customers/{customer} and /v1/customers/{customer}/sources/{id}. That is
// what a rule for "everything under a path" needs; path.Match's *, which stops
// at "/", would need one rule per depth. The price: /v1/customers* also matches
// /v1/customers_export; write "/v1/customers" and "/v1/customers/*" to stay
// inside the path. Every other character, ? [ { } included, is literal.
//
// A bare method is upper case because lower case is an operationId: a
// document may well call an operation "delete".
type Rule struct {
	text    string
	kind    ruleKind
	method  string // upper case; "" for any method
	pattern string // the path or operationId glob, or the tag
}

type ruleKind uint8

const (
	ruleNone ruleKind = iota
	ruleTag
	rulePath
	ruleMethod
	ruleOperationID
)

// ParseRule parses one include or exclude rule (see [Rule]). An error says
// what is wrong with the rule, and quotes it.
//
// Errors carry no "tagging: " prefix: they are read inside a configuration
// error that names the upstream and the list.
func ParseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	bad := func(format string, args ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("rule %q: %s", s, fmt.Sprintf(format, args...))
	}
	if text == "" {
		return bad("empty")
	}
	for _, c := range text {
		if c < ' ' || c == 0x7f {
			return bad("has a control character")
		}
	}
	if name, ok := strings.CutPrefix(text, "tag:"); ok {
		if name == "" || strings.TrimSpace(name) != name {
			return bad("tag: needs a tag name, with no spaces around it")
		}
		return Rule{text: text, kind: ruleTag, pattern: name}, nil
	}
	fields := strings.Fields(text)
	switch len(fields) {
	case 1:
		if slices.Contains(methods, text) {
			return Rule{text: text, kind: ruleMethod, method: text}, nil
		}
		return Rule{text: text, kind: ruleOperationID, pattern: text}, nil
	case 2:
		m, p := strings.ToUpper(fields[0]), fields[1]
		if m != "*" && !slices.Contains(methods, m) {
			return bad("%s is not an HTTP method (want GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE or *)", fields[0])
		}
		if p[0] != '/' && p[0] != '*' {
			return bad("the path %s must start with / or *", p)
		}
		if m == "*" {
			m = ""
		}
		return Rule{text: text, kind: rulePath, method: m, pattern: p}, nil
	}
	return bad("want tag:NAME, METHOD /path, METHOD or an operationId, not %d words", len(fields))
}

// String returns the rule as written, less surrounding spaces.
func (r Rule) String() string { return r.text }

// Match reports whether r picks op.
func (r Rule) Match(op Operation) bool {
	switch r.kind {
	case ruleTag:
		return op.Operation != nil && slices.Contains(op.Operation.Tags, r.pattern)
	case ruleMethod:
		return op.Method == r.method
	case rulePath:
		return (r.method == "" || op.Method == r.method) && glob(r.pattern, op.Path)
	case ruleOperationID:
		return op.Operation != nil && op.Operation.OperationID != "" && glob(r.pattern, op.Operation.OperationID)
	}
	return false
}

// Glob reports whether name matches pattern as an operationId rule's glob
// does: * matches any run of bytes, every other byte only itself. An MCP
// upstream's include and exclude lists match tool names with it.
func Glob(pattern, name string) bool { return glob(pattern, name) }

// glob reports whether name matches pattern, in which * matches any run of
// bytes ("/" included, none included) and every other byte only itself.
//
// With * the only metacharacter, the pieces between stars can be matched
// greedily: the first piece is a prefix, the last a suffix, and each middle
// piece is taken at its leftmost place after the one before; an earlier place
// never loses a match a later one would find. Each search starts where the
// previous one ended, so the time is linear in the lengths of name and
// pattern (strings.Index's own bound), with no backtracking, whatever a
// configuration writes. No regexp is built from configuration text.
func glob(pattern, name string) bool {
	head, rest, found := strings.Cut(pattern, "*")
	if !found {
		return pattern == name
	}
	middle, tail := "", rest
	if i := strings.LastIndexByte(rest, '*'); i >= 0 {
		middle, tail = rest[:i], rest[i+1:]
	}
	if len(name) < len(head)+len(tail) || !strings.HasPrefix(name, head) || !strings.HasSuffix(name, tail) {
		return false
	}
	name = name[len(head) : len(name)-len(tail)]
	for middle != "" {
		var piece string
		piece, middle, _ = strings.Cut(middle, "*")
		if piece == "" {
			continue
		}
		i := strings.Index(name, piece)
		if i < 0 {
			return false
		}
		name = name[i+len(piece):]
	}
	return true
}
