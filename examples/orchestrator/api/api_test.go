package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gorilla/mux"
)

// Seeded ids.
const (
	seedWorkflow     = "7c1a6c1e-2d1b-4a6e-9d0e-1f0b1a2c3d01"
	seedCompleted    = "5a4b3c2d-0000-4000-8000-000000000001" // a completed process
	seedRunning      = "5a4b3c2d-0000-4000-8000-000000000002" // a running process
	seedProduct      = "4b2f0c9e-0000-4000-8000-000000000001"
	seedSubscription = "9e8d7c6b-0000-4000-8000-000000000001"
)

// validPathParams names an existing object for every path parameter of the
// document.
var validPathParams = map[string]string{
	"workflow_id":     seedWorkflow,
	"workflow_name":   "create_node",
	"process_id":      seedRunning,
	"product_id":      seedProduct,
	"subscription_id": seedSubscription,
}

// validBodies holds a valid body for each operation that needs one.
var validBodies = map[string]string{
	"create_process": `{"customer_id":"c-9"}`,
}

func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	// Default loader: external $refs stay off.
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("document does not validate: %v", err)
	}
	return doc
}

// operation is one method + path template of the document.
type operation struct {
	method, path string
	op           *openapi3.Operation
}

func operations(doc *openapi3.T) []operation {
	var ops []operation
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			ops = append(ops, operation{method, path, op})
		}
	}
	return ops
}

