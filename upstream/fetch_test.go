package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const fetchDoc = `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, required: true, schema: {type: string}}
    get:
      operationId: getPet
      parameters:
        - {name: fields, in: query, schema: {type: string}}
        - {name: X-Trace, in: header, required: true, schema: {type: string}}
        - {name: Connection, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
    put:
      operationId: putPet
      requestBody:
        required: true
        content: {application/json: {schema: {type: object}}}
      responses: {"200": {description: ok}}
`

func bindFetchDoc(t *testing.T, operationID string) *Binding {
	t.Helper()
	doc, err := ParseDocument(context.Background(), []byte(fetchDoc))
	if err != nil {
		t.Fatal(err)
	}
	return bindOp(t, doc.T, operationID)
}

// TestBindingParams checks what a resource reader learns of a binding:
// each parameter's argument, place and requiredness, the refused header
// left out, and the body.
func TestBindingParams(t *testing.T) {
	b := bindFetchDoc(t, "getPet")
	got := b.Params()
	want := []Param{
		{Arg: "petId", Name: "petId", In: "path", Required: true},
		{Arg: "fields", Name: "fields", In: "query"},
		{Arg: "X-Trace", Name: "X-Trace", In: "header", Required: true},
	}
	if len(got) != len(want) {
		t.Fatalf("Params = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Params[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if has, _ := b.HasBody(); has {
		t.Error("getPet has a body")
	}
	if has, req := bindFetchDoc(t, "putPet").HasBody(); !has || !req {
		t.Errorf("putPet HasBody = %v, %v; want true, true", has, req)
	}
}

// TestFetch sends bindings through Client.Fetch: the answer comes back as
// it is (status, header, body), cut at the cap with Truncated set, and
// hostile path values are escaped or refused before anything is sent.
func TestFetch(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.RequestURI)
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing"):
			http.NotFound(w, r)
		case strings.HasSuffix(r.URL.Path, "/big"):
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("x", 2000)))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"1","trace":"` + r.Header.Get("X-Trace") + `","auth":"` + r.Header.Get("Authorization") + `"}`))
		}
	}))
	defer srv.Close()
	c, err := NewRemote(srv.URL+"/v1", &ClientOptions{MaxResponseBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b := bindFetchDoc(t, "getPet")
	ctx := context.Background()
	cred := Credentials{BearerToken: "tok"}

	a, err := c.Fetch(ctx, b, map[string]any{"petId": "1", "X-Trace": "t1", "fields": "a b"}, cred)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != 200 || a.Header.Get("Content-Type") != "application/json" || string(a.Body) != `{"id":"1","trace":"t1","auth":"Bearer tok"}` || a.Truncated {
		t.Errorf("Fetch = %d %q %s truncated=%v", a.Status, a.Header.Get("Content-Type"), a.Body, a.Truncated)
	}
	if want := "/v1/pets/1?fields=a+b"; got[len(got)-1] != want {
		t.Errorf("request URI %q, want %q", got[len(got)-1], want)
	}

	if a, err := c.Fetch(ctx, b, map[string]any{"petId": "missing", "X-Trace": "t"}, cred); err != nil || a.Status != 404 {
		t.Errorf("missing: %+v, %v; want a 404 answer", a, err)
	}
	if a, err := c.Fetch(ctx, b, map[string]any{"petId": "big", "X-Trace": "t"}, cred); err != nil || !a.Truncated || len(a.Body) != 1000 {
		t.Errorf("big: %d bytes, truncated=%v, %v; want 1000, true", len(a.Body), a.Truncated, err)
	}

	for _, hostile := range []string{"..", "%2e%2e", "../../admin", "a/../../b", `..\..`} {
		a, err := c.Fetch(ctx, b, map[string]any{"petId": hostile, "X-Trace": "t"}, cred)
		var ae *ArgumentError
		switch {
		case errors.As(err, &ae):
			// refused: nothing sent
		case err == nil:
			// escaped: one segment under /v1/pets/
			uri := got[len(got)-1]
			if !strings.HasPrefix(uri, "/v1/pets/") || strings.Count(uri, "/") != 3 || a.Status != 200 {
				t.Errorf("%q reached the upstream as %q", hostile, uri)
			}
		default:
			t.Errorf("%q: %v", hostile, err)
		}
	}
	if _, err := c.Fetch(ctx, b, map[string]any{"petId": "..", "X-Trace": "t"}, cred); !errors.As(err, new(*ArgumentError)) {
		t.Errorf(`petId "..": %v, want an ArgumentError`, err)
	}
	if _, err := c.Fetch(ctx, b, map[string]any{"petId": "1"}, cred); !errors.As(err, new(*ArgumentError)) {
		t.Errorf("no X-Trace: %v, want an ArgumentError", err)
	}
}
