package upstream

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPartContentType: a multipart part's encoding contentType may be a
// media type, a wildcard or a list of them (OpenAPI 3.0/3.1); the part is
// sent with one concrete media type, and text that is not a media type —
// a CR LF followed by a header of the document's choosing, say — is never
// written into the part's header.
func TestPartContentType(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"image/png", "image/png"},
		{"IMAGE/PNG", "image/png"},
		{" image/png ", "image/png"},
		{"image/png, image/jpeg", "image/png"},
		{"image/*, image/jpeg", "image/jpeg"},
		{"image/*", "application/octet-stream"},
		{"*/*", "application/octet-stream"},
		{"text/plain; charset=utf-8", "text/plain; charset=utf-8"},
		{`text/plain; charset="utf-8"`, "text/plain; charset=utf-8"},
		{"application/json", "application/json"},
		{"", ""},
		{"png", ""},
		{"image/png\r\nX-Injected: 1", ""},
		{"image/png\r\nX-Injected: 1, image/gif", "image/gif"},
		{"image/png; name=\"a\r\nX-Injected: 1\"", ""},
	} {
		if got := partContentType(tt.in); got != tt.want {
			t.Errorf("partContentType(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := partContentType(tt.in); strings.ContainsAny(got, "\r\n") {
			t.Errorf("partContentType(%q) = %q: a line break reaches the header", tt.in, got)
		}
	}
}

// TestMultipartPartTypes sends a multipart body whose encodings name a
// list, a wildcard and an injected header, and reads the parts the
// upstream received: each carries one media type, and no part has a
// header the document wrote.
func TestMultipartPartTypes(t *testing.T) {
	doc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/up":{"post":{"operationId":"up",
"requestBody":{"required":true,"content":{"multipart/form-data":{
  "schema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}}},
  "encoding":{"a":{"contentType":"image/png, image/jpeg"},"b":{"contentType":"image/*"},"c":{"contentType":"image/png\r\nX-Injected: 1"}}}}},
"responses":{"200":{"description":"ok"}}}}}}`
	d, err := ParseDocument(context.Background(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	client, rec := recordingClient(t, "")
	b := bindOp(t, d.T, "up")
	res, _ := client.Call(context.Background(), b, args(t, `{"a":"iVBORw==","b":"AAEC","c":"plain"}`), Credentials{})
	if res.IsError {
		t.Fatalf("IsError: %v", res.Content[0].(*mcp.TextContent).Text)
	}
	got := rec.last(t)
	_, params, err := mime.ParseMediaType(got.ContentType)
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(strings.NewReader(got.Body), params["boundary"])
	want := map[string]string{"a": "image/png", "b": "application/octet-stream", "c": ""}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := p.FormName()
		if ct := p.Header.Get("Content-Type"); ct != want[name] {
			t.Errorf("part %s: Content-Type %q, want %q", name, ct, want[name])
		}
		if h := p.Header.Get("X-Injected"); h != "" {
			t.Errorf("part %s: the document's header reached the part: X-Injected: %s", name, h)
		}
		body, _ := io.ReadAll(p)
		if name == "c" && string(body) != "plain" {
			t.Errorf("part c = %q, want the argument as text", body)
		}
	}
}

// TestRestoredPartTypes: a snapshot's part type is one Bind makes, or the
// binding is refused.
func TestRestoredPartTypes(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	snap, err := bindOp(t, doc, "upload").Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ ct, wantErr string }{
		{"image/png", ""},
		{"image/png\r\nX-Injected: 1", `content type "image/png\r\nX-Injected: 1" is not one Bind makes`},
		{"image/png, image/jpeg", "is not one Bind makes"},
		{"", "is not one Bind makes"},
	} {
		var s BindingSnapshot
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		s.Body.PartTypes = map[string]string{"file": tt.ct}
		_, err := s.Restore()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tt.ct, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: err %v, want %q", tt.ct, err, tt.wantErr)
		}
	}
}
