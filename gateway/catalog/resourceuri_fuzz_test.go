package catalog

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpgate/mcpgate/gateway/config"
)

// FuzzResourceURIMatch feeds arbitrary URIs to a template's match: it
// never panics; what it extracts for a path variable never holds '/' as
// the URI wrote it (an encoded one decodes into the value, for the path
// builder to escape again); every value it accepts expands back, through
// RFC 6570 (uritemplate), to a URI the template matches with the same
// values; and a URI it takes is one go-sdk's matcher sends it, unless it
// holds characters go-sdk's stricter regexp refuses.
func FuzzResourceURIMatch(f *testing.F) {
	for _, s := range []string{
		"petstore://pets/12", "petstore://pets/12/photos/3?size=1&fmt=png", "petstore://pets/%2E%2E/photos/1",
		"petstore://pets/a%2Fb/photos/x", "petstore://pets//photos/1", "petstore://pets/1/photos/1?size=1&size=2",
		"petstore://pets/1/photos/1#x", "petstore://pets/%zz/photos/1", "petstore://pets/1/photos/1?fmt=%C3%A9",
	} {
		f.Add(s)
	}
	const text = "petstore://pets/{petId}/photos/{n}{?size,fmt}"
	tmpl, err := parseURITemplate(text)
	if err != nil {
		f.Fatal(err)
	}
	sdk := uritemplate.MustNew(text)
	f.Fuzz(func(t *testing.T, uri string) {
		values, err := tmpl.match(uri)
		if err != nil {
			return
		}
		path, _, _ := strings.Cut(uri, "?")
		for _, name := range []string{"petId", "n"} {
			if values[name] == "" {
				t.Fatalf("%q: path variable %s is empty", uri, name)
			}
		}
		if strings.Count(path, "/") != strings.Count("petstore://pets/x/photos/y", "/") {
			t.Fatalf("%q: a value took a '/' of the path", uri)
		}
		vals := uritemplate.Values{}
		for k, v := range values {
			if strings.ContainsFunc(v, func(r rune) bool { return r >= utf8.RuneSelf || r < ' ' || r == 0x7f }) {
				// uritemplate encodes a rune, not its UTF-8 bytes (é is
				// %E9), and drops control characters: no oracle for them.
				return
			}
			vals.Set(k, uritemplate.String(v))
		}
		again, err := sdk.Expand(vals)
		if err != nil {
			t.Fatalf("%q: expand %v: %v", uri, values, err)
		}
		back, err := tmpl.match(again)
		if err != nil {
			t.Fatalf("%q: extracted %v, expanded to %q, which does not match: %v", uri, values, again, err)
		}
		for k, v := range values {
			if back[k] != v {
				t.Fatalf("%q: %s is %q, but %q after a round trip through %q", uri, k, v, back[k], again)
			}
		}
		if !sdk.Regexp().MatchString(again) {
			t.Fatalf("go-sdk's matcher does not send %q (expanded from %q) to the template", again, uri)
		}
		if _, err := url.Parse(again); err != nil {
			t.Fatalf("%q expands to %q, not a URI: %v", uri, again, err)
		}
	})
}

// FuzzResourceRequest takes arbitrary read URIs through a resource's
// Arguments and its binding's validation and request builder, as a read
// does: whatever passes is one request under the base path, with the
// template's segments, none of them '.' or '..' however encoded, and no
// query parameter but the template's.
func FuzzResourceRequest(f *testing.F) {
	for _, s := range []string{
		"petstore://pets/1/photos/2", "petstore://pets/%2E%2E/photos/1", "petstore://pets/a%2Fb/photos/x?size=3",
		"petstore://pets/..%2F..%2Fadmin/photos/1", "petstore://pets/1/photos/%2e?fmt=png&size=1", "petstore://pets/a%5C..%5C/photos/1",
	} {
		f.Add(s)
	}
	doc := `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets/{petId}/photos/{n}:
    get:
      x-mcp-resource: true
      parameters:
        - {name: petId, in: path, required: true, schema: {type: string}}
        - {name: n, in: path, required: true, schema: {type: string}}
        - {name: size, in: query, schema: {type: integer}}
        - {name: fmt, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}
`
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "petstore", OpenAPI: "p.yaml", Document: []byte(doc), BaseURL: "http://127.0.0.1:1/base"}}}
	if err := cfg.Validate(); err != nil {
		f.Fatal(err)
	}
	cat, err := Build(context.Background(), cfg, nil)
	if err != nil || len(cat.Resources) != 1 {
		f.Fatalf("%v, %d resources", err, len(cat.Resources))
	}
	r := cat.Resources[0]
	base, _ := url.Parse("http://127.0.0.1:1/base")
	f.Fuzz(func(t *testing.T, uri string) {
		args, err := r.Arguments(uri)
		if err != nil {
			return
		}
		if r.Binding.Validate(args) != nil {
			return
		}
		req, err := r.Binding.Request(context.Background(), base, args)
		if err != nil {
			return
		}
		segs := strings.Split(req.URL.EscapedPath(), "/")
		if len(segs) != 6 || segs[1] != "base" || segs[2] != "pets" || segs[4] != "photos" {
			t.Fatalf("%q was sent as %s", uri, req.URL.EscapedPath())
		}
		for _, s := range segs[3:] {
			d, _ := url.PathUnescape(s)
			for _, part := range strings.FieldsFunc(d, func(r rune) bool { return r == '/' || r == '\\' }) {
				if part == "." || part == ".." {
					t.Fatalf("%q was sent with a dot segment: %s", uri, req.URL.EscapedPath())
				}
			}
			if d == "." || d == ".." {
				t.Fatalf("%q was sent with a dot segment: %s", uri, req.URL.EscapedPath())
			}
		}
		for k := range req.URL.Query() {
			if k != "size" && k != "fmt" {
				t.Fatalf("%q was sent with query parameter %q", uri, k)
			}
		}
	})
}
