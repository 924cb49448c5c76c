package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
)

// fastDoc is the API behind the fast-path tests: answers of every kind a tool
// call maps (object, array, 204, 500, HTML, typed), and enough generated
// operations that tools/list has two pages (go-sdk's page size is 1000).
func fastDoc(extra int) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {
  "/things/{id}": {"get": {"operationId": "get_thing", "tags": ["agent-exposed"], "description": "Reads a <thing> & more",
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "maxLength": 8}}],
    "responses": {"200": {"description": "ok", "content": {"application/json": {}}}}}},
  "/typed/{id}": {"get": {"operationId": "get_typed", "tags": ["agent-exposed"],
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object",
      "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": ["id"]}}}}}}},
  "/list": {"get": {"operationId": "list_things", "tags": ["agent-exposed"],
    "responses": {"200": {"description": "ok", "content": {"application/json": {}}}}}},
  "/fail": {"get": {"operationId": "fail", "tags": ["agent-exposed"],
    "responses": {"200": {"description": "ok", "content": {"application/json": {}}}}}},
  "/empty": {"delete": {"operationId": "empty", "tags": ["agent-exposed"],
    "responses": {"204": {"description": "gone"}}}},
  "/html": {"get": {"operationId": "html", "tags": ["agent-exposed"],
    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}}`)
	for i := range extra {
		fmt.Fprintf(&b, `,
  "/gen/%04d": {"get": {"operationId": "gen_%04d", "tags": ["agent-exposed"], "responses": {"200": {"description": "ok"}}}}`, i, i)
	}
	b.WriteString("}}")
	return []byte(b.String())
}

// fastAPI is the real upstream of the fast-path tests.
func fastAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(r.URL.Path, "/things/"):
		fmt.Fprintf(w, `{"id":%q,"auth":%q,"note":"<b>&amp;</b>","n":12345678901234567890}`, strings.TrimPrefix(r.URL.Path, "/things/"), r.Header.Get("Authorization"))
	case strings.HasPrefix(r.URL.Path, "/typed/"):
		fmt.Fprintf(w, `{"id":%s,"name":"typed"}`, strings.TrimPrefix(r.URL.Path, "/typed/"))
	case r.URL.Path == "/list":
		io.WriteString(w, `[{"id":1},{"id":2}]`)
	case r.URL.Path == "/fail":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"boom"}`)
	case r.URL.Path == "/empty":
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/html":
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>login</html>")
	default:
		io.WriteString(w, `{}`)
	}
}

// fastPair is the same catalog served twice: through the fast path, and with
// it turned off (go-sdk answers everything).
type fastPair struct {
	fast, sdk string // /mcp URLs
	answered  atomic.Int64
}

func newFastPair(t testing.TB, extra int) *fastPair {
	return newFastPairMode(t, extra, false)
}

// newFastPairMode is newFastPair, stateful or not.
func newFastPairMode(t testing.TB, extra int, stateful bool) *fastPair {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	t.Cleanup(api.Close)
	doc := fastDoc(extra)
	p := &fastPair{}
	for _, disable := range []bool{false, true} {
		cfg := &Config{Stateful: stateful, Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: doc, BaseURL: api.URL, Timeout: time.Minute}}}
		g, err := New(context.Background(), cfg, &Options{DisableFastPath: disable})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		if disable {
			if g.fast != nil {
				t.Fatal("DisableFastPath: the fast path is still on")
			}
			p.sdk = srv.URL + "/mcp"
		} else {
			if g.fast == nil {
				t.Fatal("the fast path is off")
			}
			g.fast.onServe = func() { p.answered.Add(1) }
			p.fast = srv.URL + "/mcp"
		}
	}
	return p
}

// answer is an HTTP answer reduced to what a client acts on: the status, the
// media type, and the JSON-RPC messages (SSE "message" events, or a JSON
// body) parsed, or the body's text when it is neither.
type answer struct {
	Status   int
	Type     string
	Messages []any
	Text     string
}

func sendRaw(t testing.TB, url, body string, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		if v == nil {
			req.Header.Del(k)
			continue
		}
		req.Header[k] = v
		if k == "Host" {
			req.Host = v[0]
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode, Type: resp.Header.Get("Content-Type")}
	switch a.Type {
	case "text/event-stream":
		if cc := resp.Header.Get("Cache-Control"); cc != "no-cache, no-transform" {
			t.Errorf("SSE answer with Cache-Control %q", cc)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var v any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
					t.Fatalf("SSE data is not JSON: %v", err)
				}
				if event != "message" {
					t.Fatalf("SSE event %q, want message", event)
				}
				a.Messages = append(a.Messages, v)
			}
		}
	case "application/json":
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("JSON answer does not parse: %v", err)
		}
		a.Messages = []any{v}
	default:
		b, _ := io.ReadAll(resp.Body)
		a.Text = string(b)
	}
	return a
}

