package tagging_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mcpgate/mcpgate/tagging"
)

const corpus = "../../shared/corpus"

func load(t testing.TB, src string) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(src))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return doc
}

func loadFile(t *testing.T, name string) *openapi3.T {
	t.Helper()
	path := filepath.Join(corpus, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("corpus document %s not available: %v", path, err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return doc
}

// keys renders a selection as "METHOD path" lines, for comparison.
func keys(ops []tagging.Operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.Method+" "+op.Path)
	}
	return out
}

// op writes one operation of a test document.
func op(method, id string, tags []string, extra string) string {
	s := fmt.Sprintf("    %s:\n      operationId: %s\n", method, id)
	if len(tags) > 0 {
		s += fmt.Sprintf("      tags: [%s]\n", strings.Join(tags, ", "))
	}
	s += extra
	s += "      responses: {\"200\": {description: ok}}\n"
	return s
}

const head = "openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths:\n"

var selectDoc = head +
	"  /pets:\n" +
	op("get", "listPets", []string{"agent-exposed"}, "") +
	op("post", "createPet", []string{"pets"}, "") +
	"  /pets/{id}:\n" +
	"    parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n" +
	op("get", "getPet", []string{"pets", "agent-exposed"}, "") +
	op("delete", "deletePet", []string{"agent-exposed", "mcp"}, "      x-mcp-exposed: false\n") +
	op("put", "putPet", nil, "      x-mcp-exposed: true\n") +
	op("patch", "patchPet", []string{"mcp"}, "") +
	"  /admin:\n" +
	op("post", "reset", []string{"admin"}, "      x-mcp-exposed: false\n") +
	op("get", "stats", []string{"admin", "mcp"}, "")

