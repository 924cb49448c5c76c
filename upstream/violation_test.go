package upstream

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// violationRows is every schema violation the argument and answer checks
// word, one or more per kind of the validator, with the exact words: each
// says what is allowed and what was sent, never the validator's "keyword:
// got X, want Y". Each row validates {"x": value} against an object whose
// property x has the schema prop.
var violationRows = []struct {
	kind, name, prop, value string
	want                    []string
}{
	{"Type", "integer", `{"type":"integer"}`, `"ten"`, []string{`x: must be an integer, got "ten"`}},
	{"Type", "a fraction for an integer", `{"type":"integer"}`, `1.5`, []string{`x: must be an integer, got 1.5`}},
	{"Type", "several types", `{"type":["string","null"]}`, `5`, []string{`x: must be a string or null, got 5`}},
	{"Type", "an object where a string goes", `{"type":"string"}`, `{"a":1}`, []string{`x: must be a string, got an object`}},
	{"Enum", "enum", `{"enum":["available","pending","sold"]}`, `"gone"`, []string{`x: must be one of "available", "pending", "sold", got "gone"`}},
	{"Enum", "enum of one", `{"enum":["a"]}`, `"b"`, []string{`x: must be "a", got "b"`}},
	{"Enum", "enum of objects", `{"enum":[{"a":1},[1,2]]}`, `3`, []string{`x: must be one of {"a":1}, [1,2], got 3`}},
	{"Const", "const", `{"const":3}`, `4`, []string{`x: must be 3, got 4`}},
	{"Minimum", "minimum", `{"minimum":1}`, `0`, []string{`x: must be at least 1, got 0`}},
	{"Minimum", "minimum beyond float64", `{"minimum":9007199254740993}`, `9007199254740992`, []string{`x: must be at least 9007199254740993, got 9007199254740992`}},
	{"Maximum", "maximum", `{"maximum":100}`, `1000`, []string{`x: must be at most 100, got 1000`}},
	{"ExclusiveMinimum", "exclusiveMinimum (issue 20)", `{"exclusiveMinimum":1}`, `1`, []string{`x: must be greater than 1, got 1`}},
	{"ExclusiveMaximum", "exclusiveMaximum", `{"exclusiveMaximum":10}`, `10.5`, []string{`x: must be less than 10, got 10.5`}},
	{"MultipleOf", "multipleOf", `{"multipleOf":0.5}`, `0.3`, []string{`x: must be a multiple of 0.5, got 0.3`}},
	{"MinLength", "minLength", `{"minLength":3}`, `"ab"`, []string{`x: must be at least 3 characters long, got 2`}},
	{"MaxLength", "maxLength", `{"maxLength":1}`, `"ab"`, []string{`x: must be at most 1 character long, got 2`}},
	{"MinItems", "minItems", `{"minItems":2}`, `[1]`, []string{`x: must have at least 2 items, got 1`}},
	{"MaxItems", "maxItems", `{"maxItems":1}`, `[1,2]`, []string{`x: must have at most 1 item, got 2`}},
	{"MinProperties", "minProperties", `{"minProperties":1}`, `{}`, []string{`x: must have at least 1 property, got 0`}},
	{"MaxProperties", "maxProperties", `{"maxProperties":1}`, `{"a":1,"b":2}`, []string{`x: must have at most 1 property, got 2`}},
	{"Pattern", "pattern", `{"pattern":"^[a-z]+$"}`, `"ABC"`, []string{`x: must match the regular expression "^[a-z]+$", got "ABC"`}},
	{"Pattern", "a long value, cut", `{"pattern":"^a$"}`, `"` + strings.Repeat("b", 100) + `"`, []string{`x: must match the regular expression "^a$", got "` + strings.Repeat("b", 63) + `…`}},
	{"UniqueItems", "uniqueItems", `{"uniqueItems":true}`, `[1,2,1]`, []string{`x: must have unique items, but items 0 and 2 are equal`}},
	{"Required", "required", `{"type":"object","required":["name","id"]}`, `{}`, []string{`x.id: is required, but missing`, `x.name: is required, but missing`}},
	{"DependentRequired", "dependentRequired", `{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, []string{`x.b: is required when "a" is given, but missing`}},
	{"Dependency", "dependencies", `{"dependencies":{"a":["b"]}}`, `{"a":1}`, []string{`x.b: is required when "a" is given, but missing`}},
	{"AdditionalProperties", "additionalProperties", `{"properties":{"a":{},"b":{}},"additionalProperties":false}`, `{"a":1,"c":2}`, []string{`x.c: is not allowed; the properties allowed are "a", "b"`}},
	{"AdditionalProperties", "additionalProperties, in $defs", `{"$ref":"#/$defs/P"}`, `{"zz":1}`, []string{`x.zz: is not allowed; the only property allowed is "a"`}},
	{"AdditionalProperties", "additionalProperties, none", `{"additionalProperties":false}`, `{"zz":1}`, []string{`x.zz: is not allowed; no properties are allowed`}},
	{"AdditionalProperties", "additionalProperties, patterns", `{"properties":{"a":{}},"patternProperties":{"^x-":{}},"additionalProperties":false}`, `{"zz":1}`, []string{`x.zz: is not allowed; the only property allowed is "a", and names matching "^x-"`}},
	{"PropertyNames", "propertyNames", `{"propertyNames":{"maxLength":3}}`, `{"long":1}`, []string{`x: property name "long" is not allowed: the name must be at most 3 characters long, got 4`}},
	{"FalseSchema", "an item past a tuple", `{"prefixItems":[{"type":"string"}],"items":false}`, `["a","b"]`, []string{`x.1: is not allowed: the array takes at most 1 item`}},
	{"FalseSchema", "a forbidden property", `false`, `1`, []string{`x: is not allowed here`}},
	{"Contains", "contains", `{"contains":{"const":"admin"}}`, `["a","b"]`, []string{`x: must contain at least one item that matches its "contains" schema, got none`}},
	{"MinContains", "minContains", `{"contains":{"const":1},"minContains":2}`, `[1,2]`, []string{`x: must contain at least 2 items that match its "contains" schema, got 1`}},
	{"MaxContains", "maxContains", `{"contains":{"const":1},"maxContains":1}`, `[1,1]`, []string{`x: must contain at most 1 item that match its "contains" schema, got 2`}},
	{"Not", "not", `{"not":{"type":"string"}}`, `"a"`, []string{`x: must not match its "not" schema`}},
	{"OneOf", "oneOf, two match", `{"oneOf":[{"type":"integer"},{"minimum":0}]}`, `5`, []string{`x: must match exactly one of its alternatives, but matches alternatives 1 and 2`}},
	{"OneOf", "oneOf of types, none match", `{"oneOf":[{"type":"string"},{"type":"null"}]}`, `5`, []string{`x: must be a string or null, got 5`}},
	{"AnyOf", "anyOf, none match", `{"anyOf":[{"type":"string","minLength":2},{"type":"integer"}]}`, `"a"`,
		[]string{`x: must match one of its alternatives, but matches none: (1) x: must be at least 2 characters long, got 1 (2) x: must be an integer, got "a"`}},
	{"AllOf", "allOf", `{"allOf":[{"minimum":1},{"maximum":3}]}`, `5`, []string{`x: must be at most 3, got 5`}},
}

// violationKinds are the kinds that only group others (their causes are
// worded) or that a decoded value against a compiled schema never yields
// at a leaf; TestViolationWords words the rest by constructing them.
var violationKinds = map[string]string{
	"Group":            "groups its causes",
	"Schema":           "groups its causes",
	"Reference":        "groups its causes",
	"ContentSchema":    "groups its causes (and content is not asserted)",
	"RefCycle":         "a schema that cannot compile: the call is refused before validation",
	"InvalidJsonValue": "arguments are decoded JSON",
}

func TestViolationWords(t *testing.T) {
	covered := map[string]bool{}
	for _, tt := range violationRows {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"type":"object","properties":{"x":` + tt.prop + `},"$defs":{"P":{"type":"object","properties":{"a":{}},"additionalProperties":false}}}`
			v, err := decodeJSON([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			schema := v.(map[string]any)
			sch, err := compileSchema([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			inst, err := decodeJSON([]byte(`{"x":` + tt.value + `}`))
			if err != nil {
				t.Fatal(err)
			}
			verr := sch.Validate(inst)
			if verr == nil {
				t.Fatal("valid; want a violation")
			}
			var ve *jsonschema.ValidationError
			if !errors.As(verr, &ve) || !hasKind(ve, tt.kind) {
				t.Fatalf("the validator found no %s: %v", tt.kind, verr)
			}
			covered[tt.kind] = true
			got := schemaProblems(verr, schema, inst, "(arguments)", 10)
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	// Kinds the validator does not assert with compileSchema's settings
	// (format and content are annotations in 2020-12), worded all the same
	// should a schema turn them on.
	for _, tt := range []struct {
		name string
		k    jsonschema.ErrorKind
		want string
	}{
		{"Format", &kind.Format{Got: "x", Want: "email", Err: errors.New("missing @")}, `x: must be a valid email, got "x" (missing @)`},
		{"ContentEncoding", &kind.ContentEncoding{Want: "base64", Err: errors.New("illegal base64 data at input byte 0")}, `x: must be base64-encoded (illegal base64 data at input byte 0)`},
		{"ContentMediaType", &kind.ContentMediaType{Want: "application/json", Err: errors.New("invalid character")}, `x: must be application/json (invalid character)`},
		{"AdditionalItems", &kind.AdditionalItems{Count: 2}, `x: must have fewer items: remove the last 2`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			covered[tt.name] = true
			e := &jsonschema.ValidationError{SchemaURL: "mcpgate:///tool.json#/properties/x", InstanceLocation: []string{"x"}, ErrorKind: tt.k}
			if got := schemaProblems(e, nil, nil, "(arguments)", 10); len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems\n got %q\nwant %q", got, tt.want)
			}
		})
	}

	// Every kind the validator has is worded here or knowingly left out:
	// a kind added by a new version of the validator fails this test.
	for _, name := range kindTypes(t) {
		if _, ok := violationKinds[name]; !ok && !covered[name] {
			t.Errorf("kind.%s: no row says how it is worded", name)
		}
	}
}

// TestViolationWordsSayWhatIsAllowed: no problem of the table reads as the
// validator's "keyword: got X, want Y", which names a JSON Schema keyword
// and leaves the reader to work out what would pass.
func TestViolationWordsSayWhatIsAllowed(t *testing.T) {
	keywordForm := regexp.MustCompile(`: [a-zA-Z]+: got .*, want `)
	for _, tt := range violationRows {
		for _, w := range tt.want {
			if keywordForm.MatchString(w) || !strings.Contains(w, "must") && !strings.Contains(w, "is required") && !strings.Contains(w, "is not allowed") {
				t.Errorf("%s: %q does not say what is allowed", tt.name, w)
			}
		}
	}
}

func hasKind(e *jsonschema.ValidationError, name string) bool {
	if reflect.TypeOf(e.ErrorKind).Elem().Name() == name {
		return true
	}
	for _, c := range e.Causes {
		if hasKind(c, name) {
			return true
		}
	}
	return false
}

// kindTypes lists the error kinds the validator's kind package declares:
// its exported types with a LocalizedString method.
func kindTypes(t *testing.T) []string {
	t.Helper()
	pkg, err := build.Import(reflect.TypeOf(kind.Type{}).PkgPath(), ".", build.FindOnly)
	if err != nil {
		t.Fatalf("finding the kind package: %v", err)
	}
	files, err := parser.ParseDir(token.NewFileSet(), pkg.Dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range files {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || fn.Name.Name != "LocalizedString" {
					continue
				}
				recv := fn.Recv.List[0].Type
				if st, ok := recv.(*ast.StarExpr); ok {
					recv = st.X
				}
				if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
					names = append(names, id.Name)
				}
			}
		}
	}
	if len(names) < 30 {
		t.Fatalf("found %d kinds in %s; the parse went wrong", len(names), pkg.Dir)
	}
	return names
}