// sameFraming forgives the one difference of form between the fast path's
// answer and go-sdk's: the fast path answers a request with its one message
// as application/json, where go-sdk sends that message as the one event of
// a text/event-stream (see sdkwire.WriteResult). It reports whether got was so
// reframed.
func sameFraming(got, want *answer) bool {
	if got.Status == http.StatusOK && want.Status == http.StatusOK &&
		got.Type == "application/json" && want.Type == "text/event-stream" &&
		len(got.Messages) == 1 && len(want.Messages) == 1 {
		got.Type = want.Type
		return true
	}
	return false
}

// opaqueCursors replaces each nextCursor with the place it names: the two
// paths encode the same place in different bytes (see buildToolPages).
func opaqueCursors(t testing.TB, a answer) {
	for _, m := range a.Messages {
		res, _ := m.(map[string]any)["result"].(map[string]any)
		if c, ok := res["nextCursor"].(string); ok {
			uid, ok := sdkwire.DecodeCursor(c)
			if !ok {
				t.Fatalf("nextCursor %q does not decode", c)
			}
			res["nextCursor"] = "after " + uid
		}
	}
}

func rpc(id, method, params string) string {
	if params == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q}`, id, method)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
}

// TestFastPathDifferential sends each request through the fast path and
// through go-sdk and requires the same answer: status, media type and the
// JSON-RPC messages as parsed JSON. It also requires that the fast path
// answered exactly the requests it is meant to (fast), so that a fast path
// that handed everything to go-sdk could not pass.
func TestFastPathDifferential(t *testing.T) {
	p := newFastPair(t, 1005)

	// The second page's cursor, as go-sdk makes it.
	first := sendRaw(t, p.sdk, rpc("1", "tools/list", ""), nil)
	res := first.Messages[0].(map[string]any)["result"].(map[string]any)
	cursor, _ := res["nextCursor"].(string)
	if n := len(res["tools"].([]any)); cursor == "" || n != 1000 {
		t.Fatalf("first page: %d tools, nextCursor %q; want 1000 and a cursor", n, cursor)
	}

	runFastDifferential(t, p, fastCases(cursor), nil)
}

// fastCase is a request of the differential tests, and whether the fast
// path answers it.
type fastCase struct {
	name   string
	body   string
	header http.Header
	fast   bool // the fast path answers it (else it hands it to go-sdk)
}

// fastCases are the differential test's requests; cursor is go-sdk's
// cursor of tools/list's second page.
func fastCases(cursor string) []fastCase {
	pv := func(v string) http.Header { return http.Header{"Mcp-Protocol-Version": {v}} }
	return []fastCase{
		{"list", rpc("1", "tools/list", ""), nil, true},
		{"list empty params, string id", rpc(`"a-<b>&"`, "tools/list", `{}`), nil, true},
		{"list null params", rpc("2", "tools/list", `null`), nil, true},
		{"list page 2 by go-sdk's cursor", rpc("3", "tools/list", fmt.Sprintf(`{"cursor":%q}`, cursor)), nil, true},
		{"list invalid cursor", rpc("4", "tools/list", `{"cursor":"not-a-cursor"}`), nil, false},
		{"list 2024-11-05", rpc("5", "tools/list", ""), pv("2024-11-05"), true},
		{"list 2025-03-26", rpc("5", "tools/list", ""), pv("2025-03-26"), true},
		{"list 2025-06-18", rpc("5", "tools/list", ""), pv("2025-06-18"), true},
		{"list 2025-11-25", rpc("5", "tools/list", ""), pv("2025-11-25"), true},
		{"list 2026-07-28", rpc("5", "tools/list", ""), pv("2026-07-28"), false},
		{"list unknown version", rpc("5", "tools/list", ""), pv("1999-01-01"), false},
		{"list id 0", rpc("0", "tools/list", ""), nil, true},
		{"list negative id", rpc("-42", "tools/list", ""), nil, true},
		{"list id 2^53", rpc("9007199254740992", "tools/list", ""), nil, true},
		{"list id beyond 2^53", rpc("9007199254740993000", "tools/list", ""), nil, false},
		{"list id 1.5", rpc("1.5", "tools/list", ""), nil, false},
		{"list id null", rpc("null", "tools/list", ""), nil, false},
		{"list notification", `{"jsonrpc":"2.0","method":"tools/list"}`, nil, false},
		{"list ID in capitals", `{"jsonrpc":"2.0","ID":1,"method":"tools/list"}`, nil, false},
		{"list jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, nil, false},
		{"list progressToken", rpc("6", "tools/list", `{"_meta":{"progressToken":"p"}}`), nil, false},
		{"call ok", rpc("10", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`), http.Header{"Authorization": {"Bearer tok-1"}}, true},
		{"call ok, other meta", rpc("10", "tools/call", `{"name":"get_thing","arguments":{"id":"7"},"_meta":{"x":1}}`), nil, true},
		{"call missing argument", rpc("11", "tools/call", `{"name":"get_thing","arguments":{}}`), nil, true},
		{"call bad argument", rpc("12", "tools/call", `{"name":"get_thing","arguments":{"id":"far-too-long"}}`), nil, true},
		{"call arguments not an object", rpc("13", "tools/call", `{"name":"get_thing","arguments":[1]}`), nil, true},
		{"call no arguments", rpc("14", "tools/call", `{"name":"list_things"}`), nil, true},
		{"call unknown tool", rpc("15", "tools/call", `{"name":"nope","arguments":{}}`), nil, true},
		{"call unknown tool, odd name", rpc("15", "tools/call", `{"name":"a\"<é>\u0001","arguments":{}}`), nil, true},
		{"call missing name", rpc("16", "tools/call", `{"arguments":{}}`), nil, true},
		{"call name not a string", rpc("17", "tools/call", `{"name":5}`), nil, false},
		{"call no params", rpc("18", "tools/call", ""), nil, false},
		{"call null params", rpc("19", "tools/call", `null`), nil, false},
		{"call upstream 500", rpc("20", "tools/call", `{"name":"fail"}`), nil, true},
		{"call 204", rpc("21", "tools/call", `{"name":"empty"}`), nil, true},
		{"call structured output", rpc("22", "tools/call", `{"name":"get_typed","arguments":{"id":3}}`), nil, true},
		{"call array answer", rpc(`"s"`, "tools/call", `{"name":"list_things","arguments":{}}`), nil, true},
		{"call HTML where JSON declared", rpc("23", "tools/call", `{"name":"html"}`), nil, true},
		{"call progressToken", rpc("24", "tools/call", `{"name":"list_things","_meta":{"progressToken":1}}`), nil, false},
		{"call 2026 meta", rpc("25", "tools/call", `{"name":"list_things","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), nil, false},
		{"call Accept JSON only", rpc("26", "tools/call", `{"name":"list_things"}`), http.Header{"Accept": {"application/json"}}, false},
		{"call Accept */*", rpc("27", "tools/call", `{"name":"list_things"}`), http.Header{"Accept": {"*/*"}}, true},
		{"call no Accept", rpc("28", "tools/call", `{"name":"list_things"}`), http.Header{"Accept": nil}, false},
		{"call Content-Type with charset", rpc("29", "tools/call", `{"name":"list_things"}`), http.Header{"Content-Type": {"application/json; charset=utf-8"}}, true},
		{"call Last-Event-ID", rpc("30", "tools/call", `{"name":"list_things"}`), http.Header{"Last-Event-Id": {"x_1"}}, false},
		{"call foreign Host", rpc("31", "tools/call", `{"name":"list_things"}`), http.Header{"Host": {"evil.example"}}, false},
		{"initialize", initialize, nil, false},
		{"ping", rpc("40", "ping", ""), nil, false},
		{"non-JSON body", `{"jsonrpc":`, nil, false},
		{"empty body", ``, nil, false},
		{"batch", `[` + rpc("41", "tools/list", "") + `]`, nil, false},
	}
}

// runFastDifferential sends each case to both gateways of p, with the
// headers session gives (nil: none) added, and requires the same answer.
func runFastDifferential(t *testing.T, p *fastPair, tests []fastCase, session func(fast bool) http.Header) {
	withSession := func(h http.Header, fast bool) http.Header {
		if session == nil {
			return h
		}
		out := session(fast)
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := p.answered.Load()
			got := sendRaw(t, p.fast, tc.body, withSession(tc.header, true))
			if fast := p.answered.Load() > before; fast != tc.fast {
				t.Errorf("answered by the fast path: %v, want %v", fast, tc.fast)
			}
			want := sendRaw(t, p.sdk, tc.body, withSession(tc.header, false))
			if reframed := sameFraming(&got, &want); reframed != tc.fast {
				t.Errorf("answered as application/json where go-sdk streams: %v, want %v (the fast path's answers, and only those)", reframed, tc.fast)
			}
			opaqueCursors(t, got)
			opaqueCursors(t, want)
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("fast path and go-sdk differ\nfast: %.2000s\n sdk: %.2000s", gj, wj)
			}
		})
	}
}

// TestFastPathCursorFromFastPath checks that go-sdk accepts the cursor the
// fast path hands out (and answers the same page).
func TestFastPathCursorFromFastPath(t *testing.T) {
	p := newFastPair(t, 1005)
	first := sendRaw(t, p.fast, rpc("1", "tools/list", ""), nil)
	cursor := first.Messages[0].(map[string]any)["result"].(map[string]any)["nextCursor"].(string)
	body := rpc("2", "tools/list", fmt.Sprintf(`{"cursor":%q}`, cursor))
	got, want := sendRaw(t, p.fast, body, nil), sendRaw(t, p.sdk, body, nil)
	sameFraming(&got, &want)
	opaqueCursors(t, got)
	opaqueCursors(t, want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("go-sdk answers the fast path's cursor differently")
	}
	if n := len(got.Messages[0].(map[string]any)["result"].(map[string]any)["tools"].([]any)); n != 1011-1000 {
		t.Errorf("second page: %d tools, want %d", n, 1011-1000)
	}
}

// TestFastPathHangUpCancels checks that a fast-path call ends, upstream
// request included, when its client hangs up.
func TestFastPathHangUpCancels(t *testing.T) {
	rec, url := startGateway(t, Config{})
	conn := rawPOST(t, url, call(1, "wait", `{}`), nil, false)
	waitFor(t, "the upstream call to start", func() bool { _, started, _ := rec.counts(); return started == 1 })
	conn.Close()
	select {
	case <-rec.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call was not cancelled when the client hung up")
	}
}

// TestServeChecksSchemasInBackground checks what serving does instead of
// compiling every input schema before it listens: the validators are built
// on first call, and the background check after the documents' validation
// warns of a schema that does not compile, naming the tool.
func TestServeChecksSchemasInBackground(t *testing.T) {
	warned := make(chan []string, 1)
	after := make(chan bool, 1)
	cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: "http://127.0.0.1:1"}}}
	cat, err := BuildCatalog(context.Background(), cfg, &CatalogOptions{ValidateAfter: after, Validated: func(ws []string) { warned <- ws }})
	if err != nil {
		t.Fatal(err)
	}
	var target *Tool
	for _, tool := range cat.Tools {
		if tool.Tool.Name == "get_thing" {
			target = tool
		}
	}
	if target == nil {
		t.Fatal("no get_thing tool")
	}
	// Nothing was compiled up front: the check below runs on what serving holds.
	target.Binding.InputSchema = map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string", "pattern": "^(?!x)"}}}
	select {
	case <-warned:
		t.Fatal("validation ran before ValidateAfter said to start")
	case <-time.After(50 * time.Millisecond):
	}
	after <- true
	ws := <-warned
	found := false
	for _, w := range ws {
		if strings.Contains(w, "tool get_thing") && strings.Contains(w, "input schema does not compile") {
			found = true
		}
	}
	if !found {
		t.Errorf("warnings %q name no uncompilable get_thing", ws)
	}
}

// TestValidateAfterAbandoned: told false (New failed after building the
// catalog), the held-back validation never runs, so a gateway that never
// served logs no document warnings.
func TestValidateAfterAbandoned(t *testing.T) {
	after := make(chan bool, 1)
	ran := make(chan struct{}, 1)
	cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: "http://127.0.0.1:1"}}}
	if _, err := BuildCatalog(context.Background(), cfg, &CatalogOptions{ValidateAfter: after, Validated: func([]string) { ran <- struct{}{} }}); err != nil {
		t.Fatal(err)
	}
	after <- false
	select {
	case <-ran:
		t.Fatal("validation ran after it was abandoned")
	case <-time.After(200 * time.Millisecond):
	}
}
