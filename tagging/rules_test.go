package tagging_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mcpgate/mcpgate/tagging"
)

// rules parses rule texts, failing the test on a malformed one.
func rules(t *testing.T, texts ...string) []tagging.Rule {
	t.Helper()
	var out []tagging.Rule
	for _, s := range texts {
		r, err := tagging.ParseRule(s)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", s, err)
		}
		out = append(out, r)
	}
	return out
}

func TestSelectParseRule(t *testing.T) {
	valid := []struct{ in, want string }{
		{"GET /v1/customers*", "GET /v1/customers*"},
		{"  get   /pets/{petId}  ", "get   /pets/{petId}"},
		{"* /pets/{petId}", "* /pets/{petId}"},
		{"POST *", "POST *"},
		{"DELETE", "DELETE"},
		{"delete", "delete"}, // an operationId, not a method
		{"listPets", "listPets"},
		{"list*", "list*"},
		{"*", "*"},
		{"tag:agent-exposed", "tag:agent-exposed"},
		{"tag:Audit log API", "tag:Audit log API"},
		{"repos/get", "repos/get"},
	}
	for _, tt := range valid {
		r, err := tagging.ParseRule(tt.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		if r.String() != tt.want {
			t.Errorf("ParseRule(%q).String() = %q, want %q", tt.in, r.String(), tt.want)
		}
	}
	malformed := []struct{ in, wantErr string }{
		{"", `rule "": empty`},
		{"   ", `rule "   ": empty`},
		{"FETCH /pets", "FETCH is not an HTTP method"},
		{"GET pets", "the path pets must start with / or *"},
		{"GET /pets extra", "not 3 words"},
		{"tag:", "tag: needs a tag name"},
		{"tag: x", "tag: needs a tag name"},
		{"GET\t/pets\x00", "control character"},
		{"GET /pets\n", ""}, // trailing newline is trimmed: valid
	}
	for _, tt := range malformed {
		_, err := tagging.ParseRule(tt.in)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ParseRule(%q): %v, want valid", tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseRule(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			continue
		}
		if q := fmt.Sprintf("rule %q: ", tt.in); !strings.HasPrefix(err.Error(), q) {
			t.Errorf("ParseRule(%q) error %q does not quote the rule", tt.in, err)
		}
	}
}

func TestSelectRuleMatch(t *testing.T) {
	withID := func(method, path, id string, tags ...string) tagging.Operation {
		return tagging.Operation{Method: method, Path: path, Operation: &openapi3.Operation{OperationID: id, Tags: tags}}
	}
	cust := withID("GET", "/v1/customers", "GetCustomers")
	custID := withID("GET", "/v1/customers/{customer}", "GetCustomersCustomer")
	custDeep := withID("GET", "/v1/customers/{customer}/sources/{id}", "GetCustomersCustomerSourcesId")
	custPost := withID("POST", "/v1/customers", "PostCustomers")
	charges := withID("GET", "/v1/charges", "GetCharges", "charges", "agent-exposed")
	noID := withID("DELETE", "/pets/{petId}", "")
	tests := []struct {
		rule string
		yes  []tagging.Operation
		no   []tagging.Operation
	}{
		{"GET /v1/customers*", []tagging.Operation{cust, custID, custDeep}, []tagging.Operation{custPost, charges}},
		{"GET /v1/customers", []tagging.Operation{cust}, []tagging.Operation{custID, custPost}},
		{"GET /v1/customers/*", []tagging.Operation{custID, custDeep}, []tagging.Operation{cust}},
		{"get /v1/*/{customer}", []tagging.Operation{custID}, []tagging.Operation{cust, custDeep}},
		{"* /v1/customers", []tagging.Operation{cust, custPost}, []tagging.Operation{custID}},
		{"* /pets/{petId}", []tagging.Operation{noID}, []tagging.Operation{cust}},
		{"* /pets/{petid}", nil, []tagging.Operation{noID}}, // case-sensitive
		{"POST *", []tagging.Operation{custPost}, []tagging.Operation{cust, noID}},
		{"* *", []tagging.Operation{cust, custPost, noID}, nil},
		{"GET", []tagging.Operation{cust, charges}, []tagging.Operation{custPost, noID}},
		{"DELETE", []tagging.Operation{noID}, []tagging.Operation{cust}},
		{"GetCustomers", []tagging.Operation{cust}, []tagging.Operation{custID, custPost}},
		{"GetCustomers*", []tagging.Operation{cust, custID, custDeep}, []tagging.Operation{custPost}},
		{"*Sources*", []tagging.Operation{custDeep}, []tagging.Operation{cust}},
		{"*", []tagging.Operation{cust, charges}, []tagging.Operation{noID}}, // no operationId: no match
		{"getcustomers", nil, []tagging.Operation{cust}},
		{"tag:charges", []tagging.Operation{charges}, []tagging.Operation{cust}},
		{"tag:charge*", nil, []tagging.Operation{charges}}, // tags take no globs
	}
	for _, tt := range tests {
		r := rules(t, tt.rule)[0]
		for _, op := range tt.yes {
			if !r.Match(op) {
				t.Errorf("rule %q does not match %s %s (%s), want a match", tt.rule, op.Method, op.Path, op.Operation.OperationID)
			}
		}
		for _, op := range tt.no {
			if r.Match(op) {
				t.Errorf("rule %q matches %s %s (%s), want none", tt.rule, op.Method, op.Path, op.Operation.OperationID)
			}
		}
	}
	var zero tagging.Rule
	if zero.Match(cust) {
		t.Error("the zero Rule matches")
	}
}

