package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const token = "s3cret-token"

// apiLog records what reached the API handler on /api/ paths: method, path and
// headers, so a test can say which token — and which other headers — the
// gateway let through.
type apiLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	Method, Path string
	Header       http.Header
}

func (l *apiLog) observe(r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		return // the gateway's start-up read of /openapi.json
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, seenRequest{r.Method, r.URL.Path, r.Header.Clone()})
}

// take returns what was recorded since the last take.
func (l *apiLog) take() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seen
	l.seen = nil
	return s
}

// start serves the whole service — REST API and gateway, one handler — on a
// real HTTP server.
func start(t *testing.T) (*httptest.Server, *apiLog) {
	t.Helper()
	log := &apiLog{}
	svc, err := newService(context.Background(), &Options{Token: token}, log.observe)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return srv, log
}

// headerTransport adds headers to every request of the MCP client.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session to url+"/mcp" whose every request carries h.
func connect(t *testing.T, url string, h http.Header) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{h}}}
	cs, err := client.Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// inbound is what the MCP client sends besides its token: the API must see
// none of it.
func inbound(authorization string) http.Header {
	h := http.Header{
		"Cookie":          {"session=browser-session"},
		"X-Probe":         {"must-not-reach-the-api"},
		"X-Forwarded-For": {"10.1.2.3"},
	}
	if authorization != "" {
		h.Set("Authorization", authorization)
	}
	return h
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// checkForwarded checks that every request the API saw carried want as its
// Authorization (absent if want is "") and no header but the few the gateway
// sets itself (X-Request-Id is the gateway's own request id, see
// request_id_header): no cookie, no inbound header of the MCP client's.
func checkForwarded(t *testing.T, seen []seenRequest, wantCalls int, want string) {
	t.Helper()
	if len(seen) != wantCalls {
		t.Fatalf("the API saw %d requests, want %d: %+v", len(seen), wantCalls, seen)
	}
	allowed := []string{"Accept", "Authorization", "Content-Type", "User-Agent", "X-Request-Id"}
	for _, r := range seen {
		if got := r.Header.Get("Authorization"); got != want {
			t.Errorf("%s %s: API saw Authorization %q, want %q", r.Method, r.Path, got, want)
		}
		for k := range r.Header {
			if !slices.Contains(allowed, k) {
				t.Errorf("%s %s: API saw inbound header %s: %q", r.Method, r.Path, k, r.Header[k])
			}
		}
	}
}

// TestTools lists the tools through /mcp: the four agent-exposed operations,
// with the hints orchestrator-core's rules give them.
func TestTools(t *testing.T) {
	srv, _ := start(t)
	cs := connect(t, srv.URL, inbound("Bearer "+token))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type hints struct {
		title                                        string
		readOnly, destructive, idempotent, openWorld bool
	}
	want := map[string]hints{
		"list_notes":  {"List Notes", true, false, true, false},
		"get_note":    {"Get Note", true, false, true, false},
		"create_note": {"Create Note", false, false, false, false},
		"delete_note": {"Delete Note", false, true, true, false},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("got %d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations %+v: want all four hints", tool.Name, a)
			continue
		}
		got := hints{a.Title, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", tool.Name, got, w)
		}
	}
}

// TestCallWithToken calls read and write tools with the right token: each
// succeeds with structuredContent, and the API saw the caller's token and
// nothing else of the inbound request.
func TestCallWithToken(t *testing.T) {
	srv, log := start(t)
	cs := connect(t, srv.URL, inbound("Bearer "+token))

	res := call(t, cs, "list_notes", map[string]any{"title_contains": "shop"})
	if res.IsError {
		t.Fatalf("list_notes: %s", text(res))
	}
	list, _ := res.StructuredContent.(map[string]any)["result"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["title"] != "Shopping" {
		t.Errorf("list_notes structuredContent = %v, want the one Shopping note", res.StructuredContent)
	}

	res = call(t, cs, "create_note", map[string]any{"title": "From MCP", "body": "written through /mcp"})
	if res.IsError {
		t.Fatalf("create_note: %s", text(res))
	}
	created, _ := res.StructuredContent.(map[string]any)
	id, _ := created["id"].(float64)
	if id < 1 || created["title"] != "From MCP" || created["body"] != "written through /mcp" {
		t.Fatalf("create_note structuredContent = %v", res.StructuredContent)
	}

	res = call(t, cs, "get_note", map[string]any{"note_id": id})
	if got, _ := res.StructuredContent.(map[string]any); res.IsError || got["title"] != "From MCP" {
		t.Errorf("get_note(%v) = %v %s, want the note just created", id, res.StructuredContent, text(res))
	}

	res = call(t, cs, "delete_note", map[string]any{"note_id": id})
	if res.IsError {
		t.Fatalf("delete_note: %s", text(res))
	}
	res = call(t, cs, "get_note", map[string]any{"note_id": id})
	if want := fmt.Sprintf("note %d not found", int(id)); !res.IsError || !strings.Contains(text(res), "404") || !strings.Contains(text(res), want) {
		t.Errorf("get_note after delete: isError %v, %q; want the API's 404 %q", res.IsError, text(res), want)
	}

	checkForwarded(t, log.take(), 5, "Bearer "+token)
}

// TestCallRefused calls tools without the right token: the gateway forwards
// what the caller sent, the API's own check refuses it, and its 401 — status
// and message — comes back as an isError result. A refused write writes
// nothing.
func TestCallRefused(t *testing.T) {
	for _, tc := range []struct {
		name          string
		authorization string // what the MCP client sends
		forwarded     string // what the API must see
		detail        string // the API's message
	}{
		{"no token", "", "", "missing bearer token"},
		{"wrong token", "Bearer not-the-token", "Bearer not-the-token", "invalid bearer token"},
		{"not a bearer token", "Basic dXNlcjpwYXNz", "", "missing bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, log := start(t)
			cs := connect(t, srv.URL, inbound(tc.authorization))
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"list_notes", map[string]any{}},
				{"create_note", map[string]any{"title": "must not be written"}},
			} {
				res := call(t, cs, c.tool, c.args)
				if !res.IsError || res.StructuredContent != nil {
					t.Errorf("%s: isError %v, structuredContent %v; want an error result", c.tool, res.IsError, res.StructuredContent)
				}
				if got := text(res); !strings.Contains(got, "401") || !strings.Contains(got, tc.detail) {
					t.Errorf("%s: text %q, want the API's 401 and %q", c.tool, got, tc.detail)
				}
			}
			checkForwarded(t, log.take(), 2, tc.forwarded)

			// The refused create left the store alone.
			if n := len(getNotes(t, srv.URL)); n != 2 {
				t.Errorf("the store holds %d notes after a refused create, want the 2 seeded", n)
			}
		})
	}
}

