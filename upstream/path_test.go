package upstream

import (
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loadPathsDoc loads testdata/paths.yaml without validating it: it holds
// templates kin-openapi rightly warns about (an undeclared placeholder, a
// header name with a space), which Bind must handle itself.
func loadPathsDoc(t testing.TB) *openapi3.T {
	t.Helper()
	data, err := os.ReadFile("testdata/paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseDocument(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	return doc.T
}

// TestPathBuilding sends path arguments through a Client to a recording
// upstream and checks the raw request URI: literals are escaped, values never
// add a segment, and every style expands as RFC 6570 says.
func TestPathBuilding(t *testing.T) {
	doc := loadPathsDoc(t)
	client, rec := recordingClient(t, "/base")
	// RFC 6570 §3.2's variables: list := ("red", "green", "blue"),
	// keys := [("semi", ";"), ("dot", "."), ("comma", ",")]; object keys are
	// sent in sorted order (comma, dot, semi).
	const list, keys = `["red","green","blue"]`, `{"semi":";","dot":".","comma":","}`
	tests := []struct {
		name, op, args, wantURI string
	}{
		{"non-ASCII literal keeps the value one segment", "nonAscii", `{"path":"a/b/admin"}`,
			"/base/caf%C3%A9/a%2Fb%2Fadmin"},
		{"space in the literal", "withSpace", `{"id":"a/x y"}`, "/base/with%20space/a%2Fx%20y/tail"},
		{"dots inside a name are fine", "withSpace", `{"id":"...a..b.."}`, "/base/with%20space/...a..b../tail"},
		{"placeholders around a literal dot", "adjacent", `{"a":"report","b":"tar.gz"}`, "/base/files/report.tar.gz"},
		{"reserved values are encoded", "adjacent", `{"a":"a/b?c#d","b":"%2e%2E"}`, "/base/files/a%2Fb%3Fc%23d.%252e%252E"},
		{"glued placeholders", "glued", `{"a":"x","b":"y"}`, "/base/glued/xy"},
		{"sub-delims in a literal stay", "reservedLiteral", `{"id":"1"}`, "/base/reserved/a:b@c!$&'()*+,;=/1"},
		{"RFC 6570 primitives", "styles",
			`{"simple":"a b","simpleX":"v","label":"v","labelX":"v","matrix":"v","matrixX":""}`,
			"/base/styles/a%20b/v/.v/.v/;matrix=v/;matrixX"},
		{"RFC 6570 lists", "styles",
			`{"simple":` + list + `,"simpleX":` + list + `,"label":` + list + `,"labelX":` + list + `,"matrix":` + list + `,"matrixX":` + list + `}`,
			"/base/styles/red,green,blue/red,green,blue/.red,green,blue/.red.green.blue/;matrix=red,green,blue/;matrixX=red;matrixX=green;matrixX=blue"},
		{"RFC 6570 objects", "styles",
			`{"simple":` + keys + `,"simpleX":` + keys + `,"label":` + keys + `,"labelX":` + keys + `,"matrix":` + keys + `,"matrixX":` + keys + `}`,
			"/base/styles/comma,%2C,dot,.,semi,%3B/comma=%2C,dot=.,semi=%3B/.comma,%2C,dot,.,semi,%3B/.comma=%2C.dot=..semi=%3B/;matrix=comma,%2C,dot,.,semi,%3B/;comma=%2C;dot=.;semi=%3B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := client.Call(context.Background(), bindOp(t, doc, tt.op), args(t, tt.args), Credentials{BearerToken: "tok"})
			if res.IsError {
				t.Fatalf("IsError: %s", res.Content[0].(*mcp.TextContent).Text)
			}
			if got := rec.last(t).RequestURI; got != tt.wantURI {
				t.Errorf("request URI\n got %s\nwant %s", got, tt.wantURI)
			}
		})
	}
}

// TestPathRefusals checks that a value which would make a dot segment is
// refused before anything is sent, naming the argument.
func TestPathRefusals(t *testing.T) {
	doc := loadPathsDoc(t)
	client, rec := recordingClient(t, "/base")
	tests := []struct{ name, op, args, wantInMsg string }{
		{"dot-dot", "nonAscii", `{"path":".."}`, "path: a path value must not make a '.' or '..' segment"},
		{"dot", "nonAscii", `{"path":"."}`, "path: a path value must not make a '.' or '..' segment"},
		{"dot-dot behind an encoded slash", "nonAscii", `{"path":"../../admin"}`, "path: a path value must not"},
		{"dot-dot behind an encoded backslash", "nonAscii", `{"path":"..\\..\\admin"}`, "path: a path value must not"},
		{"dot segment in the middle", "withSpace", `{"id":"a/./b"}`, "id: a path value must not"},
		{"two values make dot-dot", "glued", `{"a":".","b":"."}`, "a, b: a path value"},
		{"label prefix plus a dot", "styles",
			`{"simple":"x","simpleX":"x","label":".","labelX":"x","matrix":"x","matrixX":"x"}`, "label: a path value"},
		{"empty value", "nonAscii", `{"path":""}`, "path: path parameter must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.count()
			res, _ := client.Call(context.Background(), bindOp(t, doc, tt.op), args(t, tt.args), Credentials{BearerToken: "tok"})
			if !res.IsError {
				t.Fatalf("want IsError, the upstream saw %s", rec.last(t).RequestURI)
			}
			if msg := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(msg, tt.wantInMsg) {
				t.Errorf("message %q does not say %q", msg, tt.wantInMsg)
			}
			if rec.count() != before {
				t.Error("a request reached the upstream")
			}
		})
	}
}