// TestSelectIncludeExclude runs include and exclude on selectDoc, whose
// operations are, in order:
//
//	GET /admin stats [admin mcp]; POST /admin reset [admin] x-mcp-exposed:false
//	GET /pets listPets [agent-exposed]; POST /pets createPet [pets]
//	GET /pets/{id} getPet [pets agent-exposed]; PUT putPet x-mcp-exposed:true
//	DELETE deletePet [agent-exposed mcp] x-mcp-exposed:false; PATCH patchPet [mcp]
func TestSelectIncludeExclude(t *testing.T) {
	doc := load(t, selectDoc)
	tests := []struct {
		name             string
		all              bool
		tags             []string
		include, exclude []string
		want             []string
	}{
		{name: "include replaces the tag gate",
			include: []string{"* /pets*"},
			want:    []string{"GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{name: "include ignores expose tags",
			tags: []string{"admin"}, include: []string{"createPet"},
			want: []string{"POST /pets", "PUT /pets/{id}"}},
		{name: "include by method",
			include: []string{"GET"},
			want:    []string{"GET /admin", "GET /pets", "GET /pets/{id}", "PUT /pets/{id}"}},
		{name: "include by tag keeps the gate beside other rules",
			include: []string{"tag:agent-exposed", "patchPet"},
			want:    []string{"GET /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{name: "include matching nothing: only x-mcp-exposed true",
			include: []string{"nope"},
			want:    []string{"PUT /pets/{id}"}},
		{name: "x-mcp-exposed false wins over include",
			include: []string{"* *"},
			want:    []string{"GET /admin", "GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{name: "exclude over the default gate",
			exclude: []string{"GET /pets/*"},
			want:    []string{"GET /pets", "PUT /pets/{id}"}},
		{name: "exclude wins over include",
			include: []string{"* /pets*"}, exclude: []string{"POST", "tag:mcp"},
			want: []string{"GET /pets", "GET /pets/{id}", "PUT /pets/{id}"}},
		{name: "x-mcp-exposed true wins over exclude",
			include: []string{"* /pets*"}, exclude: []string{"putPet"},
			want: []string{"GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
		{name: "all means everything, then exclude; include unread",
			all: true, include: []string{"nope"}, exclude: []string{"* /admin"},
			want: []string{"GET /pets", "POST /pets", "GET /pets/{id}", "PUT /pets/{id}", "PATCH /pets/{id}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &tagging.Options{All: tt.all, ExposeTags: tt.tags, Include: rules(t, tt.include...), Exclude: rules(t, tt.exclude...)}
			if got := keys(tagging.Select(doc, opts)); !slices.Equal(got, tt.want) {
				t.Errorf("Select =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	doc := load(t, selectDoc)
	tests := []struct {
		name             string
		all              bool
		tags             []string
		include, exclude []string
		want             []string // "METHOD path: reason", every operation
	}{
		{name: "default gate",
			want: []string{
				"GET /admin: excluded: no agent-exposed tag",
				"POST /admin: excluded by x-mcp-exposed: false",
				"GET /pets: included by tag agent-exposed",
				"POST /pets: excluded: no agent-exposed tag",
				"GET /pets/{id}: included by tag agent-exposed",
				"PUT /pets/{id}: included by x-mcp-exposed: true",
				"DELETE /pets/{id}: excluded by x-mcp-exposed: false",
				"PATCH /pets/{id}: excluded: no agent-exposed tag",
			}},
		{name: "several gate tags", tags: []string{"pets", "mcp"},
			want: []string{
				"GET /admin: included by tag mcp",
				"POST /admin: excluded by x-mcp-exposed: false",
				"GET /pets: excluded: none of the tags pets, mcp",
				"POST /pets: included by tag pets",
				"GET /pets/{id}: included by tag pets",
				"PUT /pets/{id}: included by x-mcp-exposed: true",
				"DELETE /pets/{id}: excluded by x-mcp-exposed: false",
				"PATCH /pets/{id}: included by tag mcp",
			}},
		{name: "include and exclude", include: []string{"GET /pets*", "tag:mcp"}, exclude: []string{"GET /admin"},
			want: []string{
				"GET /admin: excluded by rule `GET /admin` of upstream petstore",
				"POST /admin: excluded by x-mcp-exposed: false",
				"GET /pets: included by rule `GET /pets*` of upstream petstore",
				"POST /pets: excluded: no include rule of upstream petstore matches",
				"GET /pets/{id}: included by rule `GET /pets*` of upstream petstore",
				"PUT /pets/{id}: included by x-mcp-exposed: true",
				"DELETE /pets/{id}: excluded by x-mcp-exposed: false",
				"PATCH /pets/{id}: included by rule `tag:mcp` of upstream petstore",
			}},
		{name: "all", all: true, exclude: []string{"PATCH"},
			want: []string{
				"GET /admin: included: every operation is exposed (--all, expose_all)",
				"POST /admin: excluded by x-mcp-exposed: false",
				"GET /pets: included: every operation is exposed (--all, expose_all)",
				"POST /pets: included: every operation is exposed (--all, expose_all)",
				"GET /pets/{id}: included: every operation is exposed (--all, expose_all)",
				"PUT /pets/{id}: included by x-mcp-exposed: true",
				"DELETE /pets/{id}: excluded by x-mcp-exposed: false",
				"PATCH /pets/{id}: excluded by rule `PATCH` of upstream petstore",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &tagging.Options{All: tt.all, ExposeTags: tt.tags, Include: rules(t, tt.include...), Exclude: rules(t, tt.exclude...)}
			ds := tagging.Explain(doc, opts)
			var got, selected []string
			for _, d := range ds {
				got = append(got, d.Method+" "+d.Path+": "+d.Reason("petstore"))
				if d.Selected != strings.HasPrefix(d.Reason(""), "included") {
					t.Errorf("%s %s: Selected %v but reason %q", d.Method, d.Path, d.Selected, d.Reason(""))
				}
				if d.Selected {
					selected = append(selected, d.Method+" "+d.Path)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Explain =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if sel := keys(tagging.Select(doc, opts)); !slices.Equal(sel, selected) {
				t.Errorf("Select = %q, but Explain selects %q", sel, selected)
			}
		})
	}
	if d := tagging.Explain(doc, &tagging.Options{Exclude: rules(t, "GET")})[0]; d.Reason("") != "excluded by rule `GET`" {
		t.Errorf("Reason without upstream = %q", d.Reason(""))
	}
}
