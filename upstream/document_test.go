package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseDocumentErrors(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"empty", "", "document is empty"},
		{"whitespace", "  \n", "document is empty"},
		{"not yaml", "{{{:", "not"},
		{"scalar", "42", "not an OpenAPI document: the top level is a number, not a mapping"},
		{"no version", `{"info":{"title":"x"}}`, `neither an "openapi" nor a "swagger"`},
		{"openapi 2.0 string", `{"openapi":"2.0","info":{},"paths":{}}`, `unsupported openapi version "2.0"`},
		{"swagger 1.2", `{"swagger":"1.2"}`, `unsupported swagger version "1.2"`},
		{"external file ref", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"other.yaml#/X"}}}}}}}}}`, "external reference"},
		{"external url ref", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"$ref":"http://169.254.169.254/latest#/x"}}}}}}`, "external reference"},
		{"bad type", `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"parameters":"nope"}}}}`, `"parameters" (in an operation) is a string, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDocument(context.Background(), []byte(tt.doc))
			if err == nil {
				t.Fatal("want error")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestLoadDocumentSources(t *testing.T) {
	yamlDoc := "openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers: [{url: '/v1'}]\npaths: {}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(yamlDoc))
	}))
	defer srv.Close()

	doc, err := LoadDocument(context.Background(), srv.URL+"/specs/openapi.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := doc.ServerURL().String(), srv.URL+"/v1"; got != want {
		t.Errorf("ServerURL = %s, want %s", got, want)
	}
	if _, err := LoadDocument(context.Background(), srv.URL+"/missing", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing URL: %v", err)
	}

	path := filepath.Join(t.TempDir(), "doc.yaml")
	os.WriteFile(path, []byte("\xef\xbb\xbf"+yamlDoc), 0o600)
	doc, err = LoadDocument(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if doc.ServerURL() != nil {
		t.Errorf("relative server of a file has no base; got %v", doc.ServerURL())
	}
	if _, err := LoadDocument(context.Background(), filepath.Join(t.TempDir(), "nope.json"), nil); err == nil {
		t.Error("missing file: want error")
	}
}

// TestLoadDocumentRedirects: a document URL's redirects are followed within
// its origin (scheme, host, port) and nowhere else, whatever client the
// caller gives; a refusal names both URLs; relative server URLs resolve
// against the URL the document came from.
func TestLoadDocumentRedirects(t *testing.T) {
	const doc = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\nservers: [{url: './v1'}]\npaths: {}\n"
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, doc)
	}))
	defer other.Close()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch to := r.URL.Query().Get("to"); {
		case to != "":
			http.Redirect(w, r, to, http.StatusFound)
		case r.URL.Path == "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			io.WriteString(w, doc)
		}
	}))
	defer srv.Close()
	srvURL, _ := url.Parse(srv.URL)
	// The same server by another name: another host, so another origin.
	localhost := "http://localhost:" + srvURL.Port()
	q := url.QueryEscape

	tests := []struct {
		name, src string
		client    *http.Client
		wantBase  string // the resolved server URL, when loading succeeds
		wantErr   []string
	}{
		{"no redirect", srv.URL + "/specs/openapi.yaml", nil, srv.URL + "/specs/v1", nil},
		{"same origin, relative", srv.URL + "/old?to=" + q("/moved/openapi.yaml"), nil, srv.URL + "/moved/v1", nil},
		{"same origin, absolute, host in capitals", srv.URL + "/old?to=" + q(strings.ToUpper(srv.URL)+"/moved/openapi.yaml"), nil, srv.URL + "/moved/v1", nil},
		{"same origin, twice", srv.URL + "/a?to=" + q("/b?to="+q("/c/openapi.yaml")), nil, srv.URL + "/c/v1", nil},
		{"another port", srv.URL + "/old?to=" + q(other.URL+"/openapi.yaml"), nil, "",
			[]string{"redirected from " + srv.URL + "/old?to=", " to " + other.URL + "/openapi.yaml, another origin"}},
		{"another host name", srv.URL + "/old?to=" + q(localhost+"/openapi.yaml"), nil, "",
			[]string{"redirected from " + srv.URL + "/old", " to " + localhost + "/openapi.yaml, another origin"}},
		{"another scheme", srv.URL + "/old?to=" + q("https://"+srvURL.Host+"/openapi.yaml"), nil, "",
			[]string{"to https://" + srvURL.Host + "/openapi.yaml, another origin"}},
		{"same origin, then another", srv.URL + "/a?to=" + q("/b?to="+q(other.URL+"/x.yaml")), nil, "",
			[]string{"redirected from " + srv.URL + "/b?to=", " to " + other.URL + "/x.yaml, another origin"}},
		{"a caller's client that follows anything", srv.URL + "/old?to=" + q(other.URL+"/openapi.yaml"),
			&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}, "",
			[]string{"to " + other.URL + "/openapi.yaml, another origin"}},
		{"a loop within the origin", srv.URL + "/loop", nil, "", []string{"stopped after 10 redirects"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := otherHits.Load()
			d, err := LoadDocument(context.Background(), tt.src, &LoadOptions{Client: tt.client})
			if otherHits.Load() != before {
				t.Error("the other origin was asked for the document")
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := d.ServerURL().String(); got != tt.wantBase {
					t.Errorf("ServerURL = %s, want %s (resolved against the URL read after redirects)", got, tt.wantBase)
				}
				if d.Source != tt.src {
					t.Errorf("Source = %s, want %s as given", d.Source, tt.src)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want the redirect refused")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestServerURLVariables(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(`{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{},
		"servers":[{"url":"https://{region}.example.com/{base}","variables":{"region":{"default":"eu"},"base":{"default":"api"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.ServerURL().String(); got != "https://eu.example.com/api" {
		t.Errorf("ServerURL = %s", got)
	}
	doc.URL, _ = url.Parse("http://h/openapi.json")
	doc.T.Servers = nil
	if got := doc.ServerURL().String(); got != "http://h/" {
		t.Errorf("no servers: ServerURL = %s, want the default server /", got)
	}
}

// TestIDRefs loads a 3.1 document whose $refs name schemas by $id and $anchor
// (the shape of swagger-api's 3.1 petstores), and checks that a $ref to
// anything outside the document is still refused.
func TestIDRefs(t *testing.T) {
	doc := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/pets":{"post":{"operationId":"addPet",
	  "requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Pet"}}}},
	  "responses":{"200":{"description":"ok"}}}}},
	  "components":{"schemas":{
	    "Pet":{"type":"object","properties":{
	      "details":{"$ref":"/schemas/details"},
	      "detailsId":{"$ref":"/schemas/details#details_id"}}},
	    "Details":{"$id":"/schemas/details","type":"object","properties":{
	      "id":{"$anchor":"details_id","type":"integer"}}},
	    "Tag":{"$id":"/schemas/tag","type":"string"}}}}`
	d, err := ParseDocument(context.Background(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	pet := d.T.Components.Schemas["Pet"].Value
	for prop, want := range map[string]string{
		"details":   "#/components/schemas/Details",
		"detailsId": "#/components/schemas/Details/properties/id",
	} {
		if got := pet.Properties[prop].Ref; got != want {
			t.Errorf("%s: $ref = %q, want %q", prop, got, want)
		}
	}
	if pet.Properties["detailsId"].Value.Type.Slice()[0] != "integer" {
		t.Errorf("anchor did not resolve to the integer schema")
	}

	external := strings.Replace(doc, `"/schemas/details"}`, `"https://example.com/evil.json"}`, 1)
	if _, err := ParseDocument(context.Background(), []byte(external)); err == nil || !strings.Contains(err.Error(), "external") {
		t.Errorf("a $ref to another document: %v, want it refused", err)
	}
}
