package tagging

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// NameStyle says which tool names clients must accept.
type NameStyle int

const (
	// StrictNames is ^[a-zA-Z0-9_-]{1,64}$, which Claude Desktop, OpenAI and VS
	// Code accept. The default.
	StrictNames NameStyle = iota
	// SpecNames is SEP-986's ^[a-zA-Z0-9_.-]{1,128}$.
	SpecNames
)

func (s NameStyle) maxLen() int {
	if s == SpecNames {
		return 128
	}
	return 64
}

func (s NameStyle) allowed(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '-' || (s == SpecNames && c == '.')
}

// A Namer gives operations tool names that are valid for its style, unique
// among the names it has given, and stable: the same operation gets the same
// name on every run, whatever the order Go happens to visit maps in.
//
// A Namer is not safe for concurrent use.
type Namer struct {
	style NameStyle
	taken map[string]bool
}

// NewNamer returns a Namer for style.
func NewNamer(style NameStyle) *Namer {
	return &Namer{style: style, taken: map[string]bool{}}
}

// Name returns op's tool name. The source is, first that is set: rename (from
// configuration), the operation's x-mcp-name, its operationId, or
// "{method}_{path}". Characters the style does not allow become "_"; a name too
// long keeps a readable prefix plus "_" and 8 hex digits of the SHA-256 of the
// full original, and a name already given gets the hash of its method and path
// instead. mangled reports whether the result differs from the source.
func (n *Namer) Name(op Operation, rename string) (name string, mangled bool) {
	src := op.NameSource(rename)
	name = n.clean(src)
	if n.taken[name] {
		name = n.withHash(name, op.Method+" "+op.Path)
	}
	for i := 2; n.taken[name]; i++ { // two operations with one method and path: impossible in a valid document
		name = n.withHash(name, op.Method+" "+op.Path+" "+strings.Repeat("#", i))
	}
	n.taken[name] = true
	return name, name != src
}

// NameSource returns what op's tool name is derived from: rename if set, else
// the operation's x-mcp-name, its operationId, or "{method}_{path}".
func (op Operation) NameSource(rename string) string {
	if rename != "" {
		return rename
	}
	if v, ok := op.Operation.Extensions["x-mcp-name"].(string); ok && v != "" {
		return v
	}
	if op.Operation.OperationID != "" {
		return op.Operation.OperationID
	}
	return strings.ToLower(op.Method) + "_" + op.Path
}

// Reserve takes name as it is, for a tool the Namer did not name (a
// federated MCP server's), so that no operation is given it later. It
// reports false, and takes nothing, when name is given already.
func (n *Namer) Reserve(name string) bool {
	if n.taken[name] {
		return false
	}
	n.taken[name] = true
	return true
}

// Clean returns the name src becomes before uniqueness: what Name gives
// when no earlier operation holds it. A name Name returned that differs
// from Clean(source) was taken by another operation first.
func (n *Namer) Clean(src string) string { return n.clean(src) }

// clean maps disallowed characters to "_", squeezes runs of "_", and cuts a
// long name with a hash of the original.
func (n *Namer) clean(src string) string {
	var sb strings.Builder
	lastUnderscore := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !n.style.allowed(c) {
			c = '_'
		}
		if c == '_' && lastUnderscore {
			continue
		}
		lastUnderscore = c == '_'
		sb.WriteByte(c)
	}
	name := strings.Trim(sb.String(), "_")
	if name == "" {
		name = "tool"
	}
	if len(name) > n.style.maxLen() {
		name = n.withHash(name, src)
	}
	return name
}

// withHash returns a prefix of name plus "_" and the first 8 hex digits of the
// SHA-256 of key, within the style's length.
func (n *Namer) withHash(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if max := n.style.maxLen() - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "_.-")
	}
	return name + suffix
}

// Valid reports whether name is a name of the style as it stands: what a
// name given in configuration (a prompt's) must be, since it is served as
// written.
func (s NameStyle) Valid(name string) bool {
	if name == "" || len(name) > s.maxLen() {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !s.allowed(name[i]) {
			return false
		}
	}
	return true
}
