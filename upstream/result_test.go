package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestResultMapping(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	tests := []struct {
		name, op       string
		status         int
		ctype, body    string
		wantError      bool
		wantText       string // substring of the first text content
		wantStructured string // JSON of structuredContent; "" means none
		wantContent    string // the first content's type
		wantNoContent  bool
		noSchema       bool // bind without an outputSchema
	}{
		{name: "json object", op: "getItem", status: 200, ctype: "application/json", body: `{"name":"a","size":12345678901234567890}`,
			wantText: `"name":"a"`, wantStructured: `{"name":"a","size":12345678901234567890}`, wantContent: "text"},
		{name: "json array wrapped", op: "listThings", status: 200, ctype: "application/json", body: `[{"name":"a"}]`,
			wantStructured: `{"result":[{"name":"a"}]}`, wantContent: "text"},
		{name: "vendor json", op: "getItem", status: 200, ctype: "application/problem+json; charset=utf-8", body: `{"name":"b"}`,
			wantStructured: `{"name":"b"}`, wantContent: "text"},
		{name: "204", op: "putItem", status: 204, wantNoContent: true},
		{name: "text", op: "postNote", status: 200, ctype: "text/plain; charset=utf-8", body: "hi", wantText: "hi", wantContent: "text"},
		{name: "image", op: "getItem", status: 200, ctype: "image/png", body: "\x89PNG", wantContent: "image", noSchema: true},
		{name: "binary", op: "getItem", status: 200, ctype: "application/pdf", body: "%PDF", wantContent: "resource", noSchema: true},
		{name: "404", op: "getItem", status: 404, ctype: "application/json", body: `{"detail":"not found"}`,
			wantError: true, wantText: `HTTP 404 Not Found: {"detail":"not found"}`},
		{name: "409", op: "putItem", status: 409, body: "conflict", wantError: true, wantText: "HTTP 409 Conflict: conflict"},
		{name: "500 long body trimmed", op: "getItem", status: 500, ctype: "text/html", body: strings.Repeat("x", 10000),
			wantError: true, wantText: "HTTP 500"},
		{name: "redirect not followed", op: "getItem", status: 302, body: "", wantError: true, wantText: "HTTP 302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&recorder{status: tt.status, ctype: tt.ctype, body: tt.body})
			defer srv.Close()
			c, _ := NewRemote(srv.URL, nil)
			a := `{"id__path":"1"}`
			switch tt.op {
			case "putItem":
				a = `{"id":"1","name":"n"}`
			case "postNote":
				a = `{"body":"x"}`
			case "listThings":
				a = `{}`
			}
			b := bindOp(t, doc, tt.op)
			if tt.noSchema {
				b = bindWith(t, doc, tt.op, &BindOptions{NoOutputSchema: true})
			}
			res, _ := c.Call(context.Background(), b, args(t, a), Credentials{})
			if res.IsError != tt.wantError {
				t.Fatalf("IsError = %v, content %v", res.IsError, res.Content)
			}
			if tt.wantNoContent {
				if len(res.Content) != 0 || res.StructuredContent != nil {
					t.Fatalf("want no content, got %v / %v", res.Content, res.StructuredContent)
				}
				return
			}
			if len(res.Content) == 0 {
				t.Fatal("no content")
			}
			if tt.wantText != "" {
				tc, ok := res.Content[0].(*mcp.TextContent)
				if !ok || !strings.Contains(tc.Text, tt.wantText) {
					t.Errorf("text = %v, want it to contain %q", res.Content[0], tt.wantText)
				}
				if ok && tt.wantError && len(tc.Text) > maxErrorBody+200 {
					t.Errorf("error text not trimmed: %d bytes", len(tc.Text))
				}
			}
			if tt.wantContent != "" {
				var got string
				switch res.Content[0].(type) {
				case *mcp.TextContent:
					got = "text"
				case *mcp.ImageContent:
					got = "image"
				case *mcp.EmbeddedResource:
					got = "resource"
				}
				if got != tt.wantContent {
					t.Errorf("content type = %s, want %s", got, tt.wantContent)
				}
			}
			var gotStructured string
			if res.StructuredContent != nil {
				raw, _ := json.Marshal(res.StructuredContent)
				gotStructured = string(raw)
			}
			if gotStructured != tt.wantStructured {
				t.Errorf("structuredContent = %s, want %s", gotStructured, tt.wantStructured)
			}
		})
	}
}

