package catalog

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"
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
