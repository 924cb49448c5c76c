package upstream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	}{
		{name: "json object", op: "getItem", status: 200, ctype: "application/json", body: `{"name":"a","size":12345678901234567890}`,
			wantText: `"name":"a"`, wantStructured: `{"name":"a","size":12345678901234567890}`, wantContent: "text"},
		{name: "json array wrapped", op: "listThings", status: 200, ctype: "application/json", body: `[{"name":"a"}]`,
			wantStructured: `{"result":[{"name":"a"}]}`, wantContent: "text"},
		{name: "vendor json", op: "getItem", status: 200, ctype: "application/problem+json; charset=utf-8", body: `{"name":"b"}`,
			wantStructured: `{"name":"b"}`, wantContent: "text"},
		{name: "204", op: "putItem", status: 204, wantNoContent: true},
		{name: "text", op: "postNote", status: 200, ctype: "text/plain; charset=utf-8", body: "hi", wantText: "hi", wantContent: "text"},
		{name: "image", op: "getItem", status: 200, ctype: "image/png", body: "\x89PNG", wantContent: "image"},
		{name: "binary", op: "getItem", status: 200, ctype: "application/pdf", body: "%PDF", wantContent: "resource"},
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
			res, err := c.Call(context.Background(), bindOp(t, doc, tt.op), args(t, a), Credentials{})
			if err != nil {
				t.Fatal(err)
			}
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
	res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "timed out") {
		t.Errorf("timeout: %v", res.Content[0])
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	c, _ = NewRemote(url, nil)
	res, _ = c.Call(context.Background(), b, map[string]any{}, Credentials{})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "unreachable") {
		t.Errorf("unreachable: %v", res.Content[0])
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
	res, _ = panicky.Call(context.Background(), bindOp(t, doc, "listThings"), map[string]any{}, Credentials{})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "panicked") {
		t.Errorf("panic: %v", res.Content[0])
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
	b, err := Bind("GET", "/lists", item, item.Get, &BindOptions{MaxResponseBytes: 100})
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
