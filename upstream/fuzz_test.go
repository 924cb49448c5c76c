package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// FuzzRequest feeds arbitrary arguments to the request builder. Whatever the
// arguments, it must not panic; a request it builds must stay under the base
// path with exactly the operation's number of segments, carry no CR or LF
// in any header, no "_method" query parameter, and a query parameter more than
// once only when its own argument is a list.
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
		`{"id__path":"1","limit":5,"point":{"limit":500,"_method":"DELETE"}}`,
		`{"id__path":"1","tags":["a"],"point":{"tags":"b","x":1}}`,
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
		// Query names as a lax server reads them (queryNameKey): none is
		// _method, and one repeats only when its own list argument sent it.
		count := map[string]int{}
		for k, vs := range req.URL.Query() {
			count[queryNameKey(k)] += len(vs)
		}
		for nk, n := range count {
			if nk == "_method" {
				t.Fatalf("query %q carries a method override", req.URL.RawQuery)
			}
			if n < 2 {
				continue
			}
			for _, p := range b.params {
				if _, list := args[p.arg].([]any); p.in == "query" && queryNameKey(p.name) == nk && !list {
					t.Fatalf("query %q sends %s %d times, its argument %s is not a list", req.URL.RawQuery, p.name, n, p.arg)
				}
			}
		}
	})
}

// FuzzPathTemplate varies the path template as well as the values: non-ASCII
// and reserved literals, spaces, placeholders glued to literals ({a}.{b}),
// every path style. Whatever Bind accepts, the path sent must, after RFC 3986
// normalisation (unreserved %XX decoded, dot segments removed, §6.2.2 and
// §5.2.4), be unchanged, keep the template's literal prefix and have the
// template's segment count: no argument value can move a request elsewhere.
func FuzzPathTemplate(f *testing.F) {
	for _, seed := range []struct {
		template string
		style    uint8
		v1, v2   string
	}{
		{"/café/{path}", 0, "../../admin", ""},
		{"/with space/{id}/tail", 0, "..", ""},
		{"/files/{a}.{b}", 1, ".", "."},
		{"/{a}{b}", 2, ".", "."},
		{"/x/{a}", 3, "%2e%2E", ""},
		{"/reserved/a:b@c!$&'()*+,;=/{id}", 4, "..;/x", ""},
		{"/q?x=1#f/{a}", 5, "a/b", ""},
		{"/%2e%2e/{a}", 0, "b", ""},
		{"/{a}/{b}/{a}", 0, "..", "."},
	} {
		f.Add(seed.template, seed.style, seed.v1, seed.v2)
	}
	base, _ := url.Parse("http://upstream.test/base")
	styles := []string{"simple", "label", "matrix"}
	f.Fuzz(func(t *testing.T, template string, style uint8, v1, v2 string) {
		if !strings.HasPrefix(template, "/") {
			return
		}
		op := &openapi3.Operation{Responses: openapi3.NewResponses()}
		names := map[string]bool{}
		rest := template
		for {
			i := strings.IndexByte(rest, '{')
			j := strings.IndexByte(rest, '}')
			if i < 0 || j < i {
				break
			}
			name := rest[i+1 : j]
			rest = rest[j+1:]
			if names[name] {
				continue
			}
			names[name] = true
			explode := style&8 != 0
			op.Parameters = append(op.Parameters, &openapi3.ParameterRef{Value: &openapi3.Parameter{
				Name: name, In: openapi3.ParameterInPath, Required: true,
				Style: styles[int(style)%len(styles)], Explode: &explode,
				Schema: &openapi3.SchemaRef{Value: &openapi3.Schema{}},
			}})
			style >>= 1
		}
		b, err := Bind("GET", template, nil, op, nil)
		if err != nil {
			return
		}
		args := map[string]any{}
		i := 0
		for _, p := range b.params {
			switch i++; i {
			case 1:
				args[p.arg] = v1
			case 2:
				args[p.arg] = v2
			default:
				args[p.arg] = []any{v1, v2}
			}
		}
		req, err := b.Request(context.Background(), base, args)
		if err != nil {
			return
		}
		if req.URL.Host != "upstream.test" || req.URL.Scheme != "http" {
			t.Fatalf("request left the upstream: %s", req.URL)
		}
		sent := req.URL.EscapedPath()
		if req.URL.RequestURI() != sent {
			t.Fatalf("request URI %q is not the path %q", req.URL.RequestURI(), sent)
		}
		prefix := "/base" + escapeLiteral(template[:strings.IndexByte(template+"{", '{')])
		if !strings.HasPrefix(sent, prefix) {
			t.Fatalf("path %q lost the template's literal prefix %q", sent, prefix)
		}
		norm := removeDotSegments(decodeUnreserved(sent))
		if norm != decodeUnreserved(sent) {
			t.Fatalf("path %q normalises to %q", sent, norm)
		}
		if got, want := strings.Count(norm, "/"), strings.Count("/base"+literals(template), "/"); got != want {
			t.Fatalf("path %q has %d segments, template %q has %d", sent, got, template, want)
		}
	})
}