func TestTimeoutAndUnreachable(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	b := bindOp(t, doc, "listThings")
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	c, _ := NewRemote(slow.URL, &ClientOptions{Timeout: 50 * time.Millisecond})
	res, rep := c.Call(context.Background(), b, map[string]any{}, Credentials{})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "did not answer within 50ms") {
		t.Errorf("timeout: %v", res.Content[0])
	}
	if rep.Outcome != OutcomeTimeout || !rep.Failed() {
		t.Errorf("timeout report: %+v", rep)
	}

	url := refusedURL(t)
	c, _ = NewRemote(url, nil)
	res, rep = c.Call(context.Background(), b, map[string]any{}, Credentials{})
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || text != "the upstream could not be reached (502 Bad Gateway)" {
		t.Errorf("unreachable: %q", text)
	}
	// The model is not shown what was dialed; the log gets it.
	host := strings.TrimPrefix(url, "http://")
	if rep.Outcome != OutcomeUnreachable || rep.Cause == nil || !strings.Contains(rep.Cause.Error(), host) {
		t.Errorf("unreachable report: %+v, want the cause naming %s", rep, host)
	}
}

func TestInProcess(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	var gotAuth, gotURI string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotURI = r.Header.Get("Authorization"), r.RequestURI
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	c := NewInProcess(h, nil)
	res, _ := c.Call(context.Background(), bindOp(t, doc, "putItem"), args(t, `{"id":"a b","name":"n"}`), Credentials{BearerToken: "in-proc"})
	if res.IsError {
		t.Fatal(res.Content[0].(*mcp.TextContent).Text)
	}
	if gotAuth != "Bearer in-proc" {
		t.Errorf("Authorization = %q", gotAuth)
	}
	if gotURI != "/items/a%20b" {
		t.Errorf("RequestURI = %q", gotURI)
	}

	panicky := NewInProcess(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), nil)
	res, rep := panicky.Call(context.Background(), bindOp(t, doc, "listThings"), map[string]any{}, Credentials{})
	if !res.IsError || strings.Contains(res.Content[0].(*mcp.TextContent).Text, "boom") {
		t.Errorf("panic: %v", res.Content[0])
	}
	if rep.Cause == nil || !strings.Contains(rep.Cause.Error(), "panicked: boom") {
		t.Errorf("panic report: %+v", rep)
	}
}

func TestNewRemoteRejects(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "http://user:pw@host", "::"} {
		if _, err := NewRemote(u, nil); err == nil {
			t.Errorf("NewRemote(%q): want error", u)
		}
	}
}

func TestResponseCap(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	var item *openapi3.PathItem
	for path, it := range doc.Paths.Map() {
		if path == "/lists" {
			item = it
		}
	}
	// Without an outputSchema, as the gateway binds a large tool; with
	// one, a cut body is an error (TestStructuredResults).
	b, err := Bind("GET", "/lists", item, item.Get, &BindOptions{MaxResponseBytes: 100, NoOutputSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&recorder{ctype: "application/json", body: "[" + strings.Repeat(`{"name":"x"},`, 100) + `{"name":"y"}]`})
	defer srv.Close()
	c, _ := NewRemote(srv.URL, nil)
	res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
	if res.IsError {
		t.Fatal(res.Content[0].(*mcp.TextContent).Text)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "[response truncated at 100 bytes]") || res.Meta["mcpgate/truncated"] != true {
		t.Errorf("text %q, meta %v", text, res.Meta)
	}
	if res.StructuredContent != nil {
		t.Errorf("a cut JSON body has no structuredContent")
	}
}

// answer is an upstream that answers every request with status, Content-Type
// ctype (none at all when empty: net/http would sniff one) and body.
func answer(status int, ctype, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = nil
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

func bindWith(t testing.TB, doc *openapi3.T, operationID string, opts *BindOptions) *Binding {
	t.Helper()
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == operationID {
				b, err := Bind(method, path, item, op, opts)
				if err != nil {
					t.Fatalf("Bind %s: %v", operationID, err)
				}
				return b
			}
		}
	}
	t.Fatalf("no operation %q", operationID)
	return nil
}