func getNotes(t *testing.T, url string) []Note {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/api/notes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var notes []Note
	if err := json.NewDecoder(resp.Body).Decode(&notes); err != nil {
		t.Fatal(err)
	}
	return notes
}

// TestREST drives the API directly, beside /mcp on the same handler: its own
// routes, its own token check, its own JSON errors; and /mcp is the gateway's.
func TestREST(t *testing.T) {
	srv, _ := start(t)
	for _, tc := range []struct {
		name, method, path, auth, body string
		wantStatus                     int
		wantBody                       string // a substring
		wantChallenge                  string // WWW-Authenticate, if any
	}{
		{"document is open", "GET", "/openapi.json", "", "", 200, `"agent-exposed"`, ""},
		{"no token", "GET", "/api/notes", "", "", 401, `{"detail":"missing bearer token"}`, `Bearer realm="notes"`},
		{"wrong token", "GET", "/api/notes", "Bearer nope", "", 401, `{"detail":"invalid bearer token"}`, `Bearer realm="notes", error="invalid_token"`},
		{"basic auth", "GET", "/api/notes/1", "Basic " + token, "", 401, `missing bearer token`, `Bearer realm="notes"`},
		{"no token, write", "DELETE", "/api/notes/1", "", "", 401, `missing bearer token`, `Bearer realm="notes"`},
		{"list", "GET", "/api/notes", "Bearer " + token, "", 200, `"title":"Welcome"`, ""},
		{"scheme is case-insensitive", "GET", "/api/notes/2", "bearer " + token, "", 200, `"title":"Shopping"`, ""},
		{"missing note", "GET", "/api/notes/99", "Bearer " + token, "", 404, `{"detail":"note 99 not found"}`, ""},
		{"bad id", "GET", "/api/notes/x", "Bearer " + token, "", 400, `not a positive integer`, ""},
		{"id is one segment", "GET", "/api/notes/..%2F..%2Fopenapi.json", "Bearer " + token, "", 400, `not a positive integer`, ""},
		{"create without title", "POST", "/api/notes", "Bearer " + token, `{"body":"x"}`, 400, `title is required`, ""},
		{"create, unknown field", "POST", "/api/notes", "Bearer " + token, `{"title":"a","owner":"x"}`, 400, `unknown field`, ""},
		{"create", "POST", "/api/notes", "Bearer " + token, `{"title":"REST"}`, 201, `"title":"REST","body":""`, ""},
		{"unknown path", "GET", "/nope", "", "", 404, `{"detail":"not found"}`, ""},
		{"wrong method", "PUT", "/api/notes", "Bearer " + token, "", 405, `{"detail":"method not allowed"}`, ""},
		// The gateway, not the API, answers /mcp: go-sdk refuses a GET in
		// stateless mode with a plain 405 of its own.
		{"mcp is the gateway's", "GET", "/mcp", "", "", 405, ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantBody) {
				t.Errorf("%s %s: %d %s, want %d with %s", tc.method, tc.path, resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.wantChallenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.wantChallenge)
			}
			if tc.path != "/mcp" && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q, want application/json", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestNewNeedsToken(t *testing.T) {
	for _, opts := range []*Options{nil, {}} {
		if _, err := New(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "token is required") {
			t.Errorf("New(%+v) = %v, want a missing-token error", opts, err)
		}
	}
}

// TestDocSnippet keeps the embedding docs from drifting: the Go snippet of
// the "Embedding (in-process)" section must appear, line for line, in
// service.go. The section is read from docs/embedding.md while that file
// exists, else from README.md (where it is meant to end up).
func TestDocSnippet(t *testing.T) {
	src, err := os.ReadFile("service.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := "../../../docs/embedding.md"
	data, err := os.ReadFile(doc)
	if os.IsNotExist(err) {
		doc = "../../../README.md"
		data, err = os.ReadFile(doc)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Embedding \\(in-process\\).*?```go\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatalf(`%s: no "## Embedding (in-process)" section with a go block`, doc)
	}
	if snippet := trimLines(string(m[1])); !strings.Contains(trimLines(string(src)), snippet) {
		t.Errorf("%s: the embedding snippet is not in service.go:\n%s", doc, m[1])
	}
}

// trimLines drops each line's indentation, so that a snippet indented
// differently in a document still matches.
func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}