// literals returns template without its {placeholders}.
func literals(template string) string {
	var sb strings.Builder
	for {
		i := strings.IndexByte(template, '{')
		if i < 0 {
			return sb.String() + template
		}
		sb.WriteString(template[:i])
		j := strings.IndexByte(template[i:], '}')
		if j < 0 {
			return sb.String()
		}
		template = template[i+j+1:]
	}
}

// decodeUnreserved decodes the %XX escapes of unreserved characters, as
// RFC 3986 §6.2.2.2 normalisation (and nginx, Envoy) does.
func decodeUnreserved(p string) string {
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			c := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(c) {
				sb.WriteByte(c)
				i += 2
				continue
			}
		}
		sb.WriteByte(p[i])
	}
	return sb.String()
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// removeDotSegments is RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	var out []string
	for _, seg := range strings.Split(in, "/") {
		switch seg {
		case ".":
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	res := strings.Join(out, "/")
	if s := strings.Split(in, "/"); len(s) > 0 && (s[len(s)-1] == "." || s[len(s)-1] == "..") {
		res += "/"
	}
	return res
}

// FuzzDegrade binds an operation built around fuzzed component schemas at a
// fuzzed size budget and at the budgets where a step's choice turns, and checks what the size-bounded conversion rests on:
// the input schema and its note are what the budget steps give taken one by
// one, each converted whole (stepsWhole); an output schema is left out as
// too large only when, converted whole, it is; and binding leaves the parsed
// document as it was.
func FuzzDegrade(f *testing.F) {
	long := strings.Repeat("A sentence about this field. ", 8)
	chain := `{"L1":{"type":"object","description":"One. ` + long + `","properties":{"name":{"type":"string","description":"` + long + `"},"next":{"$ref":"#/components/schemas/L2"}}},` +
		`"L2":{"type":"object","description":"Two. ` + long + `","properties":{"next":{"$ref":"#/components/schemas/L3"},"back":{"$ref":"#/components/schemas/L1"}}},` +
		`"L3":{"type":"array","items":{"$ref":"#/components/schemas/L1"},"prefixItems":[{"type":"string","description":"` + long + `"}]}}`
	for _, seed := range []struct {
		components, body, param string
		budget                  uint16
	}{
		{chain, `{"$ref":"#/components/schemas/L1"}`, `{"type":"string","description":"` + long + `"}`, 600},
		{chain, `{"type":"object","properties":{"a":{"$ref":"#/components/schemas/L3"},"b":{"allOf":[{"$ref":"#/components/schemas/L2"}]}}}`, `{"$ref":"#/components/schemas/L1"}`, 1500},
		{`{"E":{"type":"object","description":"` + long + `","enum":[{"description":"Keep. This."}],"default":{"description":"Keep. This."}}}`, `{"$ref":"#/components/schemas/E"}`,
			`{"type":"object","description":"` + long + `","enum":[{"description":"Keep. This."}],"default":{"description":"Keep. This."}}`, 100},
		{`{}`, `{"type":"object","additionalProperties":{"type":"string","description":"` + long + `"}}`, `{"type":"integer","description":"` + long + long + `"}`, 200},
		// A component met deep first, then nearer the root: converted again.
		{`{"A":{"type":"object","properties":{"b":{"$ref":"#/components/schemas/B"}}},"B":{"type":"object","properties":{"c":{"$ref":"#/components/schemas/C"}}},` +
			`"C":{"type":"object","properties":{"d":{"$ref":"#/components/schemas/D"}}},"D":{"type":"object","description":"` + strings.Repeat(long, 8) + `","properties":{"e":{"$ref":"#/components/schemas/E"}}},` +
			`"E":{"type":"object","properties":{"f":{"$ref":"#/components/schemas/F"}}},"F":{"type":"object","properties":{"g":{"$ref":"#/components/schemas/G"}}},` +
			`"G":{"type":"object","properties":{"h":{"$ref":"#/components/schemas/H"}}},"H":{"type":"string","description":"` + long + long + `"}}`,
			`{"type":"object","properties":{"a":{"$ref":"#/components/schemas/A"},"z":{"$ref":"#/components/schemas/D"}}}`, `{"type":"string"}`, 900},
		// A tuple in an output schema: loosen drops it.
		{`{}`, `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string","description":"` + long + long + `"}],"items":{"description":"` + long + long + `"}}}}`, `{"type":"string"}`, 300},
	} {
		f.Add(seed.components, seed.body, seed.param, seed.budget)
	}
	f.Fuzz(func(t *testing.T, components, body, param string, budget uint16) {
		for _, s := range []string{components, body, param} {
			if !json.Valid([]byte(s)) || len(s) > 1<<14 {
				return
			}
		}
		data := `{"openapi":"3.1.0","info":{"title":"f","version":"1"},"paths":{"/x/{id}":{"post":{"operationId":"x",` +
			`"parameters":[{"name":"id","in":"path","required":true,"description":"The id. Of the thing.","schema":` + param + `}],` +
			`"requestBody":{"required":true,"content":{"application/json":{"schema":` + body + `}}},` +
			`"responses":{"200":{"description":"ok","content":{"application/json":{"schema":` + body + `}}}}}}},` +
			`"components":{"schemas":` + components + `}}`
		doc, err := ParseDocument(context.Background(), []byte(data))
		if err != nil {
			return
		}
		item := doc.T.Paths.Find("/x/{id}")
		if item == nil || item.Post == nil {
			return
		}
		before, err := json.Marshal(doc.T)
		if err != nil {
			return
		}
		var args []toolArg
		testHookArgs = func(a []toolArg) { args = a }
		defer func() { testHookArgs = nil }()
		full, err := Bind("POST", "/x/{id}", item, item.Post, nil)
		if err != nil {
			return
		}
		// The fuzzed budget, and those where a choice turns.
		whole := newStepsWhole(args, full.InputSchema)
		for _, at := range append(whole.budgets(), int(budget)+1) {
			b, err := Bind("POST", "/x/{id}", item, item.Post, &BindOptions{SchemaBudget: at})
			if err != nil {
				t.Fatalf("bound at %d: %v, unbounded it binds", at, err)
			}
			whole.check(t, b, at)
		}
		if full.OutputSchema != nil {
			n := jsonSize(full.OutputSchema)
			for _, limit := range []int{int(budget) + 1, n, n - 1} {
				if limit < 1 {
					continue
				}
				out, _, tooLarge := outputSchema(item.Post, 0, limit)
				if tooLarge && n <= limit {
					t.Fatalf("a %d-byte output schema was taken as over a limit of %d", n, limit)
				}
				if !tooLarge && fmt.Sprint(out) != fmt.Sprint(full.OutputSchema) {
					t.Fatalf("the bounded output schema differs from the whole one")
				}
			}
		}
		after, _ := json.Marshal(doc.T)
		if string(before) != string(after) {
			t.Fatalf("binding changed the document")
		}
	})
}