// advertised compiles a binding's outputSchema on its own, from the JSON a
// client receives in tools/list, to check structuredContent as a client does.
func advertised(t *testing.T, b *Binding) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(b.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("test:///out.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("test:///out.json")
	if err != nil {
		t.Fatalf("advertised outputSchema does not compile: %v", err)
	}
	return s
}

// TestStructuredResults sends every kind of 2xx answer through a real
// upstream to three tools: one whose outputSchema is an object, one whose
// schema is wrapped ({"result": array}), and one without an outputSchema. A
// tool with an outputSchema must answer either structuredContent that
// validates against the schema it advertises, or isError with words that say
// what happened; a tool without one keeps the plain mapping.
func TestStructuredResults(t *testing.T) {
	doc := loadTestDoc(t, "results.yaml")
	object := bindOp(t, doc, "getThing")
	wrapped := bindOp(t, doc, "listThings")
	plain := bindWith(t, doc, "getThing", &BindOptions{NoOutputSchema: true})
	if object.OutputSchema == nil || wrapped.OutputSchema == nil || plain.OutputSchema != nil {
		t.Fatal("test document: want two tools with an outputSchema and one without")
	}
	if _, ok := wrapped.OutputSchema["required"]; ok {
		t.Errorf("the wrapper requires \"result\", so an empty answer cannot conform: %v", wrapped.OutputSchema)
	}
	schemas := map[*Binding]*jsonschema.Schema{object: advertised(t, object), wrapped: advertised(t, wrapped)}

	// 5 MiB of valid JSON: over DefaultMaxResponseBytes (4 MiB).
	big := strings.Repeat("x", 5<<20)
	login := `<!doctype html><html><head><title>Sign in</title></head><body><form action="/login">…</form></body></html>`

	// ok: success, structuredContent checked against the advertised schema;
	// any other string: isError, and the text contains it.
	const ok = ""
	type want struct {
		object, wrapped string
		plain           string // without an outputSchema: "text", "json" (text + structuredContent), "image", "none", "error"
	}
	tests := []struct {
		name         string
		status       int
		ctype        string
		body, arrays string // arrays: the body for the wrapped tool, when it differs
		want         want
	}{
		{name: "good object", ctype: "application/json", body: `{"id":1,"name":"a","tags":["x"]}`, arrays: `[{"id":1,"name":"a"}]`,
			want: want{ok, ok, "json"}},
		{name: "extra and missing fields", ctype: "application/json", body: `{"name":"a","extra":true}`, arrays: `[{"extra":1}]`,
			want: want{ok, ok, "json"}},
		{name: "vendor json", ctype: "application/problem+json; charset=utf-8", body: `{"id":2}`, arrays: `[]`,
			want: want{ok, ok, "json"}},
		{name: "untyped json", body: `{"id":3}`, arrays: `[{"id":3}]`,
			want: want{ok, ok, "json"}},
		{name: "json labelled text/plain", ctype: "text/plain; charset=utf-8", body: `{"id":4}`, arrays: `[{"id":4}]`,
			want: want{ok, ok, "text"}},
		{name: "html login page", ctype: "text/html; charset=utf-8", body: login,
			want: want{"the API answered HTTP 200 with text/html where JSON was declared: <!doctype html>",
				"the API answered HTTP 200 with text/html where JSON was declared", "text"}},
		{name: "plain text", ctype: "text/plain", body: "ok, done",
			want: want{"the API answered HTTP 200 with text/plain where JSON was declared: ok, done",
				"with text/plain where JSON was declared", "text"}},
		{name: "untyped text", body: "ok, done",
			want: want{"with a body that is not JSON and has no Content-Type where JSON was declared: ok, done",
				"with a body that is not JSON and has no Content-Type", "text"}},
		{name: "image", ctype: "image/png", body: "\x89PNG\r\n",
			want: want{"the API answered HTTP 200 with image/png where JSON was declared", "with image/png where JSON was declared", "image"}},
		{name: "empty 200", ctype: "application/json", body: "",
			want: want{ok, ok, "none"}},
		{name: "blank 200", ctype: "application/json", body: " \n",
			want: want{ok, ok, "text"}},
		{name: "204", status: 204,
			want: want{ok, ok, "none"}},
		{name: "201 empty", status: 201,
			want: want{ok, ok, "none"}},
		{name: "json null", ctype: "application/json", body: "null",
			want: want{"the API answered HTTP 200 with JSON null where an object was declared",
				"its answer does not match the API's documented schema: result: must be an array, got null", "text"}},
		{name: "json array for an object", ctype: "application/json", body: `[{"id":1}]`, arrays: `{"id":1}`,
			want: want{"with a JSON array where an object was declared: [{\"id\":1}]",
				"its answer does not match the API's documented schema: result: must be an array, got an object; the answer was: {\"id\":1}", "json"}},
		{name: "json scalar", ctype: "application/json", body: `"done"`,
			want: want{"with a JSON string where an object was declared", "result: must be an array, got \"done\"", "json"}},
		{name: "not conforming", ctype: "application/json", body: `{"id":"seven","name":""}`, arrays: `[{"id":1},{"id":"seven"}]`,
			want: want{`the API answered HTTP 200, but its answer does not match the API's documented schema: id: must be an integer, got "seven"; name: must be at least 1 character long, got 0; the answer was: {"id":"seven","name":""}`,
				`does not match the API's documented schema: result.1.id: must be an integer, got "seven"; the answer was: [{"id":1},{"id":"seven"}]`, "json"}},
		{name: "malformed json", ctype: "application/json", body: `{"id":`,
			want: want{"the API answered HTTP 200 with application/json that is not valid JSON (unexpected EOF): {\"id\":",
				"with application/json that is not valid JSON", "text"}},
		{name: "data after the json", ctype: "application/json", body: `{"id":1} {"id":2}`, arrays: `[] []`,
			want: want{"not valid JSON (data after the JSON value)", "not valid JSON (data after the JSON value)", "text"}},
		{name: "cut at the cap", ctype: "application/json", body: `{"id":1,"name":"` + big + `"}`, arrays: `[{"id":1,"name":"` + big + `"}]`,
			want: want{"the API answered HTTP 200, but its response exceeded 4 MiB and was cut; narrow the request (filter, page or ask for fewer fields); it began: {\"id\":1,\"name\":\"xxx",
				"exceeded 4 MiB and was cut; narrow the request", "text"}},
		{name: "untyped, cut at the cap", body: `[{"id":1,"name":"` + big + `"}]`,
			want: want{"exceeded 4 MiB and was cut", "exceeded 4 MiB and was cut", "text"}},
		{name: "html, cut at the cap", ctype: "text/html", body: "<html>" + big,
			want: want{"with text/html where JSON was declared", "with text/html where JSON was declared", "text"}},
		{name: "404 stays an error", status: 404, ctype: "application/json", body: `{"detail":"no such thing"}`,
			want: want{`upstream returned HTTP 404 Not Found: {"detail":"no such thing"}`, "upstream returned HTTP 404", "error"}},
	}
	for _, tt := range tests {
		for _, v := range []struct {
			name string
			b    *Binding
			want string
		}{{"object", object, tt.want.object}, {"wrapped", wrapped, tt.want.wrapped}, {"no schema", plain, tt.want.plain}} {
			t.Run(tt.name+"/"+v.name, func(t *testing.T) {
				// Parallel: the bindings are shared, and their output
				// validators compiled once, under -race.
				t.Parallel()
				body := tt.body
				if v.b == wrapped && tt.arrays != "" {
					body = tt.arrays
				}
				srv := httptest.NewServer(answer(tt.status, tt.ctype, body))
				defer srv.Close()
				c, _ := NewRemote(srv.URL, nil)
				a := map[string]any{}
				if v.b.Method == "GET" && v.b.Path == "/things/{id}" {
					a = args(t, `{"id":7}`)
				}
				res, _ := c.Call(context.Background(), v.b, a, Credentials{})
				text := ""
				if len(res.Content) > 0 {
					if tc, ok := res.Content[0].(*mcp.TextContent); ok {
						text = tc.Text
					}
				}
				if v.b == plain {
					checkPlain(t, res, v.want, text)
					return
				}
				if v.want == ok {
					if res.IsError {
						t.Fatalf("want success, got isError: %s", trimText([]byte(text), 500))
					}
					// What a client receives: the JSON of structuredContent.
					raw, err := json.Marshal(res.StructuredContent)
					if err != nil {
						t.Fatal(err)
					}
					got, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
					if err != nil {
						t.Fatal(err)
					}
					if _, isObj := got.(map[string]any); !isObj {
						t.Fatalf("structuredContent is %s, not an object", raw)
					}
					if err := schemas[v.b].Validate(got); err != nil {
						t.Fatalf("structuredContent %s does not validate against the advertised outputSchema: %v", raw, err)
					}
					if text == "" {
						t.Errorf("a success without text content")
					}
					return
				}
				if !res.IsError {
					raw, _ := json.Marshal(res.StructuredContent)
					t.Fatalf("want isError containing %q, got success %s", v.want, trimText(raw, 500))
				}
				if res.StructuredContent != nil {
					// The TypeScript client validates structuredContent
					// even on an error.
					t.Errorf("an error carries structuredContent")
				}
				if !strings.Contains(text, v.want) {
					t.Errorf("error text %q\nwant it to contain %q", trimText([]byte(text), 300), v.want)
				}
				if len(text) > maxMismatchBody+1000 {
					t.Errorf("error text not trimmed: %d bytes", len(text))
				}
				if strings.Contains(text, "carry out") {
					t.Errorf("a GET is said to have been carried out: %q", text)
				}
			})
		}
	}
}

// checkPlain checks the result of a tool without an outputSchema: the
// mapping it always had.
func checkPlain(t *testing.T, res *mcp.CallToolResult, want, text string) {
	t.Helper()
	if res.IsError != (want == "error") {
		t.Fatalf("IsError = %v, want %s: %q", res.IsError, want, trimText([]byte(text), 500))
	}
	var kind string
	switch {
	case want == "error":
		return
	case len(res.Content) == 0:
		kind = "none"
	default:
		switch res.Content[0].(type) {
		case *mcp.TextContent:
			kind = "text"
			if res.StructuredContent != nil {
				kind = "json"
			}
		case *mcp.ImageContent:
			kind = "image"
		}
	}
	if kind != want {
		t.Errorf("got %s (structuredContent %v), want %s", kind, res.StructuredContent != nil, want)
	}
}

// TestStructuredWriteKeepsAnswer checks that a write whose answer breaks the
// schema keeps the answer, trimmed, and says the API carried the write out,
// so that a model does not repeat it.
func TestStructuredWriteKeepsAnswer(t *testing.T) {
	doc := loadTestDoc(t, "results.yaml")
	b := bindOp(t, doc, "createThing")
	long := `{"id":"th_91x","name":"a","log":"` + strings.Repeat("y", 100<<10) + `"}`
	for _, tt := range []struct {
		name, body string
		want       []string
	}{
		{"short answer", `{"id":"th_91x","name":"a"}`, []string{
			"the API answered HTTP 201, but its answer does not match the API's documented schema: id: must be an integer, got \"th_91x\"",
			"id: must be an integer, got \"th_91x\" (the API did carry out the request: do not repeat it to see the answer); the answer was: {\"id\":\"th_91x\",\"name\":\"a\"}"}},
		{"long answer trimmed", long, []string{`the answer was: {"id":"th_91x","name":"a","log":"yyy`, "…"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(&recorder{status: 201, ctype: "application/json", body: tt.body})
			defer srv.Close()
			c, _ := NewRemote(srv.URL, nil)
			res, _ := c.Call(context.Background(), b, args(t, `{"id":1,"name":"a"}`), Credentials{})
			text := res.Content[0].(*mcp.TextContent).Text
			if !res.IsError {
				t.Fatalf("want isError, got %q", text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("text %q\nwant it to contain %q", trimText([]byte(text), 500), w)
				}
			}
			if len(text) > maxMismatchBody+1000 {
				t.Errorf("answer not trimmed: %d bytes", len(text))
			}
		})
	}
}

// TestPassJSON checks that structuredContent is the API's own bytes where it
// can be, wrapped where the schema says so, and decoded only where the bytes
// cannot be passed on.
func TestPassJSON(t *testing.T) {
	tests := []struct {
		name string
		body string
		wrap bool
		want string // the JSON of structuredContent; "" for none
		raw  bool   // passed as the API's bytes, not decoded
	}{
		{"object", ` {"b":1,"a":[1.50,"<x>"]} `, false, `{"b":1,"a":[1.50,"<x>"]}`, true},
		{"object, wrapped schema", `{"a":1}`, true, `{"result":{"a":1}}`, true},
		{"array", `[1,2]`, false, `{"result":[1,2]}`, true},
		{"string", `"s"`, false, `{"result":"s"}`, true},
		{"big number", `12345678901234567890`, false, `{"result":12345678901234567890}`, true},
		{"null", `null`, false, ``, false},
		{"not JSON", `{"a":`, false, ``, false},
		{"trailing data", `{"a":1} x`, false, ``, false},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", false, `{"a":"\ufffd"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := passJSON([]byte(tc.body), tc.wrap)
			if tc.want == "" {
				if got != nil {
					t.Fatalf("structuredContent %v, want none", got)
				}
				return
			}
			_, raw := got.(json.RawMessage)
			if _, wrapped := got.(WrappedJSON); wrapped {
				raw = true
			}
			if raw != tc.raw {
				t.Errorf("passed as bytes: %v, want %v", raw, tc.raw)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			json.Unmarshal(b, &g)
			json.Unmarshal([]byte(tc.want), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("structuredContent %s, want %s", b, tc.want)
			}
		})
	}
}

