package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/oasdiff/yaml"
	yamlv3 "gopkg.in/yaml.v3"
)

// checkYAMLForm checks yamlForm on doc, a JSON text: either it says there is
// no YAML form (errNoYAMLForm), or YAML — read as kin-openapi reads it —
// reads the form as encoding/json reads doc, with every scalar on the line
// it has in doc.
func checkYAMLForm(t *testing.T, doc []byte) {
	t.Helper()
	var want any
	if json.Unmarshal(doc, &want) != nil {
		return
	}
	form, err := yamlForm(doc)
	if err != nil {
		if !errors.Is(err, errNoYAMLForm) {
			t.Fatalf("yamlForm(%q): %v", doc, err)
		}
		return
	}
	src := append(bytes.Clone(form), "\n# mcpgate: read as YAML for line numbers\n"...)
	var got any
	if _, err := yaml.Unmarshal(src, &got, yaml.DecodeOpts{Origin: yaml.OriginOpt{Enabled: true}, DisableTimestamps: true}); err != nil {
		t.Fatalf("YAML refuses the form of %q: %v\nform: %q", doc, err, form)
	}
	dropOrigins(got)
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("YAML reads the form of %q differently\n json: %#v\n yaml: %#v\n form: %q", doc, want, got, form)
	}
	var jsonLines []int
	if err := scanJSON(doc, func(tok jsonToken) error {
		if tok.kind == '"' || tok.kind == 'k' || tok.kind == 'v' {
			jsonLines = append(jsonLines, tok.line)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(src, &root); err != nil {
		t.Fatalf("yaml.v3: %v", err)
	}
	var yamlLines []int
	var walk func(n *yamlv3.Node)
	walk = func(n *yamlv3.Node) {
		if n.Kind == yamlv3.ScalarNode {
			yamlLines = append(yamlLines, n.Line)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	if !slices.Equal(jsonLines, yamlLines) {
		t.Fatalf("lines of %q moved\n json: %v\n yaml: %v\n form: %q", doc, jsonLines, yamlLines, form)
	}
}

// dropOrigins removes the __origin__ entries kin-openapi's YAML reader adds.
func dropOrigins(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "__origin__")
		for _, e := range x {
			dropOrigins(e)
		}
	case []any:
		for _, e := range x {
			dropOrigins(e)
		}
	}
}

// TestYAMLForm: every JSON escape, and each thing YAML reads otherwise than
// JSON, keeps its value and its line in the YAML form.
func TestYAMLForm(t *testing.T) {
	docs := []string{
		`{"a":"\ud83d\ude80"}`, // Python's json.dumps
		`{"a":"🚀 \u00e9 é 日本"}`,
		`{"a":"https:\/\/api.example.com\/v1"}`, // PHP's json_encode
		`{"a":"\ud800", "b":"x\udc00y", "c":"\ude80\ud83d", "d":"\ud83d\u0041", "e":"\ud83d\ud83d\ude80"}`,
		`{"a":"\"\\\/\b\f\n\r\t\u0000\u001f\u007f\u0085\u2028\ufeff\uffff"}`,
		"{\"a\":\"x\u0085y\u2028z\u2029w\"}",           // raw NEL, LS, PS: line breaks to YAML
		"{\"a\":\"x\x7fy\u0080z\ufeffw\uffff\ufffe\"}", // raw DEL, C1, BOM, noncharacters
		"\t{\t\"a\":\t[1,\t2]\t}\t",
		"{\"a\"\n:\n1, \"b\"\r\n\t:2, \"c\"\r:3}",
		`{"a":1e5,"b":-0,"c":12345678901234567890123,"d":1.5E-3,"e":true,"f":null,"g":[],"h":{}}`,
		`{"? a":"- b", "c": "#d", "e":": f", "&x": "*x", "!t": "%y", "<<": {"z": 1}}`,
		"{\"\\ud83d\\ude80\":\n  {\"k\\/\":\n    [\"\\ud83d\\ude80\", \"\\/\"]}}",
		`[{"a":"x"},"y",1,[{"b":"\/"}]]`,
		`"\ud83d\ude80"`,
		"{\"a\": \"x\"}\r\n",
	}
	for _, doc := range docs {
		checkYAMLForm(t, []byte(doc))
	}
	for _, doc := range []string{`{"a":1,"a":2}`, `{"a":{"\u0062":1,"b":2}}`, `{"` + strings.Repeat("k", 1001) + `":1}`} {
		if _, err := yamlForm([]byte(doc)); !errors.Is(err, errNoYAMLForm) {
			t.Errorf("yamlForm(%.40q): %v, want errNoYAMLForm", doc, err)
		}
	}
}

// FuzzYAMLForm checks yamlForm (see checkYAMLForm) on the input when it is a
// JSON text, else on a JSON document generated from it: nested objects and
// arrays, keys that repeat or whose colon is on another line, strings with
// every escape (surrogate pairs, lone and reversed surrogates, "\/") and the
// raw characters YAML reads otherwise, tabs and every line ending between
// tokens.
func FuzzYAMLForm(f *testing.F) {
	for _, seed := range []string{
		`{"openapi":"3.0.3","info":{"title":"Rocket \ud83d\ude80","version":"1"}}`,
		`{"a":"https:\/\/x"}`,
		"{\"a\"\n:1}",
		"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
		"\x10\x21\x32\x43\x54\x65\x76\x87\x98\xa9\xba\xcb\xdc\xed\xfe",
		"\x00\x00\x08\x08\x08\x11\x11\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		doc := in
		if !json.Valid(in) {
			g := &jsonGen{in: in}
			g.value(0)
			doc = g.out.Bytes()
			if !json.Valid(doc) {
				t.Fatalf("generated an invalid document: %q", doc)
			}
		}
		if bytes.Contains(doc, []byte("__origin__")) {
			return // the key kin-openapi's YAML reader adds
		}
		checkYAMLForm(t, doc)
	})
}

// jsonGen writes a JSON document, each choice taken from the next byte of
// in (0 once in is used up).
type jsonGen struct {
	in   []byte
	out  bytes.Buffer
	keys []string
}

func (g *jsonGen) next() int {
	if len(g.in) == 0 {
		return 0
	}
	c := g.in[0]
	g.in = g.in[1:]
	return int(c)
}

var (
	genSpace = []string{"", " ", "\t", "\n", "\r\n", "\r", "\n\t  ", " \r\n\t"}
	genChars = []string{
		"a", "Z", "0", " ", "#", ": ", "- ", "{", "[", "&a", "*a", "!t", "%", "@", "`", "'", "?", "|", ">",
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0000`, `\u001f`, `\u00e9`, `\u2028`, `\ufeff`,
		`\ud83d\ude80`, `\ud800`, `\udc00`, `\ude80\ud83d`, `\ud83d\u0041`, `\uD83D\uDE80`, `\uffff`,
		"é", "日", "🚀", "\u0085", "\u2028", "\u2029", "\ufeff", "\x7f", "\u0080", "\u009f", "\uffff", "\ufffe", "\u200b", "\u202e",
	}
	genNumbers = []string{"0", "-0", "1", "-12", "1.5", "1e5", "1E-3", "-2.5e+10", "12345678901234567890123", "0.1"}
)

func (g *jsonGen) space() { g.out.WriteString(genSpace[g.next()%len(genSpace)]) }

func (g *jsonGen) str() string {
	var b strings.Builder
	b.WriteByte('"')
	for n := g.next() % 10; n > 0; n-- {
		b.WriteString(genChars[g.next()%len(genChars)])
	}
	b.WriteByte('"')
	return b.String()
}

func (g *jsonGen) value(depth int) {
	g.space()
	kind := g.next() % 8
	if depth >= 5 && kind < 2 {
		kind += 2
	}
	switch kind {
	case 0:
		g.out.WriteByte('{')
		for i, n := 0, g.next()%5; i < n; i++ {
			if i > 0 {
				g.out.WriteByte(',')
			}
			g.space()
			key := g.str()
			if c := g.next(); c%7 == 0 && len(g.keys) > 0 {
				key = g.keys[c%len(g.keys)] // a key that may repeat
			}
			g.keys = append(g.keys, key)
			g.out.WriteString(key)
			g.space()
			g.out.WriteByte(':')
			g.value(depth + 1)
		}
		g.space()
		g.out.WriteByte('}')
	case 1:
		g.out.WriteByte('[')
		for i, n := 0, g.next()%5; i < n; i++ {
			if i > 0 {
				g.out.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.space()
		g.out.WriteByte(']')
	case 2, 3, 4:
		g.out.WriteString(g.str())
	case 5:
		g.out.WriteString(genNumbers[g.next()%len(genNumbers)])
	default:
		g.out.WriteString([]string{"true", "false", "null"}[g.next()%3])
	}
	g.space()
}

// TestLinesWithEscapes: a JSON document that writes astral characters as
// surrogate-pair escapes (Python's json.dumps), URLs with "\/" (PHP's
// json_encode) and a key whose colon is on the next line loads with its
// lines, its texts decoded as without them.
func TestLinesWithEscapes(t *testing.T) {
	doc := `{"openapi": "3.0.3",
 "info": {"title": "Rocket \ud83d\ude80", "version": "1"},
 "servers": [{"url": "https:\/\/api.example.com\/v1"}],
 "paths": {
  "/launch": {
   "post": {"operationId": "launch", "summary": "Launch \ud83d\ude80\u2028now \ud800",
    "description"
      : "Counts down\u0085then launches.",
    "responses": {"200": {"description": "ok"}}}}}}`
	plain, err := ParseDocument(context.Background(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	lined, err := parseDocument(context.Background(), []byte(doc), true)
	if err != nil {
		t.Fatalf("with lines: %v", err)
	}
	if len(lined.Warnings) > 0 {
		t.Errorf("warnings: %q", lined.Warnings)
	}
	op, want := lined.T.Paths.Value("/launch").Post, plain.T.Paths.Value("/launch").Post
	if op.Summary != want.Summary || op.Description != want.Description || lined.T.Servers[0].URL != "https://api.example.com/v1" {
		t.Errorf("texts differ: %q / %q, want %q / %q", op.Summary, op.Description, want.Summary, want.Description)
	}
	if op.Summary != "Launch 🚀\u2028now \ufffd" {
		t.Errorf("summary %q", op.Summary)
	}
	if op.Origin == nil || op.Origin.Key.Line != 6 || op.Origin.Fields.Get("description").Line != 7 {
		t.Errorf("origin %+v, want the operation on line 6, its description on 7", op.Origin)
	}
	if got := lined.Strings.Lines("Launch 🚀\u2028now \ufffd"); !slices.Equal(got, []int{6}) {
		t.Errorf("the summary's lines: %v, want [6]", got)
	}
	if got := lined.Strings.Lines("Counts down\u0085then launches."); !slices.Equal(got, []int{8}) {
		t.Errorf("the description's lines: %v, want [8]", got)
	}
}

// TestLinesUnavailable: a document YAML cannot read as JSON does (a key twice
// in one object, which JSON takes the last of) loads all the same, without
// lines, and says why.
func TestLinesUnavailable(t *testing.T) {
	doc := `{"openapi": "3.0.3", "info": {"title": "t", "version": "1", "title": "T"},
 "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "ok"}}}}}}`
	d, err := parseDocument(context.Background(), []byte(doc), true)
	if err != nil {
		t.Fatal(err)
	}
	if d.T.Info.Title != "T" || d.T.Paths.Value("/a").Get.Origin != nil {
		t.Errorf("title %q, origin %+v: want the last title and no origin", d.T.Info.Title, d.T.Paths.Value("/a").Get.Origin)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], `line numbers unavailable: no YAML form: line 1: key "title" appears twice in one object`) {
		t.Errorf("warnings %q", d.Warnings)
	}
	if got := d.Strings.Lines("ok"); !slices.Equal(got, []int{2}) {
		t.Errorf("strings are still indexed: %v, want [2]", got)
	}
}

// TestSourceStrings: strings (keys too), decoded, with their lines, in JSON
// (every line ending) and YAML.
func TestSourceStrings(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		json      bool
		want      map[string][]int
	}{
		{"json", "{\"a\": \"x\",\r\n \"b\": [\"y\",\r \"x\"],\n \"c\": 1, \"\\u0064\": \"\\ud83d\\ude80\"}", true,
			map[string][]int{"a": {1}, "x": {1, 3}, "y": {2}, "d": {4}, "🚀": {4}, "1": nil}},
		{"yaml", "a: x\nb:\n  - y\n  - x\nc: 1\nd: \"\\U0001F680\"\n", false,
			map[string][]int{"a": {1}, "x": {1, 4}, "y": {3}, "d": {6}, "🚀": {6}, "1": nil}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sourceStrings([]byte(tt.doc), tt.json)
			if err != nil {
				t.Fatal(err)
			}
			for text, want := range tt.want {
				if got := s.Lines(text); !slices.Equal(got, want) {
					t.Errorf("Lines(%q) = %v, want %v", text, got, want)
				}
			}
			if got, want := s.KeyLines("d"), tt.want["d"]; !slices.Equal(got, want) || s.KeyLines("x") != nil {
				t.Errorf("KeyLines(d) = %v, want %v; KeyLines(x) = %v, want none", got, want, s.KeyLines("x"))
			}
		})
	}
}

// TestCorpusYAMLForm: every JSON document of the corpus has a YAML form that
// reads the same with the same lines, and loads with its lines.
func TestCorpusYAMLForm(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every corpus document as YAML: not in -short")
	}
	docs, _ := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	if len(docs) == 0 {
		t.Skipf("no corpus at %s: the shared corpus is not beside this clone", corpusDir)
	}
	for _, path := range docs {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkYAMLForm(t, data)
			doc, err := parseDocument(context.Background(), data, true)
			if err != nil {
				t.Skipf("refused: %v", err) // as without lines: TestCorpus (gateway) checks refusals
			}
			for _, w := range doc.Warnings {
				if strings.HasPrefix(w, "line numbers unavailable") {
					t.Error(w)
				}
			}
		})
	}
}