// concrete fills the path parameters of a template with existing ids.
func concrete(t *testing.T, template string) string {
	t.Helper()
	path := template
	for name, v := range validPathParams {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	if strings.Contains(path, "{") {
		t.Fatalf("%s: a path parameter without a test value", template)
	}
	return path
}

func TestDocument(t *testing.T) {
	doc := loadDoc(t)
	if doc.OpenAPI != "3.0.3" || doc.Info.Title != "Orchestrator (mcpgate demo)" {
		t.Errorf("openapi %q, title %q", doc.OpenAPI, doc.Info.Title)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/" {
		t.Errorf("servers: want one relative server \"/\"")
	}
	if s := doc.Components.SecuritySchemes["bearer"]; s == nil || s.Value.Type != "http" || s.Value.Scheme != "bearer" ||
		len(doc.Security) != 1 {
		t.Errorf("want a global http bearer security scheme")
	}

	wantTags := map[string][]string{
		"list_workflows":                {"workflows", "agent-exposed", "agent-resource"},
		"get_workflow_by_id":            {"workflows", "agent-exposed"},
		"create_process":                {"processes", "agent-exposed"},
		"list_processes":                {"processes", "agent-exposed"},
		"get_process_by_id":             {"processes", "agent-exposed"},
		"search_processes":              {"processes", "agent-exposed", "agent-readonly"},
		"resume_process":                {"processes", "agent-exposed"},
		"abort_process":                 {"processes", "agent-exposed", "agent-destructive"},
		"delete_process":                {"processes"},
		"list_products":                 {"products", "agent-exposed"},
		"get_product_by_id":             {"products", "agent-exposed"},
		"list_subscriptions":            {"subscriptions", "agent-exposed", "agent-large"},
		"get_subscription_by_id":        {"subscriptions", "agent-exposed"},
		"get_subscription_domain_model": {"subscriptions", "agent-exposed", "agent-large"},
		"health":                        {"health"},
	}
	seen := map[string]bool{}
	for _, o := range operations(doc) {
		t.Run(o.op.OperationID, func(t *testing.T) {
			seen[o.op.OperationID] = true
			if o.op.Summary == "" || o.op.Description == "" {
				t.Error("no summary or description")
			}
			if want, ok := wantTags[o.op.OperationID]; !ok || !slices.Equal(o.op.Tags, want) {
				t.Errorf("tags %v, want %v", o.op.Tags, want)
			}
			for _, p := range o.op.Parameters {
				if p.Value.Schema == nil {
					t.Errorf("parameter %s has no schema", p.Value.Name)
				}
			}
			if (o.op.Security != nil && len(*o.op.Security) == 0) != (o.op.OperationID == "health") {
				t.Error("only health is open")
			}
			if o.op.OperationID != "health" && o.op.Responses.Value("401") == nil {
				t.Error("no 401 response")
			}
			for code, r := range o.op.Responses.Map() {
				mt := r.Value.Content.Get("application/json")
				if mt == nil {
					if code != "204" {
						t.Errorf("%s: not JSON", code)
					}
					continue
				}
				s := mt.Schema
				if s.Ref == "" && s.Value.Items != nil {
					s = s.Value.Items
				}
				if !strings.HasPrefix(s.Ref, "#/components/schemas/") {
					t.Errorf("%s: schema is not a components/schemas $ref", code)
				}
			}
		})
	}
	if missing := slices.DeleteFunc(slices.Sorted(maps.Keys(wantTags)), func(id string) bool { return seen[id] }); len(missing) > 0 {
		t.Errorf("operations missing from the document: %v", missing)
	}
}

// TestRoutesMatchDocument checks that the document's operations and the
// router's /api routes are the same set, and that each operation reaches its
// handler (no 404 or 405 from the router) with existing ids.
func TestRoutesMatchDocument(t *testing.T) {
	doc := loadDoc(t)
	documented := map[string]bool{}
	for _, o := range operations(doc) {
		documented[o.method+" "+o.path] = true
	}
	routed := map[string]bool{}
	err := New(nil).newMux().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil || !strings.HasPrefix(path, "/api/") {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			return fmt.Errorf("%s: no methods", path)
		}
		for _, m := range methods {
			routed[m+" "+path] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(documented, routed) {
		t.Errorf("documented %v\nrouted     %v", slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(routed)))
	}

	for _, o := range operations(doc) {
		t.Run(o.op.OperationID, func(t *testing.T) {
			a := New(nil) // fresh: a DELETE must not hide the next GET's process
			req := httptest.NewRequest(o.method, concrete(t, o.path), strings.NewReader(validBodies[o.op.OperationID]))
			var m mux.RouteMatch
			if r := a.newMux(); !r.Match(req, &m) || m.MatchErr != nil {
				t.Fatalf("the router does not route it: %v", m.MatchErr)
			}
			rec := httptest.NewRecorder()
			a.Handler().ServeHTTP(rec, req)
			if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed || rec.Code >= 500 {
				t.Errorf("status %d: %s", rec.Code, rec.Body)
			}
		})
	}
}

// TestResponsesMatchDocument makes real requests, in order against one API,
// and checks both the requests and the responses against the document with
// kin-openapi's validator.
func TestResponsesMatchDocument(t *testing.T) {
	doc := loadDoc(t)
	doc.Servers = openapi3.Servers{{URL: "http://orchestrator.test"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	const token = "t0k"
	h := New(&Options{Token: token}).Handler()
	tests := []struct {
		method, path, body string
		noAuth             bool
		want               int
	}{
		{method: "GET", path: "/api/workflows", want: 200},
		{method: "GET", path: "/api/workflows", noAuth: true, want: 401},
		{method: "GET", path: "/api/workflows/" + seedWorkflow, want: 200},
		{method: "GET", path: "/api/workflows/nope", want: 404},
		{method: "POST", path: "/api/workflows/create_node/processes", body: `{"customer_id":"c-9","product_id":"` + seedProduct + `","note":"n"}`, want: 201},
		{method: "POST", path: "/api/workflows/nope/processes", body: `{"customer_id":"c-9"}`, want: 404},
		{method: "POST", path: "/api/workflows/create_node/processes", body: `{"customer_id":"c-9","product_id":"nope"}`, want: 400},
		{method: "GET", path: "/api/processes?status=running&limit=5", want: 200},
		{method: "GET", path: "/api/processes?offset=1000", want: 200},
		{method: "POST", path: "/api/processes/search", body: `{"customer_id":"c-2"}`, want: 200},
		{method: "POST", path: "/api/processes/search", want: 200},
		{method: "GET", path: "/api/processes/" + seedRunning, want: 200},
		{method: "GET", path: "/api/processes/nope", want: 404},
		{method: "PUT", path: "/api/processes/" + seedRunning + "/resume", want: 409},
		{method: "PUT", path: "/api/processes/nope/resume", want: 404},
		{method: "PUT", path: "/api/processes/" + seedRunning + "/abort", want: 200},
		{method: "PUT", path: "/api/processes/" + seedRunning + "/abort", want: 409},
		{method: "DELETE", path: "/api/processes/" + seedRunning, want: 204},
		{method: "DELETE", path: "/api/processes/" + seedRunning, want: 404},
		{method: "GET", path: "/api/products", want: 200},
		{method: "GET", path: "/api/products/" + seedProduct, want: 200},
		{method: "GET", path: "/api/products/nope", want: 404},
		{method: "GET", path: "/api/subscriptions?customer_id=c-1&status=active&limit=1", want: 200},
		{method: "GET", path: "/api/subscriptions/" + seedSubscription, want: 200},
		{method: "GET", path: "/api/subscriptions/nope", want: 404},
		{method: "GET", path: "/api/subscriptions/" + seedSubscription + "/domain-model", want: 200},
		{method: "GET", path: "/api/health", noAuth: true, want: 200},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %d", tt.method, tt.path, tt.want), func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://orchestrator.test"+tt.path, strings.NewReader(tt.body))
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if !tt.noAuth {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("not in the document: %v", err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Fatalf("the test's request does not match the document: %v", err)
			}
			req.Body = io.NopCloser(strings.NewReader(tt.body)) // ValidateRequest read it

			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
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

// client makes requests to a test server.
type client struct {
	t   *testing.T
	srv *httptest.Server
	tok string
}

func (c client) do(method, path, body string) (int, http.Header, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.tok != "" {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestLifecycle(t *testing.T) {
	srv := httptest.NewServer(New(nil).Handler())
	defer srv.Close()
	c := client{t: t, srv: srv}

	code, hdr, body := c.do("POST", "/api/workflows/create_node/processes", `{"customer_id":"c-1","note":"demo"}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created ProcessCreated
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	p := created.Process
	if p.Status != "suspended" || created.ID != p.ProcessID || p.CustomerID != "c-1" || p.Note != "demo" {
		t.Fatalf("created: %s", body)
	}
	if loc := hdr.Get("Location"); loc != "/api/processes/"+p.ProcessID {
		t.Errorf("Location %q", loc)
	}

	steps := []struct {
		method, path, body string
		want               int
		status             string // the process's status after, if want is 200
		contains           string // in the response body
	}{
		{"GET", "", "", 200, "suspended", ""},
		{"PUT", "/abort", "", 200, "aborted", ""}, // on a second process, below
		{"PUT", "/resume", `{"user_input":"no"}`, 400, "", ""},
		{"PUT", "/resume", `{"user_input":{"hostname":"ams-core-02"}}`, 200, "running", ""},
		{"PUT", "/resume", "", 409, "", ""},
		{"PUT", "/abort", "", 200, "aborted", ""},
		{"PUT", "/abort", "", 409, "", ""},
		{"PUT", "/resume", "", 409, "", ""},
		{"GET", "", "", 200, "aborted", "ams-core-02"}, // the input is kept
		{"DELETE", "", "", 204, "", ""},
		{"GET", "", "", 404, "", ""},
		{"PUT", "/abort", "", 404, "", ""},
	}
	for i, s := range steps {
		id := p.ProcessID
		if i == 1 {
			// Abort straight from suspended, on a process of its own.
			_, _, body := c.do("POST", "/api/workflows/terminate_node/processes", `{"customer_id":"c-3"}`)
			var other ProcessCreated
			json.Unmarshal([]byte(body), &other)
			id = other.ID
		}
		code, _, body := c.do(s.method, "/api/processes/"+id+s.path, s.body)
		if code != s.want {
			t.Errorf("step %d, %s %s: %d, want %d: %s", i, s.method, s.path, code, s.want, body)
			continue
		}
		if s.status != "" {
			var got Process
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Status != s.status {
				t.Errorf("step %d, %s %s: %s, want status %s", i, s.method, s.path, body, s.status)
			}
		}
		if !strings.Contains(body, s.contains) {
			t.Errorf("step %d, %s %s: %s, want %q in it", i, s.method, s.path, body, s.contains)
		}
		if code >= 400 && !strings.Contains(body, `"detail":`) {
			t.Errorf("step %d: error without detail: %s", i, body)
		}
	}

}

func TestBadInput(t *testing.T) {
	srv := httptest.NewServer(New(nil).Handler())
	defer srv.Close()
	c := client{t: t, srv: srv}
	tests := []struct {
		name, method, path, body string
		want                     int
		mention                  string
	}{
		{"no body", "POST", "/api/workflows/create_node/processes", "", 400, "body is required"},
		{"no customer", "POST", "/api/workflows/create_node/processes", `{}`, 400, "customer_id"},
		{"unknown field", "POST", "/api/workflows/create_node/processes", `{"customer_id":"x","bogus":1}`, 400, "bogus"},
		{"not JSON", "POST", "/api/workflows/create_node/processes", `{"customer_id":`, 400, "invalid JSON"},
		{"trailing data", "POST", "/api/workflows/create_node/processes", `{"customer_id":"x"} {}`, 400, "after the JSON value"},
		{"wrong type", "POST", "/api/workflows/create_node/processes", `{"customer_id":1}`, 400, "customer_id"},
		{"long note", "POST", "/api/workflows/create_node/processes", `{"customer_id":"x","note":"` + strings.Repeat("n", 501) + `"}`, 400, "note"},
		{"bad status", "GET", "/api/processes?status=bogus", "", 400, "status"},
		{"bad search status", "POST", "/api/processes/search", `{"status":"bogus"}`, 400, "status"},
		{"limit too big", "GET", "/api/processes?limit=101", "", 400, "limit"},
		{"limit not a number", "GET", "/api/subscriptions?limit=x", "", 400, "limit"},
		{"negative offset", "GET", "/api/subscriptions?offset=-1", "", 400, "offset"},
		{"bad subscription status", "GET", "/api/subscriptions?status=bogus", "", 400, "status"},
		{"unknown route", "GET", "/api/nope", "", 404, "not found"},
		{"wrong method", "PATCH", "/api/workflows", "", 405, "method not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := c.do(tt.method, tt.path, tt.body)
			var d detail
			if code != tt.want || hdr.Get("Content-Type") != "application/json" ||
				json.Unmarshal([]byte(body), &d) != nil || !strings.Contains(d.Detail, tt.mention) {
				t.Errorf("%d %s, want %d and a detail mentioning %q", code, body, tt.want, tt.mention)
			}
		})
	}
}

func TestToken(t *testing.T) {
	srv := httptest.NewServer(New(&Options{Token: "s3cret"}).Handler())
	defer srv.Close()
	tests := []struct {
		name, tok, path string
		want            int
	}{
		{"no token", "", "/api/workflows", 401},
		{"wrong token", "wrong", "/api/workflows", 401},
		{"token prefix", "s3cre", "/api/workflows", 401},
		{"right token", "s3cret", "/api/workflows", 200},
		{"unknown path, no token", "", "/api/nope", 401},
		{"unknown path, right token", "s3cret", "/api/nope", 404},
		{"health is open", "", "/api/health", 200},
		{"the document is open", "", "/openapi.json", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := client{t: t, srv: srv, tok: tt.tok}.do("GET", tt.path, "")
			if code != tt.want {
				t.Fatalf("%d, want %d: %s", code, tt.want, body)
			}
			if code == 401 && (!strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, `"detail"`)) {
				t.Errorf("401 without a Bearer challenge or detail: %v %s", hdr, body)
			}
		})
	}
	// Without a token, anything goes.
	open := httptest.NewServer(New(nil).Handler())
	defer open.Close()
	if code, _, _ := (client{t: t, srv: open, tok: "whatever"}).do("GET", "/api/workflows", ""); code != 200 {
		t.Errorf("no token configured: %d", code)
	}
}

func TestServesDocument(t *testing.T) {
	srv := httptest.NewServer(New(nil).Handler())
	defer srv.Close()
	code, hdr, body := client{t: t, srv: srv}.do("GET", "/openapi.json", "")
	if code != 200 || hdr.Get("Content-Type") != "application/json" || body != string(OpenAPI()) {
		t.Errorf("GET /openapi.json: %d %s", code, hdr.Get("Content-Type"))
	}
}

func TestRecording(t *testing.T) {
	srv := httptest.NewServer(New(&Options{Token: "s3cret", RecordRequests: true}).Handler())
	defer srv.Close()
	anon, authed := client{t: t, srv: srv}, client{t: t, srv: srv, tok: "s3cret"}

	anon.do("GET", "/api/workflows", "")
	authed.do("GET", "/api/products?limit=2", "")
	authed.do("POST", "/api/workflows/create_node/processes", `{"customer_id":"c-7"}`)
	authed.do("GET", "/api/nope", "")
	anon.do("GET", "/openapi.json", "") // not /api/: not recorded

	recorded := func() []RecordedRequest {
		t.Helper()
		code, _, body := anon.do("GET", "/_debug/requests", "")
		var recs []RecordedRequest
		if code != 200 || json.Unmarshal([]byte(body), &recs) != nil {
			t.Fatalf("GET /_debug/requests: %d %s", code, body)
		}
		return recs
	}
	recs := recorded()
	if len(recs) != 4 {
		t.Fatalf("%d requests recorded, want 4: %+v", len(recs), recs)
	}
	if got := recs[0].Headers["Authorization"]; got != nil {
		t.Errorf("anonymous request recorded with Authorization %q", got)
	}
	if r := recs[1]; !slices.Equal(r.Headers["Authorization"], []string{"Bearer s3cret"}) || r.RawQuery != "limit=2" ||
		r.Method != "GET" || r.Path != "/api/products" {
		t.Errorf("recorded: %+v", r)
	}
	if r := recs[2]; r.Body != `{"customer_id":"c-7"}` || !slices.Equal(r.Headers["Content-Type"], []string{"application/json"}) {
		t.Errorf("recorded: %+v", r)
	}
	if recs[3].Path != "/api/nope" {
		t.Errorf("an unrouted request is recorded too: %+v", recs[3])
	}
	// The handler still got the body the recorder read.
	if _, _, body := authed.do("POST", "/api/processes/search", `{"customer_id":"c-7"}`); !strings.Contains(body, "c-7") {
		t.Errorf("search after recording: %s", body)
	}

	if code, _, _ := anon.do("DELETE", "/_debug/requests", ""); code != 204 {
		t.Errorf("DELETE /_debug/requests: %d", code)
	}
	if recs := recorded(); len(recs) != 0 {
		t.Errorf("after clearing: %+v", recs)
	}
	for i := range maxRecorded + 5 {
		authed.do("GET", fmt.Sprintf("/api/health?i=%d", i), "")
	}
	if recs := recorded(); len(recs) != maxRecorded || recs[0].RawQuery != "i=5" || recs[maxRecorded-1].RawQuery != fmt.Sprintf("i=%d", maxRecorded+4) {
		t.Errorf("want the last %d requests; got %d, from %q", maxRecorded, len(recs), recs[0].RawQuery)
	}

	plain := httptest.NewServer(New(nil).Handler())
	defer plain.Close()
	if code, _, _ := (client{t: t, srv: plain}).do("GET", "/_debug/requests", ""); code != 404 {
		t.Errorf("/_debug/requests without RecordRequests: %d", code)
	}
}

// TestConcurrent exercises the store from many goroutines; run with -race.
func TestConcurrent(t *testing.T) {
	a := New(&Options{RecordRequests: true})
	h := a.Handler()
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			rec := serve("POST", "/api/workflows/modify_node/processes", fmt.Sprintf(`{"customer_id":"c-%d"}`, i))
			var p ProcessCreated
			if rec.Code != 201 || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
				t.Errorf("create: %d %s", rec.Code, rec.Body)
				return
			}
			serve("PUT", "/api/processes/"+p.ID+"/resume", "")
			serve("GET", "/api/processes?limit=100", "")
			serve("PUT", "/api/processes/"+p.ID+"/abort", "")
			serve("GET", "/_debug/requests", "")
		})
	}
	wg.Wait()
	var all []Process
	if rec := serve("GET", "/api/processes?status=aborted&limit=100", ""); json.Unmarshal(rec.Body.Bytes(), &all) != nil || len(all) != 20 {
		t.Errorf("%d aborted processes, want 20", len(all))
	}
}
