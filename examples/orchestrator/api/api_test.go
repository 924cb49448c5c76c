package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("document does not validate: %v", err)
	}
	return doc
}

type client struct {
	t   *testing.T
	srv *httptest.Server
	tok string
}

func (c client) do(method, path, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.tok != "" {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestResponsesMatchDocument calls every operation of the document and checks
// the real response against the document with kin-openapi's validator.
func TestResponsesMatchDocument(t *testing.T) {
	doc := loadDoc(t)
	doc.Servers = openapi3.Servers{{URL: "http://orchestrator.test"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	h := New(nil).Handler()
	wf, proc, prod, sub := "7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d01", "5a4b3c2d-0000-4000-8000-000000000002",
		"4b2f0c9e-0000-4000-8000-000000000001", "9e8d7c6b-0000-4000-8000-000000000001"
	tests := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/api/workflows", "", 200},
		{"GET", "/api/workflows/" + wf, "", 200},
		{"GET", "/api/workflows/nope", "", 404},
		{"GET", "/api/processes?status=running&limit=5", "", 200},
		{"GET", "/api/processes?status=bogus", "", 400},
		{"POST", "/api/processes/search", `{"customer_id":"c-2"}`, 200},
		{"POST", "/api/workflows/create_node/processes", `{"customer_id":"c-9","note":"n"}`, 201},
		{"POST", "/api/workflows/nope/processes", `{"customer_id":"c-9"}`, 404},
		{"GET", "/api/processes/" + proc, "", 200},
		{"PUT", "/api/processes/" + proc + "/resume", "", 409},
		{"PUT", "/api/processes/" + proc + "/abort", "", 200},
		{"PUT", "/api/processes/" + proc + "/abort", "", 409},
		{"GET", "/api/products", "", 200},
		{"GET", "/api/products/" + prod, "", 200},
		{"GET", "/api/subscriptions?customer_id=c-1", "", 200},
		{"GET", "/api/subscriptions/" + sub, "", 200},
		{"GET", "/api/subscriptions/" + sub + "/domain-model", "", 200},
		{"DELETE", "/api/processes/" + proc, "", 204},
		{"GET", "/api/health", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://orchestrator.test"+tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("not in the document: %v", err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
				Body: io.NopCloser(strings.NewReader(rec.Body.String())),
			})
			if err != nil {
				t.Errorf("response does not match the document: %v", err)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	srv := httptest.NewServer(New(nil).Handler())
	defer srv.Close()
	c := client{t: t, srv: srv}
	code, body := c.do("POST", "/api/workflows/create_node/processes", `{"customer_id":"c-1"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var p Process
	json.Unmarshal([]byte(body), &p)
	if p.Status != "suspended" {
		t.Fatalf("new process is %s", p.Status)
	}
	steps := []struct {
		method, path string
		want         int
		status       string
	}{
		{"PUT", "/resume", 200, "running"},
		{"PUT", "/resume", 409, ""},
		{"PUT", "/abort", 200, "aborted"},
		{"PUT", "/abort", 409, ""},
	}
	for _, s := range steps {
		code, body := c.do(s.method, "/api/processes/"+p.ProcessID+s.path, "")
		if code != s.want || (s.status != "" && !strings.Contains(body, `"status":"`+s.status+`"`)) {
			t.Errorf("%s %s: %d %s", s.method, s.path, code, body)
		}
	}
	if code, body := c.do("POST", "/api/workflows/create_node/processes", `{}`); code != 400 || !strings.Contains(body, "customer_id") {
		t.Errorf("missing customer_id: %d %s", code, body)
	}
	if code, _ := c.do("POST", "/api/workflows/create_node/processes", `{"customer_id":"x","bogus":1}`); code != 400 {
		t.Errorf("unknown field: %d", code)
	}
}

func TestTokenAndRecording(t *testing.T) {
	srv := httptest.NewServer(New(&Options{Token: "s3cret", RecordRequests: true}).Handler())
	defer srv.Close()
	if code, _ := (client{t: t, srv: srv}).do("GET", "/api/workflows", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _ := (client{t: t, srv: srv, tok: "wrong"}).do("GET", "/api/workflows", ""); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, _ := (client{t: t, srv: srv, tok: "s3cret"}).do("GET", "/api/products?limit=2", ""); code != 200 {
		t.Errorf("right token: %d", code)
	}
	code, body := (client{t: t, srv: srv}).do("GET", "/_debug/requests", "")
	var recs []RecordedRequest
	if code != 200 || json.Unmarshal([]byte(body), &recs) != nil || len(recs) != 3 {
		t.Fatalf("recorded: %d %s", code, body)
	}
	if got := recs[2].Headers["Authorization"]; len(got) != 1 || got[0] != "Bearer s3cret" || recs[2].RawQuery != "limit=2" {
		t.Errorf("recorded request: %+v", recs[2])
	}
	(client{t: t, srv: srv}).do("DELETE", "/_debug/requests", "")
	if _, body := (client{t: t, srv: srv}).do("GET", "/_debug/requests", ""); body != "[]\n" {
		t.Errorf("after clear: %s", body)
	}

	plain := httptest.NewServer(New(nil).Handler())
	defer plain.Close()
	if code, _ := (client{t: t, srv: plain}).do("GET", "/_debug/requests", ""); code != 404 {
		t.Errorf("debug route without RecordRequests: %d", code)
	}
}