// TestMediaType covers the Content-Type reading the result mapping and the
// body encoding share: the exact common value taken as it is, everything else
// parsed, parameters and case dropped.
func TestMediaType(t *testing.T) {
	for _, tt := range []struct {
		header, mt string
		json       bool
	}{
		{"application/json", "application/json", true},
		{"application/json; charset=utf-8", "application/json", true},
		{"Application/JSON", "application/json", true},
		{" application/json ;charset=utf-8", "application/json", true},
		{"application/problem+json", "application/problem+json", true},
		{"application/vnd.github+json; q=1", "application/vnd.github+json", true},
		{"text/plain", "text/plain", false},
		{"application/jsonx", "application/jsonx", false},
		{"", "", false},
		{";;", "", false},
	} {
		if got := mediaType(tt.header); got != tt.mt {
			t.Errorf("mediaType(%q) = %q, want %q", tt.header, got, tt.mt)
		}
		if got := isJSON(tt.header); got != tt.json {
			t.Errorf("isJSON(%q) = %v, want %v", tt.header, got, tt.json)
		}
	}
}

// TestTransportLeavesTheWaitToTheCall: a remote upstream's transport puts no
// bound of its own on the wait for an answer's headers, so an operator's
// timeout above it (a slow API given minutes) is the one that applies.
func TestTransportLeavesTheWaitToTheCall(t *testing.T) {
	tr := NewTransport()
	if tr.ResponseHeaderTimeout != 0 {
		t.Errorf("ResponseHeaderTimeout = %v: it would cut a call whose timeout is longer", tr.ResponseHeaderTimeout)
	}
}

