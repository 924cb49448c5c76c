package upstream

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestBindingSnapshotRoundTrip: a binding restored from its snapshot builds
// the same request as the one Bind made, and keeps exact numbers.
func TestBindingSnapshotRoundTrip(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{
	  "/things/{id}":{"parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],
	  "post":{"operationId":"make","parameters":[{"name":"tags","in":"query","style":"form","explode":false,"schema":{"type":"array","items":{"type":"string"}}},
	    {"name":"X-Trace","in":"header","schema":{"type":"string"}}],
	    "requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},"x y":{"type":"string","maxLength":9007199254740993}}}}}},
	    "responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"array","items":{"type":"integer"}}}}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Value("/things/{id}")
	b, err := Bind("POST", "/things/{id}", item, item.Post, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back BindingSnapshot
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	r, err := back.Restore()
	if err != nil {
		t.Fatal(err)
	}
	// The schemas stay JSON until DecodeSchemas (or the first call), and
	// that JSON is the bound schemas' as the gateway's encoder writes them.
	rin, rout := r.RawSchemas()
	win, _ := marshalSchema(b.InputSchema)
	wout, _ := marshalSchema(b.OutputSchema)
	if r.InputSchema != nil || string(rin) != string(win) || string(rout) != string(wout) {
		t.Fatalf("restored schemas: %v, %s, %s; want nil, %s, %s", r.InputSchema, rin, rout, win, wout)
	}
	if err := r.DecodeSchemas(); err != nil {
		t.Fatal(err)
	}
	in1, _ := json.Marshal(b.InputSchema)
	in2, _ := json.Marshal(r.InputSchema)
	out1, _ := json.Marshal(b.OutputSchema)
	out2, _ := json.Marshal(r.OutputSchema)
	if string(in1) != string(in2) || string(out1) != string(out2) || r.DeclaredInputSHA256() != b.DeclaredInputSHA256() ||
		!reflect.DeepEqual(r.pathParts, b.pathParts) || !reflect.DeepEqual(r.params, b.params) || !reflect.DeepEqual(r.body, b.body) || r.wrapResult != b.wrapResult {
		t.Fatal("the restored binding differs")
	}
	base, _ := url.Parse("http://api.test/v1/")
	args := map[string]any{"id": "a/b", "tags": []any{"x", "y z"}, "X-Trace": "t1", "n": json.Number("12"), "x_y": "s"}
	for _, bb := range []*Binding{b, r} {
		if err := bb.Validate(args); err != nil {
			t.Fatal(err)
		}
	}
	q1, err1 := b.Request(context.Background(), base, args)
	q2, err2 := r.Request(context.Background(), base, args)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if q1.URL.String() != q2.URL.String() || !reflect.DeepEqual(q1.Header, q2.Header) {
		t.Fatalf("requests differ: %s %v / %s %v", q1.URL, q1.Header, q2.URL, q2.Header)
	}
}

// TestBindingSnapshotRefused: what a call relies on is checked on restore.
func TestBindingSnapshotRefused(t *testing.T) {
	ok := func() BindingSnapshot {
		return BindingSnapshot{Method: "GET", Path: "/x/{a}", InputSchema: json.RawMessage(`{"type":"object"}`),
			Params: []paramSnapshot{{Arg: "a", Name: "a", In: openapi3.ParameterInPath}}}
	}
	exact := ok()
	exact.InputSchema = json.RawMessage(`{"properties":{"a":{"maxLength":9007199254740993,"maximum":1e300,"type":"string"}},"type":"object"}`)
	b, err := exact.Restore()
	if err != nil {
		t.Fatal(err)
	}
	// Numbers come back as their text: not the nearest float64, nor its
	// formatting (1e+300). (1e400, which no float64 holds, is refused:
	// go-sdk's AddTool reads numbers as float64, and panics on it.)
	if err := b.DecodeSchemas(); err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(b.InputSchema); string(raw) != string(exact.InputSchema) {
		t.Fatalf("got %s", raw)
	}
	for _, tc := range []struct {
		name string
		edit func(*BindingSnapshot)
		want string
	}{
		{"lower-case method", func(s *BindingSnapshot) { s.Method = "get" }, "upper-case HTTP method"},
		{"no method", func(s *BindingSnapshot) { s.Method = "" }, "upper-case HTTP method"},
		{"schema not an object", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`[1]`) }, "input schema"},
		{"schema of another type", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"string"}`) }, `not of type "object"`},
		{"no schema", func(s *BindingSnapshot) { s.InputSchema = nil }, "input schema"},
		{"data after the schema", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"object"} {}`) }, "input schema"},
		// go-sdk's AddTool reads the key "type" exactly: a decoder that
		// matches keys case-insensitively must not pass {"Type": ...}.
		{"type under another case", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"Type":"object"}`) }, `not of type "object"`},
		{"type spelt with an escape", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"obj\u0065ct"}`) }, `not of type "object"`},
		{"the last type wins", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"object","type":"string"}`) }, `not of type "object"`},
		{"a number no float64 holds", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"object","default":1e400}`) }, "the number 1e400 is out of range"},
		{"invalid JSON inside", func(s *BindingSnapshot) { s.InputSchema = json.RawMessage(`{"type":"object","p":{"a":tru}}`) }, "input schema: not valid JSON"},
		{"output schema not an object", func(s *BindingSnapshot) { s.OutputSchema = json.RawMessage(`null`) }, "output schema: not a JSON object"},
		{"bad output schema", func(s *BindingSnapshot) { s.OutputSchema = json.RawMessage(`{`) }, "output schema"},
		{"unknown location", func(s *BindingSnapshot) { s.Params[0].In = "body" }, `unknown location "body"`},
		{"undeclared path parameter", func(s *BindingSnapshot) { s.Params = nil }, "which no path parameter declares"},
		{"dot segment", func(s *BindingSnapshot) { s.Path = "/../{a}" }, `".." segment`},
		{"body without a media type", func(s *BindingSnapshot) { s.Body = &bodySnapshot{} }, "without a media type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.edit(&s)
			_, err := s.Restore()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
