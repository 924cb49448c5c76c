package upstream

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEncodings sends each encoding case through a Client to a recording
// upstream and checks the raw request URI, Content-Type and body.
func TestEncodings(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	client, rec := recordingClient(t, "/base/")
	tests := []struct {
		name, op, args    string
		wantURI, wantType string
		wantBody          string // exact, unless wantBodyHas is set
		wantBodyHas       []string
	}{
		{name: "path segment escaping", op: "getItem", args: `{"id__path":"a/b c?d#e"}`,
			wantURI: "/base/items/a%2Fb%20c%3Fd%23e"},
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
			res, _ := client.Call(context.Background(), b, args(t, tt.args), Credentials{})
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

// TestExplodedObjectKeys: each key of an exploded (form) query object
// becomes a query parameter of its own, so a key that names another declared
// query parameter (which would reach the API twice, the second copy past the
// bounds its own schema sets) or a method override is refused, and nothing
// is sent.
func TestExplodedObjectKeys(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	client, rec := recordingClient(t, "")
	b := bindOp(t, doc, "getItem")
	for _, tt := range []struct {
		name, args string
		wantURI    string // sent; else refused with wantErr
		wantErr    string
	}{
		{"free keys", `{"id__path":"1","point":{"x":1,"z":"q"}}`, "/items/1?x=1&z=q", ""},
		{"its own name", `{"id__path":"1","point":{"point":3}}`, "/items/1?point=3", ""},
		{"another parameter's name", `{"id__path":"1","limit":10,"point":{"limit":100000}}`, "",
			`point: key "limit" would send the query parameter "limit" a second time; pass it as "limit"`},
		{"a parameter whose argument is renamed", `{"id__path":"1","point":{"id":"x"}}`, "",
			`point: key "id" would send the query parameter "id" a second time; pass it as "id__query"`},
		{"method override", `{"id__path":"1","point":{"_method":"DELETE"}}`, "",
			`point: key "_method" is a method override, which the gateway never sends`},
		{"method override, other case", `{"id__path":"1","point":{"_Method":"DELETE"}}`, "", `key "_Method" is a method override`},
		{"method override, PHP's dot", `{"id__path":"1","point":{".method":"DELETE"}}`, "", `key ".method" is a method override`},
		{"method override, PHP's leading space", `{"id__path":"1","point":{" _method":"DELETE"}}`, "", `key " _method" is a method override`},
		{"another parameter's name, other case", `{"id__path":"1","limit":10,"point":{"LIMIT":100000}}`, "",
			`point: key "LIMIT" would send the query parameter "limit" a second time; pass it as "limit"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec.mu.Lock()
			before := len(rec.reqs)
			rec.mu.Unlock()
			res, _ := client.Call(context.Background(), b, args(t, tt.args), Credentials{})
			text := res.Content[0].(*mcp.TextContent).Text
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(text, tt.wantErr) {
					t.Errorf("got error %v %q, want %q", res.IsError, text, tt.wantErr)
				}
				rec.mu.Lock()
				sent := len(rec.reqs) - before
				rec.mu.Unlock()
				if sent != 0 {
					t.Errorf("%d requests sent", sent)
				}
				return
			}
			if res.IsError {
				t.Fatal(text)
			}
			if got := rec.last(t).RequestURI; got != tt.wantURI {
				t.Errorf("RequestURI = %q, want %q", got, tt.wantURI)
			}
		})
	}
}

func TestHeaderAndCookie(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	client, rec := recordingClient(t, "")
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
