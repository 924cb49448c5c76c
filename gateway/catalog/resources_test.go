package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// resourcesDoc has one operation per way of being chosen, or refused, as a
// resource.
const resourcesDoc = `
openapi: 3.0.3
info: {title: pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      summary: List pets
      tags: [agent-resource]
      parameters:
        - {name: limit, in: query, schema: {type: integer}}
        - {name: offset, in: query, schema: {type: integer}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: array}}}}}
    post:
      operationId: addPet
      x-mcp-resource: true
      responses: {"201": {description: ok}}
  /pets/{petId}:
    get:
      operationId: getPet
      description: One pet.
      x-mcp-resource: true
      parameters:
        - {name: petId, in: path, required: true, schema: {type: integer}}
        - {name: fields, in: query, schema: {type: array, items: {type: string}}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /pets/{petId}/photo:
    get:
      operationId: getPhoto
      x-mcp-resource: {uri: "pets://photo/{petId}", name: photo, mimeType: image/png, description: The pet's photo.}
      parameters:
        - {name: petId, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok, content: {image/png: {}}}}
  /readme:
    get:
      operationId: readme
      responses: {"200": {description: ok, content: {text/markdown: {}}}}
  /secret:
    get:
      operationId: getSecret
      tags: [agent-resource]
      parameters:
        - {name: X-Tenant, in: header, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
  /session:
    get:
      operationId: getSession
      tags: [agent-resource]
      parameters:
        - {name: sid, in: cookie, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
  /search:
    get:
      operationId: search
      x-mcp-resource: true
      requestBody:
        required: true
        content: {application/json: {schema: {type: object}}}
      responses: {"200": {description: ok}}
  /hidden:
    get:
      operationId: hidden
      tags: [agent-resource]
      x-mcp-resource: false
      responses: {"200": {description: ok}}
  /odd:
    get:
      operationId: odd
      x-mcp-resource: "yes"
      responses: {"200": {description: ok}}
`

func buildResourcesCatalog(t *testing.T, rules ...string) *Catalog {
	t.Helper()
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "petstore", OpenAPI: "pets.yaml", Document: []byte(resourcesDoc),
		BaseURL: "http://127.0.0.1:1", Resources: rules}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestResourceSelection: x-mcp-resource (true, an object, false), the
