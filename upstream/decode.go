package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	yaml "gopkg.in/yaml.v3"
)

// DecodeError rewrites an error from decoding JSON or YAML into one line a
// person can act on, in words rather than Go types: it names the key (and,
// for YAML, its line), the kind of value found and the kind wanted — `line
// 3: upstreams[0].max_concurrent is "lots", not an integer`, `"paths" is a
// list, not a mapping`. It reads the errors of encoding/json,
// gopkg.in/yaml.v3 and of kin-openapi's loader, which passes those on as
// text; anything else comes back folded onto one line. data is what was
// decoded: YAML key paths and JSON syntax-error lines are found in it; it
// may be nil.
func DecodeError(data []byte, err error) error {
	if err == nil {
		return nil
	}
	var (
		te  *yaml.TypeError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &te):
		var root yaml.Node
		if yaml.Unmarshal(data, &root) != nil {
			root = yaml.Node{}
		}
		msgs := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			msgs = append(msgs, yamlEntry(&root, m))
		}
		return errors.New(strings.Join(msgs, "; "))
	case errors.As(err, &se):
		msg := strings.TrimPrefix(se.Error(), "json: ")
		if data != nil && se.Offset > 0 && se.Offset <= int64(len(data)) {
			line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
			return fmt.Errorf("not valid JSON: line %d: %s", line, msg)
		}
		return fmt.Errorf("not valid JSON: %s", msg)
	case errors.As(err, &ute):
		// Field is the JSON path of the value (Go 1.24+), empty at the top.
		where := "the top level"
		if ute.Field != "" {
			where = ute.Field
		}
		return fmt.Errorf("%s is %s, not %s", where, valueKind(ute.Value), kindOf(ute.Type))
	}
	return errors.New(decodeText(oneLine(err).Error()))
}

