package upstream

import (
	"context"
	"encoding/json"
	"fmt"
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

// recordingClient is a Client of a new recorder, served over HTTP under
// basePath, for the test's duration.
func recordingClient(t *testing.T, basePath string) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c, err := NewRemote(srv.URL+basePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
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

	c, rec := recordingClient(t, "")
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

// readOnlyDoc creates a pet whose id the server assigns: readOnly and, as
// OpenAPI allows, in required (which then holds "on the response only").
const readOnlyDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "paths": {
    "/pets": {"post": {"operationId": "create_pet",
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
      "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}},
    "/litters": {"post": {"operationId": "create_litter",
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["mother"],
        "properties": {"mother": {"$ref": "#/components/schemas/Pet"}, "pups": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}}}},
      "responses": {"201": {"description": "ok"}}}}
  },
  "components": {"schemas": {"Pet": {"type": "object", "required": ["id", "name"],
    "properties": {"id": {"type": "integer", "readOnly": true}, "name": {"type": "string"}}}}}
}`

// TestReadOnlyNotRequiredInInput: a readOnly property in required is not
// required of a call (flat body arguments and nested schemas alike), so a
// correct create is sent, not refused; it stays in the input schema, marked
// readOnly, and the document itself is left as it was.
func TestReadOnlyNotRequiredInInput(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(readOnlyDoc))
	if err != nil {
		t.Fatal(err)
	}
	client, rec := recordingClient(t, "")
	for _, tt := range []struct {
		op, args, wantBody string
	}{
		{"create_pet", `{"name":"rex"}`, `{"name":"rex"}`},
		{"create_litter", `{"mother":{"name":"a"},"pups":[{"name":"b"}]}`, `{"mother":{"name":"a"},"pups":[{"name":"b"}]}`},
	} {
		t.Run(tt.op, func(t *testing.T) {
			b := bindOp(t, doc.T, tt.op)
			raw, _ := json.Marshal(b.InputSchema)
			if strings.Contains(string(raw), `"required":["id"`) || !strings.Contains(string(raw), `"readOnly":true`) {
				t.Errorf("input schema %s: id must stay, marked readOnly, and not be required", raw)
			}
			res, _ := client.Call(context.Background(), b, args(t, tt.args), Credentials{})
			if res.IsError {
				t.Fatalf("refused: %s", res.Content[0].(*mcp.TextContent).Text)
			}
			if got := rec.last(t).Body; got != tt.wantBody {
				t.Errorf("body %s, want %s", got, tt.wantBody)
			}
			if b.Validate(args(t, `{"mother":{},"name":null}`)) == nil && tt.op == "create_litter" {
				t.Error("a litter without the mother's name validated: name is still required")
			}
		})
	}
	if got := doc.T.Components.Schemas["Pet"].Value.Required; fmt.Sprint(got) != "[id name]" {
		t.Errorf("the document's required list became %v", got)
	}
}
