package upstream

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzRequest feeds arbitrary arguments to the request builder. Whatever the
// arguments, it must not panic; a request it builds must stay under the base
// path with exactly the operation's number of segments, and carry no CR or LF
// in any header.
func FuzzRequest(f *testing.F) {
	doc := loadTestDoc(f, "encodings.yaml")
	ops := []string{"getItem", "putItem", "postForm", "upload", "postNote", "postBlob", "postVendor"}
	bindings := make([]*Binding, len(ops))
	for i, op := range ops {
		bindings[i] = bindOp(f, doc, op)
	}
	for _, seed := range []string{
		`{"id__path":"../../admin","tags":["a","b"]}`,
		`{"id__path":"..","filter":{"a":{"b":[1,2]}}}`,
		`{"id__path":"%2e%2e/x","X-Request-Tag":"a\r\nb"}`,
		`{"id":"/etc/passwd","name":"x","children":[{"name":"y"}]}`,
		`{"name":"n","tags":[{"x":1}],"meta":{"k":{"deep":true}}}`,
		`{"title":"t","file":"!!!"}`,
		`{"body":"x"}`,
		`{"body":[1,"2",{"3":4}]}`,
	} {
		for i := range ops {
			f.Add(i, seed)
		}
	}
	base, _ := url.Parse("http://upstream.test/base")
	f.Fuzz(func(t *testing.T, which int, raw string) {
		if which < 0 {
			which = -which
		}
		b := bindings[which%len(bindings)]
		args, err := DecodeArguments(json.RawMessage(raw))
		if err != nil {
			return
		}
		if b.Validate(args) != nil {
			return // Client.Call never builds a request for these
		}
		req, err := b.Request(context.Background(), base, args)
		if err != nil {
			return
		}
		if req.URL.Host != "upstream.test" || req.URL.Scheme != "http" {
			t.Fatalf("request left the upstream: %s", req.URL)
		}
		p := req.URL.EscapedPath()
		if !strings.HasPrefix(p, "/base/") {
			t.Fatalf("path %q escaped the base", p)
		}
		if got, want := strings.Count(p, "/"), strings.Count("/base"+b.Path, "/"); got != want {
			t.Fatalf("path %q has %d segments, template %q has %d", p, got, b.Path, want)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("path %q has a dot segment", p)
			}
		}
		for k, vs := range req.Header {
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n") {
					t.Fatalf("header %s carries CR/LF: %q", k, v)
				}
			}
		}
	})
}