// agent-resource tag and the resources rules each choose; what cannot be
// a resource (not a GET; a required header, cookie or body) is a finding
// and an explain line, not a resource.
func TestResourceSelection(t *testing.T) {
	cat := buildResourcesCatalog(t, "GET /readme")
	type row struct{ uri, name, by, mime string }
	var got []row
	for _, r := range cat.Resources {
		got = append(got, row{r.URI(), r.Name(), r.By, r.MIMEType()})
	}
	want := []row{
		{"petstore://pets{?limit,offset}", "listPets", "tag agent-resource", "application/json"},
		{"petstore://pets/{petId}{?fields}", "getPet", "x-mcp-resource", "application/json"},
		{"pets://photo/{petId}", "photo", "x-mcp-resource", "image/png"},
		{"petstore://readme", "readme", "rule GET /readme", "text/markdown"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resources:\n got %v\nwant %v", got, want)
	}
	if r := cat.Resources[3]; r.Resource == nil || r.Template != nil || r.Resource.Title != "Readme" {
		t.Errorf("readme: %+v, %+v; want a plain resource titled Readme", r.Resource, r.Template)
	}
	if r := cat.Resources[2]; r.Template == nil || r.Template.Description != "The pet's photo." {
		t.Errorf("photo: %+v; want a template with the extension's description", r.Template)
	}

	refused := map[string]string{}
	for _, f := range cat.Skipped {
		if f.Rule == annotations.RuleResourceRefused {
			refused[f.Tool] = f.Message
		}
	}
	for op, why := range map[string]string{
		"POST /pets":   "(by x-mcp-resource) but is not served as one: only GET operations are resources, not POST",
		"GET /secret":  "requires the header parameter X-Tenant",
		"GET /session": "requires the cookie parameter sid",
		"GET /search":  "requires a request body",
	} {
		if !strings.Contains(refused[op], why) {
			t.Errorf("%s: finding %q, want it to say %q", op, refused[op], why)
		}
	}
	if len(refused) != 4 {
		t.Errorf("findings: %v", refused)
	}
	if !strings.Contains(strings.Join(cat.Warnings, "\n"), "GET /odd: x-mcp-resource is string, not a boolean or an object: ignored") {
		t.Errorf("warnings %q lack the wrong-typed x-mcp-resource", cat.Warnings)
	}
	explained := map[string]string{}
	for _, s := range cat.Selection {
		explained[s.Method+" "+s.Path] = s.Resource
	}
	for op, want := range map[string]string{
		"GET /pets/{petId}": "resource petstore://pets/{petId}{?fields} (by x-mcp-resource)",
		"GET /secret":       "not a resource (selected by tag agent-resource): it requires the header parameter X-Tenant, which a resource URI cannot carry",
		"GET /hidden":       "",
		"GET /odd":          "",
	} {
		if explained[op] != want {
			t.Errorf("%s explained %q, want %q", op, explained[op], want)
		}
	}
}

// TestResourceArguments: a read's URI gives the binding's arguments,
// typed as the input schema says, the query's in any order; a URI the
// template does not make, or a query parameter it does not take, is
// ErrResourceURI.
func TestResourceArguments(t *testing.T) {
	cat := buildResourcesCatalog(t)
	byName := map[string]*Resource{}
	for _, r := range cat.Resources {
		byName[r.Name()] = r
	}
	tests := []struct {
		res, uri, want string // want: the arguments' JSON, or "error"
	}{
		{"getPet", "petstore://pets/12", `{"petId":12}`},
		{"getPet", "petstore://pets/12?fields=a,b", `{"fields":["a","b"],"petId":12}`},
		{"getPet", "petstore://pets/x", `{"petId":"x"}`}, // validation refuses it by name
		{"getPet", "petstore://pets/a%2Fb", `{"petId":"a/b"}`},
		{"getPet", "petstore://pets/%2E%2E", `{"petId":".."}`},
		{"getPet", "petstore://pets/", "error"},
		{"getPet", "petstore://pets/1/2", "error"},
		{"getPet", "petstore://pets/1?other=2", "error"},
		{"getPet", "petstore://pets/1?fields=a&fields=b", "error"},
		{"getPet", "petstore://pets/1#frag", "error"},
		{"listPets", "petstore://pets?offset=2&limit=1", `{"limit":1,"offset":2}`},
		{"listPets", "petstore://pets", `{}`},
		{"listPets", "petstore://pets?", `{}`},
		{"photo", "pets://photo/a%20b", `{"petId":"a b"}`},
		{"photo", "petstore://photo/1", "error"},
	}
	for _, tt := range tests {
		args, err := byName[tt.res].Arguments(tt.uri)
		if tt.want == "error" {
			if !errors.Is(err, ErrResourceURI) {
				t.Errorf("%s %s: %v, %v; want ErrResourceURI", tt.res, tt.uri, args, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tt.res, tt.uri, err)
			continue
		}
		raw, _ := json.Marshal(args)
		if string(raw) != tt.want {
			t.Errorf("%s %s: %s, want %s", tt.res, tt.uri, raw, tt.want)
		}
	}
}

// TestResourceURITemplates: the default URI escapes the path's literal
// text and names variables as RFC 6570 allows; an explicit uri must hold
// every path parameter, in the path.
func TestResourceURITemplates(t *testing.T) {
	byParam := map[string]string{"pet-id": "pet_id"}
	if got, want := defaultResourceURI("my api", "/pets/{pet-id}/a b", byParam, []string{"X_q", "limit"}), "my-api://pets/{pet_id}/a%20b{?X_q,limit}"; got != want {
		t.Errorf("defaultResourceURI = %q, want %q", got, want)
	}
	if got := SchemeName("1x+y"); got != "u1x-y" {
		t.Errorf("SchemeName = %q", got)
	}
	for _, bad := range []string{"a://{x}{y}", "a://{?q}/b", "a://{x,y}", "a://{x}/{x}", "a://b?c={x}", "a://{+x}"} {
		if _, err := parseURITemplate(bad); err == nil {
			t.Errorf("parseURITemplate(%q): no error", bad)
		}
	}
	taken := map[string]bool{}
	if a, b := varName("X-Trace", taken), varName("X.Trace", taken); a != "X_Trace" || b != "X_Trace_2" {
		t.Errorf("varName = %q, %q", a, b)
	}
}

// TestResourceListing: `mcpgate tools` (table and JSON), `--explain` and
// `mcpgate audit` (table, Markdown, JSON) list the resources with what
// selected each, and the audit the refused ones as MCPG021 findings.
func TestResourceListing(t *testing.T) {
	cat := buildResourcesCatalog(t, "GET /readme")
	var table, js, explain strings.Builder
	if err := cat.Listing().WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := cat.Listing().WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := cat.ExplainListing().WriteTable(&explain); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, out, want string }{
		{"table", table.String(), "RESOURCE"},
		{"table", table.String(), "petstore://pets/{petId}{?fields}  getPet"},
		{"table", table.String(), "GET /readme"},
		{"table", table.String(), "rule GET /readme"},
		{"table", table.String(), ", 4 resources"},
		{"json", js.String(), `"uriTemplate": "petstore://pets/{petId}{?fields}"`},
		{"json", js.String(), `"selectedBy": "tag agent-resource"`},
		{"json", js.String(), `"uri": "petstore://readme"`},
		{"explain", explain.String(), "; resource petstore://readme (by rule GET /readme)"},
		{"explain", explain.String(), "; not a resource (selected by x-mcp-resource): only GET operations are resources, not POST"},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s lacks %q:\n%s", c.what, c.want, c.out)
		}
	}
	report := annotations.NewReport(cat.Facts(), nil, cat.Skipped...)
	report.Resources = cat.ResourceFacts()
	for format, want := range map[string][]string{
		"table":    {"RESOURCE", "petstore://readme", "petstore GET /readme", "MCPG021 GET /search is selected as a resource (by x-mcp-resource) but is not served as one"},
		"markdown": {"## Resources", "| `petstore://pets{?limit,offset}` | listPets | application/json | `GET /pets` (petstore) | tag agent-resource |"},
		"json":     {`"resources": [`, `"selectedBy": "x-mcp-resource"`, `"rule": "MCPG021"`},
	} {
		var out strings.Builder
		if err := report.Write(&out, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("audit %s lacks %q:\n%s", format, w, out.String())
			}
		}
	}
}