func TestSelect(t *testing.T) {
	doc := load(t, selectDoc)
	tests := []struct {
		name string
		opts *tagging.Options
		want []string
	}{
		{"nil options: default gate", nil,
			[]string{"GET /pets", "GET /pets/{id}", "PUT /pets/{id}"}},
		{"zero options: default gate", &tagging.Options{},
			[]string{"GET /pets", "GET /pets/{id}", "PUT /pets/{id}"}},
		{"explicit default gate", &tagging.Options{ExposeTags: []string{tagging.DefaultExposeTag}},
			[]string{"GET /pets", "GET /pets/{id}", "PUT /pets/{id}"}},
		{"custom gate replaces default", &tagging.Options{ExposeTags: []string{"mcp"}},
			[]string{"GET /admin", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{"several gates", &tagging.Options{ExposeTags: []string{"mcp", "pets"}},
			[]string{"GET /admin", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{"gate matching nothing", &tagging.Options{ExposeTags: []string{"nope"}},
			[]string{"PUT /pets/{id}"}},
		{"gate is case-sensitive", &tagging.Options{ExposeTags: []string{"Agent-Exposed"}},
			[]string{"PUT /pets/{id}"}},
		{"all, but x-mcp-exposed false hides", &tagging.Options{All: true},
			[]string{"GET /admin", "GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{"all with gates", &tagging.Options{All: true, ExposeTags: []string{"mcp"}},
			[]string{"GET /admin", "GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := keys(tagging.Select(doc, tt.opts))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Select =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestSelectFields(t *testing.T) {
	doc := load(t, selectDoc)
	for _, o := range tagging.Select(doc, &tagging.Options{All: true}) {
		item := doc.Paths.Value(o.Path)
		if item == nil {
			t.Fatalf("%s %s: path not in document", o.Method, o.Path)
		}
		if o.PathItem != item {
			t.Errorf("%s %s: PathItem is not the document's", o.Method, o.Path)
		}
		if o.Operation != item.GetOperation(o.Method) {
			t.Errorf("%s %s: Operation is not the document's", o.Method, o.Path)
		}
		if o.Method != strings.ToUpper(o.Method) {
			t.Errorf("Method %q is not upper case", o.Method)
		}
	}
	// Path-level parameters stay reachable through PathItem.
	ops := tagging.Select(doc, nil)
	i := slices.IndexFunc(ops, func(o tagging.Operation) bool { return o.Path == "/pets/{id}" })
	if i < 0 || len(ops[i].PathItem.Parameters) != 1 {
		t.Errorf("GET /pets/{id}: path-level parameters not reachable: %+v", ops)
	}
}

func TestSelectEmpty(t *testing.T) {
	if got := tagging.Select(nil, nil); got != nil {
		t.Errorf("Select(nil) = %v, want nil", got)
	}
	if got := tagging.Select(&openapi3.T{}, &tagging.Options{All: true}); got != nil {
		t.Errorf("Select(no paths) = %v, want nil", got)
	}
	doc := load(t, head+"  {}\n")
	if got := tagging.Select(doc, &tagging.Options{All: true}); len(got) != 0 {
		t.Errorf("Select(empty paths) = %v, want none", keys(got))
	}
	// A path without a path item must not panic.
	doc = &openapi3.T{Paths: openapi3.NewPaths(openapi3.WithPath("/nil", nil))}
	if got := tagging.Select(doc, &tagging.Options{All: true}); len(got) != 0 {
		t.Errorf("Select(nil path item) = %v, want none", keys(got))
	}
}

func TestSelectWebhooks(t *testing.T) {
	const doc = `
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      tags: [agent-exposed]
      responses: {"200": {description: ok}}
webhooks:
  newPet:
    post:
      operationId: newPet
      tags: [agent-exposed]
      x-mcp-exposed: true
      responses: {"200": {description: ok}}
  petGone:
    delete:
      operationId: petGone
      responses: {"200": {description: ok}}
`
	d := load(t, doc)
	if len(d.Webhooks) != 2 {
		t.Fatalf("loader read %d webhooks, want 2: the test would prove nothing", len(d.Webhooks))
	}
	for _, opts := range []*tagging.Options{nil, {All: true}} {
		got := keys(tagging.Select(d, opts))
		if want := []string{"GET /pets"}; !slices.Equal(got, want) {
			t.Errorf("Select(%+v) = %q, want %q", opts, got, want)
		}
	}
}

// TestSelectOrder writes one document's paths and methods in several orders:
// the selection is the same, sorted by path then by method in kin-openapi's
// order, and the same on every call.
func TestSelectOrder(t *testing.T) {
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	paths := []string{"/b", "/a/{id}", "/a", "/c/x", "/B", "/a/{id}/z"}
	want := []string{}
	sortedPaths := slices.Clone(paths)
	slices.Sort(sortedPaths)
	for _, p := range sortedPaths {
		for _, m := range methods {
			want = append(want, strings.ToUpper(m)+" "+p)
		}
	}
	build := func(paths, methods []string) string {
		s := head
		for _, p := range paths {
			s += "  " + p + ":\n"
			if strings.Contains(p, "{id}") {
				s += "    parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n"
			}
			for _, m := range methods {
				id := strings.NewReplacer("/", "_", "{", "", "}", "").Replace(m + p)
				s += op(m, id, []string{"agent-exposed"}, "")
			}
		}
		return s
	}
	reversed := func(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }
	rotated := func(s []string, n int) []string { return append(slices.Clone(s[n:]), s[:n]...) }
	docs := []string{
		build(paths, methods),
		build(reversed(paths), reversed(methods)),
		build(rotated(paths, 2), rotated(methods, 3)),
		build(sortedPaths, rotated(methods, 5)),
	}
	for i, src := range docs {
		doc := load(t, src)
		for run := 0; run < 5; run++ {
			got := keys(tagging.Select(doc, nil))
			if !slices.Equal(got, want) {
				t.Fatalf("document %d, run %d: Select =\n  %q\nwant\n  %q", i, run, got, want)
			}
		}
	}
}

func TestSelectCorpus(t *testing.T) {
	t.Run("swagger-petstore-3.0", func(t *testing.T) {
		doc := loadFile(t, "swagger-petstore-3.0.yaml")
		ops := tagging.Select(doc, &tagging.Options{All: true})
		if len(ops) != 19 {
			t.Errorf("Select(All) = %d operations, want 19: %q", len(ops), keys(ops))
		}
		if got := tagging.Select(doc, nil); len(got) != 0 {
			t.Errorf("Select(default gate) = %q, want none: petstore has no agent-exposed tag", keys(got))
		}
		// Every selected operation is named validly and uniquely.
		n := tagging.NewNamer(tagging.StrictNames)
		seen := map[string]bool{}
		for _, o := range ops {
			name, _ := n.Name(o, "")
			if !strictRE.MatchString(name) || seen[name] {
				t.Errorf("%s %s: name %q invalid or repeated", o.Method, o.Path, name)
			}
			seen[name] = true
		}
	})
	t.Run("oai-webhook-example-3.1", func(t *testing.T) {
		doc := loadFile(t, "oai-webhook-example-3.1.json")
		if got := tagging.Select(doc, &tagging.Options{All: true}); len(got) != 0 {
			t.Errorf("Select(All) = %q, want none: webhooks are not tools", keys(got))
		}
	})
}

var (
	strictRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	specRE   = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
)

func styleRE(s tagging.NameStyle) *regexp.Regexp {
	if s == tagging.SpecNames {
		return specRE
	}
	return strictRE
}

// hash8 is the documented suffix: 8 hex digits of the SHA-256 of key.
func hash8(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:8]
}

// mkop builds an Operation; xName, when not nil, is x-mcp-name's value.
func mkop(method, path, id string, xName any) tagging.Operation {
	o := &openapi3.Operation{OperationID: id}
	if xName != nil {
		o.Extensions = map[string]any{"x-mcp-name": xName}
	}
	return tagging.Operation{Method: method, Path: path, Operation: o}
}

// fastAPIID is a real-shaped FastAPI operationId: function name + path with
// \W → "_" + "_" + method; 159 characters.
const fastAPIID = "update_subscription_customer_description_for_subscription_main_api_subscription_customer_descriptions_subscription__subscription_id__customer__customer_id__put"

func TestNamer(t *testing.T) {
	long200 := strings.Repeat("abcdefghij", 20)
	tests := []struct {
		name        string
		style       tagging.NameStyle
		op          tagging.Operation
		rename      string
		want        string
		wantMangled bool
	}{
		{name: "valid operationId kept", op: mkop("GET", "/pets", "listPets", nil), want: "listPets"},
		{name: "dash and underscore kept", op: mkop("GET", "/pets", "list-pets_v2", nil), want: "list-pets_v2"},
		{name: "slash", op: mkop("GET", "/x", "repos/list-for-org", nil), want: "repos_list-for-org", wantMangled: true},
		{name: "dots strict", op: mkop("GET", "/x", "files.get.v2", nil), want: "files_get_v2", wantMangled: true},
		{name: "dots spec", style: tagging.SpecNames, op: mkop("GET", "/x", "files.get.v2", nil), want: "files.get.v2"},
		{name: "spaces", op: mkop("GET", "/x", "get pets by id", nil), want: "get_pets_by_id", wantMangled: true},
		{name: "runs squeezed", op: mkop("GET", "/x", "a//b..c  d__e", nil), want: "a_b_c_d_e", wantMangled: true},
		{name: "runs squeezed spec", style: tagging.SpecNames, op: mkop("GET", "/x", "a//b..c  d__e", nil), want: "a_b..c_d_e", wantMangled: true},
		{name: "trimmed", op: mkop("GET", "/x", "__x__", nil), want: "x", wantMangled: true},
		{name: "trimmed after mapping", op: mkop("GET", "/x", "/repos/{owner}/", nil), want: "repos_owner", wantMangled: true},
		{name: "dashes not trimmed", op: mkop("GET", "/x", "-x-", nil), want: "-x-"},
		{name: "non-ASCII", op: mkop("GET", "/x", "élan_vital", nil), want: "lan_vital", wantMangled: true},
		{name: "CJK", op: mkop("GET", "/x", "数据_export", nil), want: "export", wantMangled: true},
		{name: "only non-ASCII", op: mkop("GET", "/x", "日本語", nil), want: "tool", wantMangled: true},
		{name: "only underscores", op: mkop("GET", "/x", "___", nil), want: "tool", wantMangled: true},
		{name: "method and path", op: mkop("GET", "/pets/{id}", "", nil), want: "get_pets_id", wantMangled: true},
		{name: "method and root path", op: mkop("POST", "/", "", nil), want: "post", wantMangled: true},
		{name: "method and dotted path spec", style: tagging.SpecNames, op: mkop("DELETE", "/v1/files.json", "", nil), want: "delete_v1_files.json", wantMangled: true},
		{name: "x-mcp-name overrides operationId", op: mkop("GET", "/x", "listPets", "pets_list"), want: "pets_list"},
		{name: "x-mcp-name cleaned", op: mkop("GET", "/x", "listPets", "pets.list"), want: "pets_list", wantMangled: true},
		{name: "x-mcp-name without operationId", op: mkop("GET", "/x", "", "pets_list"), want: "pets_list"},
		{name: "empty x-mcp-name ignored", op: mkop("GET", "/x", "listPets", ""), want: "listPets"},
		{name: "non-string x-mcp-name ignored", op: mkop("GET", "/x", "listPets", true), want: "listPets"},
		{name: "rename overrides both", op: mkop("GET", "/x", "listPets", "pets_list"), rename: "all_pets", want: "all_pets"},
		{name: "rename cleaned", op: mkop("GET", "/x", "listPets", nil), rename: "all pets", want: "all_pets", wantMangled: true},
		{name: "exactly 64 kept", op: mkop("GET", "/x", strings.Repeat("a", 64), nil), want: strings.Repeat("a", 64)},
		{name: "exactly 128 kept in spec", style: tagging.SpecNames, op: mkop("GET", "/x", strings.Repeat("a", 128), nil), want: strings.Repeat("a", 128)},
		{name: "65 cut", op: mkop("GET", "/x", strings.Repeat("a", 65), nil),
			want: strings.Repeat("a", 55) + "_" + hash8(strings.Repeat("a", 65)), wantMangled: true},
		{name: "FastAPI 159 strict", op: mkop("PUT", "/x", fastAPIID, nil),
			want: fastAPIID[:55] + "_" + hash8(fastAPIID), wantMangled: true},
		{name: "FastAPI 159 spec", style: tagging.SpecNames, op: mkop("PUT", "/x", fastAPIID, nil),
			want: strings.TrimRight(strings.ReplaceAll(fastAPIID, "__", "_")[:119], "_") + "_" + hash8(fastAPIID), wantMangled: true},
		{name: "200 spec", style: tagging.SpecNames, op: mkop("GET", "/x", long200, nil),
			want: long200[:119] + "_" + hash8(long200), wantMangled: true},
		{name: "long hash of the original, not the cleaned name", op: mkop("GET", "/x", strings.Repeat("a.", 40), nil),
			want: strings.Repeat("a_", 27) + "a_" + hash8(strings.Repeat("a.", 40)), wantMangled: true},
		{name: "cut prefix loses its trailing separators", op: mkop("GET", "/x", strings.Repeat("a", 54)+"-_-"+strings.Repeat("b", 20), nil),
			want: strings.Repeat("a", 54) + "_" + hash8(strings.Repeat("a", 54)+"-_-"+strings.Repeat("b", 20)), wantMangled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tagging.NewNamer(tt.style)
			got, mangled := n.Name(tt.op, tt.rename)
			if got != tt.want || mangled != tt.wantMangled {
				t.Errorf("Name = %q, %v; want %q, %v", got, mangled, tt.want, tt.wantMangled)
			}
			if !styleRE(tt.style).MatchString(got) {
				t.Errorf("Name = %q (len %d) does not match %s", got, len(got), styleRE(tt.style))
			}
		})
	}
}

func TestNamerCollisions(t *testing.T) {
	ops := []tagging.Operation{
		mkop("GET", "/a", "list.items", nil),
		mkop("POST", "/b", "list_items", nil),
		mkop("PUT", "/c", "list items", nil),
		mkop("GET", "/items", "", nil),      // get_items
		mkop("GET", "/d", "get_items", nil), // collides with the one above
		mkop("GET", "/e", "x", nil),
		mkop("GET", "/f", "", "x"), // x-mcp-name collides
	}
	want := []struct {
		name    string
		mangled bool
	}{
		{"list_items", true},
		{"list_items_" + hash8("POST /b"), true},
		{"list_items_" + hash8("PUT /c"), true},
		{"get_items", true},
		{"get_items_" + hash8("GET /d"), true},
		{"x", false},
		{"x_" + hash8("GET /f"), true},
	}
	for _, style := range []tagging.NameStyle{tagging.StrictNames, tagging.SpecNames} {
		var first []string
		for run := 0; run < 3; run++ {
			n := tagging.NewNamer(style)
			var got []string
			seen := map[string]bool{}
			for i, o := range ops {
				name, mangled := n.Name(o, "")
				got = append(got, name)
				if seen[name] {
					t.Errorf("style %d: %q given twice", style, name)
				}
				seen[name] = true
				if !styleRE(style).MatchString(name) {
					t.Errorf("style %d: %q invalid", style, name)
				}
				if style == tagging.StrictNames && (name != want[i].name || mangled != want[i].mangled) {
					t.Errorf("%s %s: Name = %q, %v; want %q, %v", o.Method, o.Path, name, mangled, want[i].name, want[i].mangled)
				}
			}
			if run == 0 {
				first = got
			} else if !slices.Equal(got, first) {
				t.Errorf("style %d run %d: names %q differ from run 0 %q", style, run, got, first)
			}
		}
	}
}

func TestNamerCollisionAtMaxLength(t *testing.T) {
	for _, style := range []tagging.NameStyle{tagging.StrictNames, tagging.SpecNames} {
		max := 64
		if style == tagging.SpecNames {
			max = 128
		}
		n := tagging.NewNamer(style)
		base := strings.Repeat("a", max)
		seen := map[string]bool{}
		for i, id := range []string{base, base + "/", "/" + base, base + "b", base + "c"} {
			name, _ := n.Name(mkop("GET", fmt.Sprintf("/p%d", i), id, nil), "")
			if !styleRE(style).MatchString(name) {
				t.Errorf("style %d: %q (len %d) invalid", style, name, len(name))
			}
			if seen[name] {
				t.Errorf("style %d: %q given twice", style, name)
			}
			seen[name] = true
		}
	}
}

// TestNamerSameOperationTwice covers the loop for a collision of the hashed
// name itself: one method and path named repeatedly.
func TestNamerSameOperationTwice(t *testing.T) {
	n := tagging.NewNamer(tagging.StrictNames)
	o := mkop("GET", "/pets", "listPets", nil)
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		name, mangled := n.Name(o, "")
		if seen[name] {
			t.Fatalf("call %d: %q given twice", i, name)
		}
		seen[name] = true
		if !strictRE.MatchString(name) {
			t.Errorf("call %d: %q invalid", i, name)
		}
		if (i == 0) == mangled {
			t.Errorf("call %d: mangled = %v", i, mangled)
		}
	}
}

// FuzzNamer checks, for any source text: the name matches the style, a Namer
// never gives a name twice, and a fresh Namer gives the same names.
func FuzzNamer(f *testing.F) {
	f.Add("repos/list-for-org", "/repos/{owner}/{repo}", false)
	f.Add("repos/list-for-org", "/orgs/{org}/repos", true)
	f.Add(fastAPIID, "/api/subscription_customer_descriptions/subscription/{subscription_id}", false)
	f.Add(fastAPIID, "/api/x", true)
	f.Add("", "", false)
	f.Add("", "/pets/{id}", true)
	f.Add("数据_export", "/数据", false)
	f.Add("élan.vital", "/ünïcödé", true)
	f.Add("___", "/", false)
	f.Add(strings.Repeat("-", 200), "/"+strings.Repeat(".", 200), true)
	f.Add("\xff\xfe", "/\x00", false)
	f.Fuzz(func(t *testing.T, id, path string, spec bool) {
		style := tagging.StrictNames
		if spec {
			style = tagging.SpecNames
		}
		re := styleRE(style)
		type call struct {
			op     tagging.Operation
			rename string
		}
		calls := []call{
			{mkop("GET", path, id, nil), ""},
			{mkop("POST", path, id+"/", nil), ""},
			{mkop("PUT", path, "", nil), ""},
			{mkop("DELETE", path, "", id), ""},
			{mkop("PATCH", path, "x", nil), id},
			{mkop("HEAD", path, id+strings.Repeat("z", 130), nil), ""},
			{mkop("GET", path, id, nil), ""}, // the same operation again
			{mkop("GET", "/other"+path, "", nil), ""},
		}
		name := func(n *tagging.Namer) []string {
			var out []string
			seen := map[string]bool{}
			for _, c := range calls {
				got, mangled := n.Name(c.op, c.rename)
				if !re.MatchString(got) {
					t.Fatalf("Name(%s %q, id %q, rename %q) = %q (len %d): does not match %s",
						c.op.Method, c.op.Path, c.op.Operation.OperationID, c.rename, got, len(got), re)
				}
				if seen[got] {
					t.Fatalf("Name(%s %q, id %q, rename %q) = %q: given twice", c.op.Method, c.op.Path, c.op.Operation.OperationID, c.rename, got)
				}
				seen[got] = true
				src := c.rename
				if src == "" {
					if v, ok := c.op.Operation.Extensions["x-mcp-name"].(string); ok {
						src = v
					}
				}
				if src == "" {
					src = c.op.Operation.OperationID
				}
				if src == "" {
					src = strings.ToLower(c.op.Method) + "_" + c.op.Path
				}
				if mangled != (got != src) {
					t.Fatalf("Name = %q from %q: mangled = %v", got, src, mangled)
				}
				out = append(out, got)
			}
			return out
		}
		first := name(tagging.NewNamer(style))
		again := name(tagging.NewNamer(style))
		if !slices.Equal(first, again) {
			t.Fatalf("a fresh Namer gave %q, then %q", first, again)
		}
	})
}
