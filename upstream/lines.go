package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	yaml "gopkg.in/yaml.v3"
)

// Lines of a JSON document.
//
// kin-openapi records where each element stands (openapi3.Origin) only on
// its YAML path, so the audit reads a JSON document as YAML to name lines
// (see parseDocument). JSON is nearly YAML, but not quite: yaml.v3 refuses
// the surrogate-pair escapes that encoders write for astral characters
// (Python's json.dumps writes "🚀" as "\ud83d\ude80"), lone surrogates, the
// escape "\/" (PHP's json_encode writes URLs so), raw C1 controls, DEL and
// U+FFFE/U+FFFF, and a tab before the first token; it folds a raw NEL, LS
// or PS inside a string into a space, wants a key and its colon on one line,
// and refuses a key twice in one object (JSON takes the last). yamlForm
// rewrites what it can, keeping every token on its line, and says why when
// it cannot; the document is then loaded without lines rather than not at
// all.

// jsonToken is one token of a JSON text.
type jsonToken struct {
	// kind is '{', '}', '[', ']', ':' or ',', '"' for a string value, 'k'
	// for an object key, 'v' for a number, true, false or null.
	kind       byte
	start, end int // byte offsets of the token in the text
	// line is the token's line, from 1, counted as YAML counts them: "\r\n",
	// "\r" and "\n" each end a line (a JSON string holds none of them raw).
	line int
}

// scanJSON calls visit with every token of data, a JSON text, in order, and
// stops at the first error visit returns. It checks no more of the grammar
// than it needs to tell tokens apart: callers pass it text that
// encoding/json has accepted.
func scanJSON(data []byte, visit func(jsonToken) error) error {
	line := 1
	type container struct{ object, keyNext bool } // keyNext: the next string is a key
	var open []container
	for i := 0; i < len(data); {
		c := data[i]
		switch c {
		case ' ', '\t':
			i++
			continue
		case '\n':
			line++
			i++
			continue
		case '\r':
			line++
			i++
			if i < len(data) && data[i] == '\n' {
				i++
			}
			continue
		}
		tok := jsonToken{kind: c, start: i, line: line}
		switch c {
		case '{', '[':
			open = append(open, container{object: c == '{', keyNext: c == '{'})
			i++
		case '}', ']':
			if len(open) == 0 {
				return fmt.Errorf("line %d: unbalanced %q", line, c)
			}
			open = open[:len(open)-1]
			i++
		case ',':
			if n := len(open); n > 0 && open[n-1].object {
				open[n-1].keyNext = true
			}
			i++
		case ':':
			i++
		case '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(data) {
				return fmt.Errorf("line %d: unterminated string", line)
			}
			i = j + 1
			if n := len(open); n > 0 && open[n-1].keyNext {
				tok.kind = 'k'
				open[n-1].keyNext = false
			}
		default:
			j := i
			for j < len(data) && !isJSONDelimiter(data[j]) {
				j++
			}
			if j == i {
				return fmt.Errorf("line %d: unexpected %q", line, c)
			}
			tok.kind = 'v'
			i = j
		}
		tok.end = i
		if err := visit(tok); err != nil {
			return err
		}
	}
	return nil
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func isJSONDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// jsonStringValue decodes a JSON string token (quotes included) as
// encoding/json does: an escaped lone surrogate becomes U+FFFD.
func jsonStringValue(tok []byte) string {
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1])
	}
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return string(tok[1 : len(tok)-1])
	}
	return s
}

// maxYAMLKey bounds an object key, in characters with its quotes: yaml.v3
// reads a flow-mapping key only when its colon comes within 1024 characters
// of its start (a "simple key"). Kept under that, with room.
const maxYAMLKey = 1000

// errNoYAMLForm says that a JSON document has no YAML form that reads the
// same way: yamlForm's error wraps it.
var errNoYAMLForm = errors.New("no YAML form")