// TestObjectOnlyAnswers: under an output schema that only asks for an
// object, an answer is checked on its bytes, not decoded, and every answer
// gets the result it got when it was decoded: an object (with spaces
// around it, or bytes that are not UTF-8, which the decoder replaces) is a
// success; anything else the error that names it.
func TestObjectOnlyAnswers(t *testing.T) {
	b := hugeBinding(t)
	if !b.objectOnly() {
		t.Fatal("hugeDoc's schema is {\"type\": \"object\"}")
	}
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
	for _, tt := range []struct {
		body, sc, err string
	}{
		{body: " {\"a\": [1, {\"b\": null}]}\n", sc: `{"a": [1, {"b": null}]}`},
		{body: "{\"a\":\"\xff\"}", sc: `{"a":"\ufffd"}`},
		{body: `[1,2]`, err: "the API answered HTTP 200 with a JSON array where an object was declared: [1,2]"},
		{body: `null`, err: "the API answered HTTP 200 with JSON null where an object was declared: null"},
		{body: `{"a":`, err: "the API answered HTTP 200 with application/json that is not valid JSON (unexpected EOF): {\"a\":"},
		{body: strings.Repeat("[", maxJSONDepth+1), err: "that is not valid JSON (nested more than 10000 levels deep)"},
	} {
		decoded := false
		room := func([]byte) error { decoded = true; return nil }
		res, _ := b.result(resp, []byte(tt.body), false, room)
		if tt.err != "" {
			if !res.IsError || !strings.Contains(firstText(res), tt.err) {
				t.Errorf("%.40q: %s, want the error %q", tt.body, firstText(res), tt.err)
			}
			continue
		}
		if res.IsError || decoded != !utf8.ValidString(tt.body) {
			t.Errorf("%.40q: error %v, decoded %v: %s", tt.body, res.IsError, decoded, firstText(res))
			continue
		}
		got, _ := json.Marshal(res.StructuredContent)
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal([]byte(tt.sc), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%.40q: structuredContent %s, want %s", tt.body, got, tt.sc)
		}
	}
}

// refusedURL is an http URL on 127.0.0.1 that refuses connections for the
// rest of the test: its port is bound but not listening, so no server the
// test binary starts later can take it, as one may take a closed httptest
// server's (gateway/internal/testaddr has the same for the gateway).
func refusedURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