// TestPathTemplateErrors checks the templates Bind refuses, so that the tool
// is skipped at load with a message naming the problem.
func TestPathTemplateErrors(t *testing.T) {
	params := []paramBinding{{arg: "id", name: "id", in: openapi3.ParameterInPath}}
	for _, tt := range []struct{ template, want string }{
		{"/undeclared/{missing}/{id}", "has {missing}, which no path parameter declares"},
		{"/a/{id", "a '{' without its '}'"},
		{"/a/id}", "a '}' without its '{'"},
		{"/a/../{id}", `has a ".." segment`},
		{"/./{id}", `has a "." segment`},
	} {
		_, err := parsePathTemplate(tt.template, params)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.template, err, tt.want)
		}
	}
	doc := loadPathsDoc(t)
	item := doc.Paths.Value("/undeclared/{missing}/{id}")
	if _, err := Bind("GET", "/undeclared/{missing}/{id}", item, item.Get, nil); err == nil || !strings.Contains(err.Error(), "{missing}") {
		t.Errorf("Bind: %v, want an error naming {missing}", err)
	}
}

// TestForbiddenHeaderParameters checks that header parameters a model must
// never set are not arguments, are reported, and never reach the upstream,
// while an ordinary header parameter still works.
func TestForbiddenHeaderParameters(t *testing.T) {
	doc := loadPathsDoc(t)
	b := bindOp(t, doc, "headers")
	props := b.InputSchema["properties"].(map[string]any)
	if len(props) != 1 || props["X-Request-Tag"] == nil {
		t.Errorf("arguments %v, want only X-Request-Tag", slices.Sorted(maps.Keys(props)))
	}
	wantRefused := []string{"Cookie", "proxy-authorization", "X-Forwarded-For", "Forwarded", "Host", "Connection",
		"Transfer-Encoding", "Keep-Alive", "Upgrade", "X-HTTP-Method-Override", "Mcp-Session-Id", "Bad Name"}
	if got := slices.Sorted(slices.Values(b.RefusedHeaders)); !slices.Equal(got, slices.Sorted(slices.Values(wantRefused))) {
		t.Errorf("RefusedHeaders = %v, want %v", got, wantRefused)
	}

	client, rec := recordingClient(t, "")
	res, _ := client.Call(context.Background(), b, args(t, `{"X-Request-Tag":"t1","Cookie":"admin=1","Host":"evil.test",
		"X-Forwarded-For":"10.0.0.1","X-HTTP-Method-Override":"DELETE","Mcp-Session-Id":"s","Connection":"close"}`), Credentials{})
	if res.IsError {
		t.Fatalf("call: %+v", res)
	}
	got := rec.last(t)
	if got.Header.Get("X-Request-Tag") != "t1" {
		t.Errorf("X-Request-Tag = %q, want t1", got.Header.Get("X-Request-Tag"))
	}
	for _, h := range []string{"Cookie", "X-Forwarded-For", "X-Http-Method-Override", "Mcp-Session-Id"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("%s reached the upstream: %q", h, v)
		}
	}
	if got.Method != "GET" {
		t.Errorf("method %s", got.Method)
	}
	if host := client.BaseURL().Host; got.Header.Get("Host") != "" && got.Header.Get("Host") != host {
		t.Errorf("Host %q", got.Header.Get("Host"))
	}
}