// yamlForm returns data, a JSON text, rewritten so that YAML (yaml.v3, as
// kin-openapi reads it) reads the same value as encoding/json does, with
// every token on its line:
//
//   - in strings, a surrogate pair escape becomes YAML's \UXXXXXXXX, a lone
//     surrogate \uFFFD (what encoding/json makes of it), "\/" a plain "/",
//     and the characters YAML refuses or reads as line breaks (DEL, C1
//     controls, NEL, LS, PS, U+FEFF, U+FFFE, U+FFFF) escapes, as are bytes
//     that are not UTF-8 (U+FFFD, as encoding/json reads them);
//   - between tokens, a tab becomes a space;
//   - a key whose colon is on a later line gets its colon moved up (the
//     colon's place becomes a space).
//
// It fails, wrapping errNoYAMLForm, on what has no such form: a key twice in
// one object, a key of more than maxYAMLKey characters.
func yamlForm(data []byte) ([]byte, error) {
	out := make([]byte, 0, len(data)+len(data)/32+16)
	last := 0
	var keys []map[string]bool // per open container; nil for arrays and until a key is seen
	movedColon := -1           // offset of a colon written right after its key
	gap := func(b []byte) {
		for _, c := range b {
			if c == '\t' {
				c = ' '
			}
			out = append(out, c)
		}
	}
	err := scanJSON(data, func(tok jsonToken) error {
		gap(data[last:tok.start])
		last = tok.end
		raw := data[tok.start:tok.end]
		switch tok.kind {
		case '{', '[':
			keys = append(keys, nil)
		case '}', ']':
			keys = keys[:len(keys)-1]
		case ':':
			if tok.start == movedColon {
				out = append(out, ' ')
				return nil
			}
		case '"':
			out = appendYAMLString(out, raw)
			return nil
		case 'k':
			name := jsonStringValue(raw)
			top := &keys[len(keys)-1]
			if *top == nil {
				*top = map[string]bool{}
			}
			if (*top)[name] {
				return fmt.Errorf("%w: line %d: key %s appears twice in one object", errNoYAMLForm, tok.line, strconv.Quote(name))
			}
			(*top)[name] = true
			start := len(out)
			out = appendYAMLString(out, raw)
			if utf8.RuneCount(out[start:]) > maxYAMLKey {
				return fmt.Errorf("%w: line %d: a key of more than %d characters", errNoYAMLForm, tok.line, maxYAMLKey)
			}
			if colon := skipJSONSpace(data, tok.end); bytes.ContainsAny(data[tok.end:colon], "\r\n") {
				out = append(out, ':')
				movedColon = colon
			}
			return nil
		}
		out = append(out, raw...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	gap(data[last:])
	return out, nil
}

// appendYAMLString appends the JSON string token tok (quotes included) as a
// YAML double-quoted scalar of the same value: see yamlForm. What YAML reads
// alike (the other escapes, printable characters) is copied as it is.
func appendYAMLString(out, tok []byte) []byte {
	s := tok[1 : len(tok)-1]
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '/':
			out = append(out, '/')
			i += 2
		case c == '\\' && i+5 < len(s) && s[i+1] == 'u':
			r := hex4(s[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				out = append(out, s[i:i+6]...)
				i += 6
				break
			}
			// As encoding/json: a high surrogate escape followed by a low
			// one is one character; any other surrogate is U+FFFD.
			if i+11 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if dec := utf16.DecodeRune(r, hex4(s[i+8:i+12])); dec != unicode.ReplacementChar {
					out = fmt.Appendf(out, `\U%08X`, dec)
					i += 12
					break
				}
			}
			out = append(out, `\uFFFD`...)
			i += 6
		case c == '\\' && i+1 < len(s):
			out = append(out, c, s[i+1]) // \" \\ \b \f \n \r \t: YAML reads them alike
			i += 2
		case c == 0x7f:
			out = append(out, `\x7F`...)
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				out = append(out, `\uFFFD`...) // as encoding/json reads a byte that is not UTF-8
			} else if yamlRefuses(r) {
				out = fmt.Appendf(out, `\u%04X`, r)
			} else {
				out = append(out, s[i:i+n]...)
			}
			i += n
		}
	}
	return append(out, '"')
}

// yamlRefuses reports whether yaml.v3 refuses the non-ASCII character r raw
// in a quoted scalar, or reads it as a line break.
func yamlRefuses(r rune) bool {
	return r < 0xA0 || r == 0x2028 || r == 0x2029 || r == 0xFEFF || r == 0xFFFE || r == 0xFFFF
}

// hex4 reads four hex digits; -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Strings holds every string of a document's source, keys too, as decoded,
// with the lines it stands on: what the audit reads to name the line a text
// it flags comes from. Only the audit asks for it (LoadOptions.IncludeOrigin).
type Strings struct {
	lines map[string][]int
	keys  map[string][]int // the lines on which it is an object's key
}

// Lines returns the lines, in order, on which the source holds the string s
// (a whole JSON string or YAML scalar, not a part of one); none when it
// holds no such string.
func (s *Strings) Lines(text string) []int {
	if s == nil {
		return nil
	}
	return s.lines[text]
}

// KeyLines returns the lines, in order, on which the source holds the string
// as a key of an object (a property's name, rather than an entry of a
// required list).
func (s *Strings) KeyLines(text string) []int {
	if s == nil {
		return nil
	}
	return s.keys[text]
}

// Each calls f with every distinct string of the source and its lines, in
// no particular order.
func (s *Strings) Each(f func(text string, lines []int)) {
	if s == nil {
		return
	}
	for text, lines := range s.lines {
		f(text, lines)
	}
}

func (s *Strings) add(text string, line int, key bool) {
	appendLine(s.lines, text, line)
	if key {
		appendLine(s.keys, text, line)
	}
}

func appendLine(m map[string][]int, text string, line int) {
	ls := m[text]
	if n := len(ls); n == 0 || ls[n-1] != line {
		m[text] = append(ls, line)
	}
}

// sourceStrings indexes the strings of data: a JSON text when isJSON (lines
// as scanJSON counts them, which is how YAML counts them), else YAML.
func sourceStrings(data []byte, isJSON bool) (*Strings, error) {
	s := &Strings{lines: map[string][]int{}, keys: map[string][]int{}}
	if isJSON {
		err := scanJSON(data, func(tok jsonToken) error {
			if tok.kind == '"' || tok.kind == 'k' {
				s.add(jsonStringValue(data[tok.start:tok.end]), tok.line, tok.kind == 'k')
			}
			return nil
		})
		return s, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	var walk func(n *yaml.Node, key bool)
	walk = func(n *yaml.Node, key bool) {
		switch n.Kind {
		case yaml.ScalarNode:
			if n.ShortTag() == "!!str" {
				s.add(n.Value, n.Line, key)
			}
		case yaml.DocumentNode, yaml.MappingNode, yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, n.Kind == yaml.MappingNode && i%2 == 0)
			}
		}
		// An alias stands where its anchor's value is already indexed.
	}
	walk(&root, false)
	return s, nil
}
