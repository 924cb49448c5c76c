package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorded is what a recording upstream saw of one request.
type recorded struct {
	Method, RequestURI, ContentType, Body string
	Header                                http.Header
}

// recorder is an httptest upstream that records every request and answers
// with a canned response.
type recorder struct {
	mu     sync.Mutex
	reqs   []recorded
	status int
	ctype  string
	body   string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.RequestURI, r.Header.Get("Content-Type"), string(body), r.Header.Clone()})
	status, ctype, resp := rc.status, rc.ctype, rc.body
	rc.mu.Unlock()
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	}
	if status == 0 {
		status = 200
	}
	w.WriteHeader(status)
	io.WriteString(w, resp)
}

func (rc *recorder) last(t *testing.T) recorded {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.reqs) == 0 {
		t.Fatal("no request reached the upstream")
	}
	return rc.reqs[len(rc.reqs)-1]
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

func loadTestDoc(t testing.TB, name string) *openapi3.T {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseDocument(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	doc.Validate(context.Background())
	if len(doc.Warnings) > 0 {
		t.Fatalf("warnings: %v", doc.Warnings)
	}
	return doc.T
}

func bindOp(t testing.TB, doc *openapi3.T, operationID string) *Binding {
	t.Helper()
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == operationID {
				b, err := Bind(method, path, item, op, nil)
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

func args(t testing.TB, s string) map[string]any {
	t.Helper()
	m, err := DecodeArguments(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEncodings sends each encoding case through a Client to a recording
// upstream and checks the raw request URI, Content-Type and body.
func TestEncodings(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	client, err := NewRemote(srv.URL+"/base/", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, op, args    string
		wantURI, wantType string
		wantBody          string // exact, unless wantBodyHas is set
		wantBodyHas       []string
	}{
		{name: "path segment escaping", op: "getItem", args: `{"id__path":"a/../b c"}`,
			wantURI: "/base/items/a%2F..%2Fb%20c"},
		{name: "dot-dot path value", op: "getItem", args: `{"id__path":".."}`,
			wantURI: "/base/items/%2E%2E"},
		{name: "same name in path and query", op: "getItem", args: `{"id__path":"7","id__query":"q"}`,
			wantURI: "/base/items/7?id=q"},
		{name: "form explode array", op: "getItem", args: `{"id__path":"1","tags":["a","b c"]}`,
			wantURI: "/base/items/1?tags=a&tags=b+c"},
		{name: "form no explode", op: "getItem", args: `{"id__path":"1","csv":[1,2,3]}`,
			wantURI: "/base/items/1?csv=1%2C2%2C3"},
		{name: "spaceDelimited", op: "getItem", args: `{"id__path":"1","spaced":["a","b"]}`,
			wantURI: "/base/items/1?spaced=a+b"},
		{name: "pipeDelimited", op: "getItem", args: `{"id__path":"1","piped":["a","b"]}`,
			wantURI: "/base/items/1?piped=a%7Cb"},
		{name: "deepObject", op: "getItem", args: `{"id__path":"1","filter":{"status":"open","created":{"gte":5}}}`,
			wantURI: "/base/items/1?filter%5Bcreated%5D%5Bgte%5D=5&filter%5Bstatus%5D=open"},
		{name: "form explode object", op: "getItem", args: `{"id__path":"1","point":{"x":1,"y":2}}`,
			wantURI: "/base/items/1?x=1&y=2"},
		{name: "big integer kept exact", op: "getItem", args: `{"id__path":"1","limit":100}`,
			wantURI: "/base/items/1?limit=100"},
		{name: "json body", op: "putItem", args: `{"id":"9","name":"n","size":null}`,
			wantURI: "/base/items/9", wantType: "application/json", wantBody: `{"name":"n","size":null}`},
		{name: "form body", op: "postForm", args: `{"name":"a b","tags":["x","y"],"meta":{"k":"v"}}`,
			wantURI: "/base/forms", wantType: "application/x-www-form-urlencoded",
			wantBody: "meta%5Bk%5D=v&name=a+b&tags=x&tags=y"},
		{name: "multipart body", op: "upload", args: `{"title":"t","file":"iVBORw=="}`,
			wantURI: "/base/upload", wantType: "multipart/form-data; boundary=",
			wantBodyHas: []string{`name="title"`, "\r\n\r\nt\r\n", `name="file"; filename="file"`, "Content-Type: image/png"}},
		{name: "text body", op: "postNote", args: `{"body":"hello\nworld"}`,
			wantURI: "/base/notes", wantType: "text/plain", wantBody: "hello\nworld"},
		{name: "octet-stream body", op: "postBlob", args: `{"body":"AAEC"}`,
			wantURI: "/base/blobs", wantType: "application/octet-stream", wantBody: "\x00\x01\x02"},
		{name: "vendor json body", op: "postVendor", args: `{"body":[1,2]}`,
			wantURI: "/base/vendor", wantType: "application/vnd.api+json", wantBody: "[1,2]"},
		{name: "GET sends no body", op: "listThings", args: `{}`, wantURI: "/base/lists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bindOp(t, doc, tt.op)
			res, err := client.Call(context.Background(), b, args(t, tt.args), Credentials{})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("IsError: %v", res.Content[0].(*mcp.TextContent).Text)
			}
			got := rec.last(t)
			if got.RequestURI != tt.wantURI {
				t.Errorf("RequestURI = %q, want %q", got.RequestURI, tt.wantURI)
			}
			if !strings.HasPrefix(got.ContentType, tt.wantType) || (tt.wantType == "" && got.ContentType != "") {
				t.Errorf("Content-Type = %q, want %q", got.ContentType, tt.wantType)
			}
			if tt.wantBodyHas != nil {
				for _, s := range tt.wantBodyHas {
					if !strings.Contains(got.Body, s) {
						t.Errorf("body %q lacks %q", got.Body, s)
					}
				}
			} else if got.Body != tt.wantBody {
				t.Errorf("body = %q, want %q", got.Body, tt.wantBody)
			}
		})
	}
}

func TestHeaderAndCookie(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	client, _ := NewRemote(srv.URL, nil)
	b := bindOp(t, doc, "getItem")
	res, _ := client.Call(context.Background(), b, args(t, `{"id__path":"1","X-Request-Tag":"t1","session":"s 1"}`), Credentials{BearerToken: "tok"})
	if res.IsError {
		t.Fatal(res.Content[0].(*mcp.TextContent).Text)
	}
	got := rec.last(t)
	if v := got.Header.Get("X-Request-Tag"); v != "t1" {
		t.Errorf("X-Request-Tag = %q", v)
	}
	if v := got.Header.Get("Cookie"); v != "session=s+1" {
		t.Errorf("Cookie = %q", v)
	}
	if v := got.Header.Get("Authorization"); v != "Bearer tok" {
		t.Errorf("Authorization = %q", v)
	}
}

// TestRejectedBeforeUpstream checks that arguments that break the schema, or
// would smuggle a header, never reach the upstream, and that the error names
// the field.
func TestRejectedBeforeUpstream(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	client, _ := NewRemote(srv.URL, nil)
	tests := []struct {
		name, op, args, wantInMsg string
	}{
		{"missing path param", "getItem", `{}`, "id__path"},
		{"wrong type", "getItem", `{"id__path":"1","limit":"ten"}`, "limit"},
		{"out of range", "getItem", `{"id__path":"1","limit":1000}`, "limit"},
		{"CRLF in header", "getItem", `{"id__path":"1","X-Request-Tag":"a\r\nX-Evil: 1"}`, "X-Request-Tag"},
		{"semicolon in cookie", "getItem", `{"id__path":"1","session":"a; admin=1"}`, "session"},
		{"missing body field", "putItem", `{"id":"1"}`, "name"},
		{"nested rule", "putItem", `{"id":"1","name":"x","children":[{"name":""}]}`, "children"},
		{"not base64", "postBlob", `{"body":"%%%"}`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.count()
			res, err := client.Call(context.Background(), bindOp(t, doc, tt.op), args(t, tt.args), Credentials{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError {
				t.Fatal("want IsError")
			}
			msg := res.Content[0].(*mcp.TextContent).Text
			t.Log(msg)
			if !strings.Contains(msg, tt.wantInMsg) {
				t.Errorf("message %q does not name %q", msg, tt.wantInMsg)
			}
			if rec.count() != before {
				t.Errorf("a request reached the upstream")
			}
		})
	}
}

func TestDecodeArguments(t *testing.T) {
	for _, in := range []string{`[1]`, `"x"`, `{`, `{"a":1}x`} {
		if _, err := DecodeArguments(json.RawMessage(in)); err == nil {
			t.Errorf("DecodeArguments(%s): want error", in)
		}
	}
	for _, in := range []string{``, `null`, ` {} `} {
		m, err := DecodeArguments(json.RawMessage(in))
		if err != nil || m == nil {
			t.Errorf("DecodeArguments(%q) = %v, %v", in, m, err)
		}
	}
}

func TestSchemas(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	b := bindOp(t, doc, "putItem")
	raw, _ := json.Marshal(b.InputSchema)
	s := string(raw)
	for _, want := range []string{`"required":["id","name"]`, `"$defs":{"Item"`, `"$ref":"#/$defs/Item"`, `"type":["integer","null"]`} {
		if !strings.Contains(s, want) {
			t.Errorf("input schema %s lacks %s", s, want)
		}
	}
	if b.OutputSchema != nil {
		t.Errorf("204-only operation has an output schema")
	}
	lb := bindOp(t, doc, "listThings")
	if !lb.wrapResult || lb.OutputSchema["type"] != "object" {
		t.Errorf("array response not wrapped: %v", lb.OutputSchema)
	}
	gb := bindOp(t, doc, "getItem")
	if gb.wrapResult || gb.OutputSchema == nil {
		t.Errorf("object response: wrap=%v schema=%v", gb.wrapResult, gb.OutputSchema)
	}
	// The output schema describes, it does not demand: APIs leave out
	// "required" fields, and clients fail calls on a mismatch.
	if out, _ := json.Marshal(gb.OutputSchema); strings.Contains(string(out), `"required"`) {
		t.Errorf("output schema demands fields: %s", out)
	}
	if in, _ := json.Marshal(b.InputSchema); !strings.Contains(string(in), `"required":["name"]`) {
		t.Errorf("input schema lost the component's required list: %s", in)
	}
	for _, op := range []string{"getItem", "putItem", "postForm", "upload", "postNote", "postBlob", "listThings", "postVendor"} {
		b := bindOp(t, doc, op)
		for _, s := range []map[string]any{b.InputSchema, b.OutputSchema} {
			if s == nil {
				continue
			}
			raw, _ := json.Marshal(s)
			if _, err := compileSchema(raw); err != nil {
				t.Errorf("%s: schema does not compile: %v", op, err)
			}
		}
	}
}

func TestArgumentNames(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{
	  "/calls/{AccountSid}": {"post": {"operationId":"createCall",
	    "parameters": [
	      {"name":"AccountSid","in":"path","required":true,"schema":{"type":"string"}},
	      {"name":"StartTime<","in":"query","schema":{"type":"string"}},
	      {"name":"StartTime>","in":"query","schema":{"type":"string"}},
	      {"name":"filter[status]","in":"query","schema":{"type":"string"}}],
	    "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type":"object","required":["To"],
	      "properties": {"AccountSid":{"type":"string"},"To":{"type":"string"},"expand[]":{"type":"array","items":{"type":"string"}}}}}}},
	    "responses": {"201": {"description":"ok"}}}},
	  "/charges": {"get": {"operationId":"listCharges",
	    "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type":"object","properties":{}}}}},
	    "responses": {"200": {"description":"ok"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b := bindOp(t, doc.T, "createCall")
	props := b.InputSchema["properties"].(map[string]any)
	for _, want := range []string{"AccountSid__path", "AccountSid", "StartTime_lt", "StartTime_gt", "filter_status_", "To", "expand__"} {
		if _, ok := props[want]; !ok {
			t.Errorf("no argument %q in %v", want, sortedKeys(props))
		}
	}
	if b.Renamed["StartTime_lt"] != "StartTime<" || b.Renamed["expand__"] != "expand[]" {
		t.Errorf("Renamed = %v", b.Renamed)
	}
	if len(b.Notes) == 0 || !strings.Contains(b.Notes[0], `StartTime_lt is the API's "StartTime<"`) {
		t.Errorf("Notes = %v", b.Notes)
	}
	if req, _ := json.Marshal(b.InputSchema["required"]); string(req) != `["AccountSid__path"]` {
		t.Errorf("required = %s: a path parameter is, an optional body's properties are not", req)
	}

	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c, _ := NewRemote(srv.URL, nil)
	res, _ := c.Call(context.Background(), b, args(t, `{"AccountSid__path":"AC1","AccountSid":"AC2","StartTime_lt":"2026-01-01","To":"+1","expand__":["a","b"]}`), Credentials{})
	if res.IsError {
		t.Fatal(res.Content[0].(*mcp.TextContent).Text)
	}
	got := rec.last(t)
	if got.RequestURI != "/calls/AC1?StartTime%3C=2026-01-01" {
		t.Errorf("RequestURI = %s", got.RequestURI)
	}
	if got.Body != "AccountSid=AC2&To=%2B1&expand%5B%5D=a&expand%5B%5D=b" {
		t.Errorf("body = %s", got.Body)
	}

	// An optional body that can hold nothing (Stripe's GETs) is no argument,
	// and no body is sent.
	lb := bindOp(t, doc.T, "listCharges")
	if len(lb.InputSchema["properties"].(map[string]any)) != 0 {
		t.Errorf("listCharges arguments: %v", lb.InputSchema["properties"])
	}
	c.Call(context.Background(), lb, map[string]any{}, Credentials{})
	if got := rec.last(t); got.Body != "" || got.ContentType != "" {
		t.Errorf("GET sent a body: %q %q", got.ContentType, got.Body)
	}
}

func TestSchemaBudget(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	var op *openapi3.Operation
	var item *openapi3.PathItem
	for path, it := range doc.Paths.Map() {
		if path == "/items/{id}" {
			item, op = it, it.Get
		}
	}
	full, err := Bind("GET", "/items/{id}", item, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	if full.OutputSchema == nil || len(full.Degraded) != 0 {
		t.Fatalf("unbounded: output %v, degraded %v", full.OutputSchema, full.Degraded)
	}
	inSize := jsonSize(full.InputSchema)
	// Room for the input schema only: the output schema goes first.
	b, _ := Bind("GET", "/items/{id}", item, op, &BindOptions{SchemaBudget: inSize})
	if b.OutputSchema != nil || len(b.Degraded) != 1 || !strings.Contains(b.Degraded[0], "outputSchema") {
		t.Errorf("output not dropped first: %v", b.Degraded)
	}
	if jsonSize(b.InputSchema) != inSize {
		t.Errorf("input schema cut although it fit")
	}
	// Less room: the input schema is cut too, and still compiles and validates.
	b, _ = Bind("GET", "/items/{id}", item, op, &BindOptions{SchemaBudget: 300})
	if len(b.Degraded) != 2 || !strings.Contains(b.Degraded[1], "input schema") {
		t.Errorf("degraded = %v", b.Degraded)
	}
	if err := b.Validate(map[string]any{"id__path": "1", "limit": json.Number("5")}); err != nil {
		t.Errorf("degraded schema rejects a valid call: %v", err)
	}
}

// TestSizeOf checks the budget's byte count against encoding/json.
func TestSizeOf(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	for _, op := range []string{"getItem", "putItem", "postForm", "upload", "listThings"} {
		b := bindOp(t, doc, op)
		for _, s := range []map[string]any{b.InputSchema, b.OutputSchema} {
			if s == nil {
				continue
			}
			s["description"] = "a <b> & \"c\"\n\x01"
			raw, _ := json.Marshal(s)
			if got := jsonSize(s); got != len(raw) {
				t.Errorf("%s: jsonSize = %d, json.Marshal gives %d", op, got, len(raw))
			}
			if got := jsonSizeUpTo(s, 10); got <= 10 {
				t.Errorf("%s: jsonSizeUpTo(10) = %d", op, got)
			}
		}
	}
}
