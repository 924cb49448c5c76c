package upstream

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// dropZ is the cleaner of these tests: it removes "Z".
func dropZ(s string) string { return strings.ReplaceAll(s, "Z", "") }

func schemaOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const textSchema = `{"type": "object", "title": "TZ", "description": "DZ",
  "required": ["aZ", "b", "cZ"],
  "properties": {
    "aZ": {"type": "string", "enum": ["xZ", "y"], "default": "xZ", "examples": ["eZ"]},
    "b": {"type": "object", "const": {"kZ": "vZ"}, "properties": {"n~/Z": {"description": "nZ"}}},
    "cZ": {"type": "string"}, "c": {"type": "string", "description": "the clean c"}
  },
  "items": {"title": "iZ"}, "not": {"description": "no"},
  "allOf": [{"description": "0"}, {"description": "1Z"}],
  "$defs": {"D": {"description": "dZ"}}, "patternProperties": {"^Z$": {"description": "pZ"}},
  "pattern": "^Z$", "format": "Z", "$ref": "#/$defs/D"}`

// TestSchemaTexts: every text a client reads, with its pointer, in a fixed
// order; format and pattern are (a client shows them, and a reviewer reads
// them), $ref and pattern names are not.
func TestSchemaTexts(t *testing.T) {
	var got []string
	SchemaTexts(schemaOf(t, textSchema), "/inputSchema", func(p string, name bool, text string) {
		if name {
			text = "name " + text
		}
		got = append(got, p+" = "+text)
	})
	want := []string{
		"/inputSchema/title = TZ", "/inputSchema/description = DZ",
		"/inputSchema/format = Z", "/inputSchema/pattern = ^Z$",
		"/inputSchema/properties/aZ = name aZ", "/inputSchema/properties/aZ/enum/0 = xZ", "/inputSchema/properties/aZ/enum/1 = y",
		"/inputSchema/properties/aZ/default = xZ", "/inputSchema/properties/aZ/examples/0 = eZ",
		"/inputSchema/properties/b = name b", "/inputSchema/properties/b/const/kZ = name kZ", "/inputSchema/properties/b/const/kZ = vZ",
		"/inputSchema/properties/b/properties/n~0~1Z = name n~/Z", "/inputSchema/properties/b/properties/n~0~1Z/description = nZ",
		"/inputSchema/properties/c = name c", "/inputSchema/properties/c/description = the clean c",
		"/inputSchema/properties/cZ = name cZ",
		"/inputSchema/patternProperties/^Z$/description = pZ", "/inputSchema/$defs/D/description = dZ",
		"/inputSchema/items/title = iZ", "/inputSchema/not/description = no",
		"/inputSchema/allOf/0/description = 0", "/inputSchema/allOf/1/description = 1Z",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("texts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCleanSchema: every text is cleaned, a renamed property in required
// too, one whose clean name is taken dropped; an output schema's enum and
// const that would change are left out; the schema given, and the values it
// shares with the document, are never changed.
func TestCleanSchema(t *testing.T) {
	for _, output := range []bool{false, true} {
		s := schemaOf(t, textSchema)
		before, _ := json.Marshal(s)
		got, changed := CleanSchema(s, dropZ, output)
		if after, _ := json.Marshal(s); !changed || string(after) != string(before) {
			t.Fatalf("output %v: changed %v; the schema given changed: %s", output, changed, after)
		}
		wantJSON := `{"type": "object", "title": "T", "description": "D",
		  "required": ["a", "b"],
		  "properties": {
		    "a": {"type": "string", "enum": ["x", "y"], "default": "x", "examples": ["e"]},
		    "b": {"type": "object", "const": {"k": "v"}, "properties": {"n~/": {"description": "n"}}},
		    "c": {"type": "string", "description": "the clean c"}
		  },
		  "items": {"title": "i"}, "not": {"description": "no"},
		  "allOf": [{"description": "0"}, {"description": "1"}],
		  "$defs": {"D": {"description": "d"}}, "patternProperties": {"^Z$": {"description": "p"}},
		  "format": "", "$ref": "#/$defs/D"}`
		// A pattern that would change is left out: cleaned, it would match
		// other strings (the gateway checks calls against the document's).
		want := schemaOf(t, wantJSON)
		if output {
			props := want["properties"].(map[string]any)
			delete(props["a"].(map[string]any), "enum")
			delete(props["b"].(map[string]any), "const")
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("output %v:\n got %s\nwant %s", output, g, w)
		}
	}
	clean := schemaOf(t, `{"type": "object", "properties": {"a": {"enum": ["x"]}}}`)
	if got, changed := CleanSchema(clean, dropZ, false); changed || !reflect.DeepEqual(got, clean) {
		t.Errorf("a clean schema: changed %v", changed)
	}
}