var (
	// kin-openapi tries JSON, then YAML, and reports both; the input is
	// JSON by then, so the JSON half names the problem.
	kinBoth = regexp.MustCompile(`failed to unmarshal data: json error: (.*?), yaml error: .*$`)
	// encoding/json's type errors, as text: "into Go struct field T.f of
	// type X" (encoding/json) or "into field T.f of type X" (kin-openapi).
	jsonTypeText = regexp.MustCompile(`json: cannot unmarshal (\w+)(?: [^ ]+)? into (?:Go struct field|field) (\S+) of type (.+)$`)
	jsonRootText = regexp.MustCompile(`json: cannot unmarshal (\w+)(?: [^ ]+)? into (Go )?value of type (.+)$`)
	yamlLineText = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

	// A key may be empty or hold spaces and, quoted, line breaks: (?s) and .* take it whole.
	yamlUnknown = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type \S+$`)
	// A tag is a core one (!!str, !!map) or the document's own (!mytag).
	// yaml.v3 prints the tag as it was written, unescaped, then a space
	// and the value: a tag may be the bare "!", or hold tabs and spaces
	// anywhere (the fuzzer's "!%20" and "!%200" print "cannot unmarshal
	// !  `` into …" and "! 0 `` into …"). So the tag is what comes before
	// the value, however it reads, taken as short as the rest allows.
	yamlType = regexp.MustCompile("(?s)^line (\\d+): cannot unmarshal (!.*?)(?: `(.*)`)? into (.+)$")
)

// decodeText rewrites a decoder error known only by its text.
func decodeText(msg string) string {
	if m := kinBoth.FindStringSubmatch(msg); m != nil {
		msg = m[1]
	}
	if m := jsonTypeText.FindStringSubmatch(msg); m != nil {
		return typeMismatch(m[2], valueKind(m[1]), kindWords(m[3]))
	}
	if m := jsonRootText.FindStringSubmatch(msg); m != nil {
		if m[2] == "" && strings.Contains(m[3], ".") {
			// Somewhere inside, without a field path (kin-openapi's own
			// decoders): name what was expected, "a schema".
			return fmt.Sprintf("%s is %s, not %s", words(m[3]), valueKind(m[1]), kindWords(m[3]))
		}
		return typeMismatch("", valueKind(m[1]), kindWords(m[3]))
	}
	if m := yamlLineText.FindStringSubmatch(msg); m != nil {
		return "line " + m[1] + ": " + m[2]
	}
	return strings.TrimPrefix(msg, "yaml: ")
}

// typeMismatch says that the value at field is of kind got, not want.
// field is as decoders print it: "Info.title" (kin-openapi: the Go type
// holding the field, then the field), ".a.b" (encoding/json: a JSON path),
// or empty for the top level.
func typeMismatch(field, got, want string) string {
	where := "the top level"
	if field != "" {
		parent, name, ok := strings.Cut(field, ".")
		switch {
		case parent == "": // a JSON path
			where = name
		case !ok:
			where = strconv.Quote(parent)
		case parent == "T": // kin-openapi's document type: the top level
			where = strconv.Quote(name)
		default:
			where = fmt.Sprintf("%q (in %s)", name, words(parent))
		}
	}
	return where + " is " + got + ", not " + want
}

// yamlEntry rewrites one message of a yaml.v3 TypeError, naming the key
// found at its line in root.
func yamlEntry(root *yaml.Node, m string) string {
	if sm := yamlUnknown.FindStringSubmatch(m); sm != nil {
		return fmt.Sprintf("line %s: unknown key %q", sm[1], sm[2])
	}
	sm := yamlType.FindStringSubmatch(m)
	if sm == nil {
		return m
	}
	line, _ := strconv.Atoi(sm[1])
	tag, core := strings.CutPrefix(sm[2], "!!")
	var got string
	switch {
	case sm[3] != "":
		got = strconv.Quote(sm[3])
	case !core:
		got = "a value tagged " + strconv.Quote(strings.TrimSpace(sm[2])) // its own trailing space reads as none
	case tag == "map":
		got = "a mapping"
	case tag == "seq":
		got = "a list"
	case tag == "null":
		got = "empty"
	default:
		got = "a " + tag
	}
	kind := yaml.ScalarNode
	switch tag {
	case "map":
		kind = yaml.MappingNode
	case "seq":
		kind = yaml.SequenceNode
	}
	key := keyAtLine(root, line, kind, "")
	switch {
	case key == "":
		key = "the value"
	case strings.ContainsFunc(key, unicode.IsControl):
		// A quoted key may hold a line break: the message stays one line.
		key = strconv.Quote(key)
	}
	return fmt.Sprintf("line %d: %s is %s, not %s", line, key, got, kindWords(sm[4]))
}

// keyAtLine returns the dotted path of the key whose value, of kind, starts
// on line: yaml.v3 reports a type error at the line of the value, and names
// its kind.
func keyAtLine(n *yaml.Node, line int, kind yaml.Kind, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, line, kind, path); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			// The deepest key wins: in "a: {b: x}" the value x is b's.
			if sub := keyAtLine(v, line, kind, p); sub != "" {
				return sub
			}
			if v.Line == line && v.Kind == kind {
				return p
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if sub := keyAtLine(c, line, kind, fmt.Sprintf("%s[%d]", path, i)); sub != "" {
				return sub
			}
		}
	}
	return ""
}

// valueKind names a JSON value kind as encoding/json reports it ("string",
// "number", "number 1.5", "object", "array", "bool").
func valueKind(v string) string {
	v, _, _ = strings.Cut(v, " ")
	switch v {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	return "a " + v
}

// kindOf names what a Go type accepts, in words.
func kindOf(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t.String() == "time.Duration" {
			return `a duration such as "30s"`
		}
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a value"
}

// kindWords is kindOf for a type known only by its name, as decoders print
// it: "int", "[]string", "map[string]interface {}", "openapi2.Schema".
func kindWords(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "time.Duration":
		return `a duration such as "30s"`
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "interface {}" || goType == "any":
		return "a value"
	}
	switch _, name, _ := strings.Cut(goType, "."); name {
	case "Parameters", "Servers", "Tags", "SecurityRequirements", "SchemaRefs", "Types":
		return "a list" // kin-openapi's named slices
	}
	return "a mapping" // maps and structs: configuration sections, OpenAPI objects
}

// words turns a Go type name into words: "RequestBody" → "a request body".
func words(goType string) string {
	if _, name, ok := strings.Cut(goType, "."); ok {
		goType = name
	}
	var b strings.Builder
	for i, r := range goType {
		if i > 0 && 'A' <= r && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	s := strings.ToLower(b.String())
	switch goType {
	case "Info", "Contact", "License", "Components", "Paths", "ExternalDocs":
		return s // sections a document has once: "in info"
	}
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}
