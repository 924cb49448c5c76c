package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// The fuzz targets of the front door. Both build their gateways once per
// fuzzing process, against a real upstream (fastAPI, over loopback), and
// call the gateway's handler through an httptest.ResponseRecorder: one
// request costs what the gateway costs, not a TCP round trip to it, so a
// 5 s CI run is thousands of executions. The request's local address is set
// to a loopback one, as net/http would for a gateway on 127.0.0.1, so that
// the Host checks of both paths are exercised.
//
// Seeds are in testdata/fuzz/<Target>/, one file per case, named by what it
// is; `go test` without -fuzz runs them as plain tests.

// The header variants a fuzz input picks from: index = byte % len.
var (
	fuzzAccepts = []string{
		"application/json, text/event-stream", "", "application/json", "text/event-stream",
		"*/*", "application/*;q=0.9, text/*", "text/html", "application/json,text/event-stream;q=0",
	}
	fuzzContentTypes = []string{
		"application/json", "", "application/json; charset=utf-8", "text/plain",
		"application/json;;", "APPLICATION/JSON", "application/json-rpc",
	}
	fuzzVersions = []string{
		"", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01", "2025-06-18 ",
	}
	fuzzHosts = []string{"127.0.0.1:8080", "localhost", "evil.example", "[::1]:8080"}
)

// fuzzRequest builds the POST of one fuzz input.
func fuzzRequest(body []byte, accept, ctype, version, host uint8) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	set := func(k string, menu []string, i uint8) {
		if v := menu[int(i)%len(menu)]; v != "" {
			r.Header.Set(k, v)
		}
	}
	set("Accept", fuzzAccepts, accept)
	set("Content-Type", fuzzContentTypes, ctype)
	set("Mcp-Protocol-Version", fuzzVersions, version)
	r.Host = fuzzHosts[int(host)%len(fuzzHosts)]
	ctx := context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	return r.WithContext(ctx)
}

// fuzzServe serves r with h and returns the recorded answer. A handler that
// has not returned within the limit fails the test: every request in these
// targets is answered at once (the upstream does not wait).
func fuzzServe(t *testing.T, h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the handler did not answer within 10s")
	}
	return w
}

// newFuzzGateway is a stateless gateway over fastDoc, its upstream fastAPI
// (deterministic: its answers depend on the request alone), and the example
// playbook engine, in-process, one of its own per gateway: its execution
// ids are numbered from the same first one (NumericIDs) and its runs end at
// once (a step of 1ns), so two gateways given the same inputs in the same
// order answer alike.
func newFuzzGateway(tb testing.TB, api string, disableFastPath bool) http.Handler {
	tb.Helper()
	cfg := &Config{Upstreams: []Upstream{
		{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api, Timeout: 10 * time.Second},
		{Name: "noetl", OpenAPI: "/openapi.json", Handler: engine.New(&engine.Options{NumericIDs: true, Step: time.Nanosecond}).Handler(), Playbooks: &Playbooks{}},
	}}
	g, err := New(context.Background(), cfg, &Options{DisableFastPath: disableFastPath})
	if err != nil {
		tb.Fatal(err)
	}
	if (g.fast == nil) != disableFastPath {
		tb.Fatalf("fast path on: %v, want %v", g.fast != nil, !disableFastPath)
	}
	return g.Handler()
}

// FuzzFrontDoorMessage posts arbitrary bodies, with header variants, to
// /mcp of a stateless gateway. Whatever comes in: no panic, an answer within
// the limit, a status in the set the transport spec and go-sdk use, and every
// JSON or SSE answer made of valid JSON-RPC 2.0 responses (see
// checkRPCAnswer).
func FuzzFrontDoorMessage(f *testing.F) {
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	f.Cleanup(api.Close)
	h := newFuzzGateway(f, api.URL, false)
	f.Fuzz(func(t *testing.T, body []byte, accept, ctype, version, host uint8) {
		r := fuzzRequest(body, accept, ctype, version, host)
		w := fuzzServe(t, h, r)
		if err := checkRPCAnswer(body, w.Code, w.Header(), w.Body.Bytes()); err != nil {
			t.Fatalf("%.500v\nrequest headers: %v\nanswer: HTTP %d %q\n%.500s", err, r.Header, w.Code, w.Header().Get("Content-Type"), w.Body.Bytes())
		}
	})
}

// FuzzFastPathDifferential posts the same input to a gateway with the fast
// path and to one without it (Options.DisableFastPath: go-sdk answers
// everything the front door passes on). The answers must be the same: HTTP
// status, media type (but see sameFraming) and the JSON-RPC messages as
// parsed JSON (cursors
// compared by the place they name, see opaqueCursors), or the same text when
// the answer is not JSON-RPC. Headers are not compared: the request-id
// header differs on every POST. This checks the fast path's hand-written
// protocol code against go-sdk on inputs nobody thought of.
func FuzzFastPathDifferential(f *testing.F) {
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	f.Cleanup(api.Close)
	fast := newFuzzGateway(f, api.URL, false)
	sdk := newFuzzGateway(f, api.URL, true)
	f.Fuzz(func(t *testing.T, body []byte, accept, ctype, version, host uint8) {
		got := recordedAnswer(t, fuzzServe(t, fast, fuzzRequest(body, accept, ctype, version, host)))
		want := recordedAnswer(t, fuzzServe(t, sdk, fuzzRequest(body, accept, ctype, version, host)))
		sameAnswer(t, got, want, "")
	})
}

// sameAnswer fails t when the fast path's answer and go-sdk's differ, once
// their framing (sameFraming) and cursors (opaqueCursors) are set aside;
// where says where they were sent ("" or " on a session").
func sameAnswer(t *testing.T, got, want answer, where string) {
	t.Helper()
	sameFraming(&got, &want)
	opaqueCursors(t, got)
	opaqueCursors(t, want)
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("fast path and go-sdk differ%s\nfast: %.2000s\n sdk: %.2000s", where, gj, wj)
	}
}

// recordedAnswer reduces a recorded answer to what a client acts on, as
// sendRaw does for a live one.
func recordedAnswer(t *testing.T, w *httptest.ResponseRecorder) answer {
	t.Helper()
	a := answer{Status: w.Code, Type: w.Header().Get("Content-Type")}
	msgs, isRPC, err := rpcMessages(a.Type, w.Body.Bytes())
	switch {
	case err != nil:
		t.Fatalf("HTTP %d: %v: %.2000s", w.Code, err, w.Body.Bytes())
	case isRPC:
		for _, m := range msgs {
			var v any
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatalf("message is not JSON: %v: %s", err, m)
			}
			a.Messages = append(a.Messages, v)
		}
	default:
		a.Text = w.Body.String()
	}
	return a
}

// fuzzStatuses are the statuses /mcp may answer a POST with: the transport
// spec's (200, 202; 400, 404, 405, 406, 413, 415) and go-sdk's Host check
// (403). A 5xx is a gateway failure.
var fuzzStatuses = []int{
	http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound,
	http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
}

// checkRPCAnswer checks one answer of /mcp to the POST of body: its status
// is in fuzzStatuses; a 202 has no body; a 200 is JSON-RPC (JSON or SSE);
// every JSON-RPC answer holds only valid responses to this request (see
// checkResponse), and a 200 answering a request holds exactly one.
func checkRPCAnswer(body []byte, status int, h http.Header, answer []byte) error {
	if !slices.Contains(fuzzStatuses, status) {
		return fmt.Errorf("HTTP %d is not a status /mcp answers", status)
	}
	if status == http.StatusAccepted && len(answer) != 0 {
		return fmt.Errorf("HTTP 202 with a body")
	}
	msgs, isRPC, err := rpcMessages(h.Get("Content-Type"), answer)
	if err != nil {
		return err
	}
	if status == http.StatusOK && !isRPC {
		return fmt.Errorf("HTTP 200 is neither JSON nor an event stream")
	}
	if !isRPC {
		return nil // go-sdk's text/plain refusals
	}
	id, isRequest := requestID(body)
	if status == http.StatusOK && isRequest && len(msgs) != 1 {
		return fmt.Errorf("%d messages answer one request", len(msgs))
	}
	for _, m := range msgs {
		if err := checkResponse(m, id, isRequest); err != nil {
			return fmt.Errorf("%v: %s", err, m)
		}
	}
	return nil
}

// rpcMessages splits an answer into its JSON-RPC messages: a JSON body is
// one, an event stream holds one per event. isRPC is false for other media
// types. An event stream must hold only "message" events with a data line.
func rpcMessages(contentType string, body []byte) (msgs [][]byte, isRPC bool, err error) {
	mt, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(mt) {
	case "application/json":
		return [][]byte{body}, true, nil
	case "text/event-stream":
	default:
		return nil, false, nil
	}
	for _, event := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(event) == "" {
			continue
		}
		name, data, hasData := "message", []string(nil), false
		for _, line := range strings.Split(event, "\n") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "data":
				data, hasData = append(data, value), true
			case "id", "retry", "":
			default:
				return nil, true, fmt.Errorf("SSE line %q has an unknown field", line)
			}
		}
		if name != "message" || !hasData {
			return nil, true, fmt.Errorf("SSE event %q without a message", event)
		}
		msgs = append(msgs, []byte(strings.Join(data, "\n")))
	}
	return msgs, true, nil
}

// requestID returns the id of the request in body, when body is a JSON
// object whose "id" is a string or a number (the last "id" when it appears
// twice, as both encoding/json and go-sdk's decoder read it); isRequest
// says it has one. Anything else (no id, null, an object) is answered, if
// at all, with id null.
func requestID(body []byte) (id any, isRequest bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil, false
	}
	raw, ok := m["id"]
	if !ok {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&id) != nil {
		return nil, false
	}
	switch id.(type) {
	case string, json.Number:
		return id, true
	}
	return nil, false
}

// checkResponse checks one JSON-RPC message of an answer to a request whose
// id is reqID (isRequest false: the POST held no valid id). It must be a
// JSON-RPC 2.0 response: "jsonrpc" "2.0"; an "id" that is a string, a
// number or null (or none, on an error answering no request); exactly one of "result" and "error"; an error with a
// non-zero integer code and a string message. Its id must be the request's,
// or null — and not null on a result, which always answers a request.
func checkResponse(msg []byte, reqID any, isRequest bool) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errors.New(`"jsonrpc" is not "2.0"`)
	}
	result, hasResult := m["result"]
	rawErr, hasError := m["error"]
	if hasResult == hasError {
		return errors.New(`not exactly one of "result" and "error"`)
	}
	_ = result
	rawID, ok := m["id"]
	if !ok {
		// JSON-RPC 2.0 §5 requires an id (null when unknown); MCP's
		// schema (2025-11-25, JSONRPCErrorResponse) makes it optional on
		// an error, and go-sdk leaves it out on its refusals of a
		// notification (2026-07-28 header checks). Never on a result, nor
		// on the answer to a request with an id.
		if hasResult || isRequest {
			return errors.New(`no "id"`)
		}
		rawID = json.RawMessage("null")
	}
	dec := json.NewDecoder(bytes.NewReader(rawID))
	dec.UseNumber()
	var id any
	if err := dec.Decode(&id); err != nil {
		return err
	}
	switch id.(type) {
	case nil:
		if hasResult {
			return errors.New("a result with id null")
		}
	case string, json.Number:
		if !isRequest || !sameID(id, reqID) {
			return fmt.Errorf("id %s does not echo the request's id %v", rawID, reqID)
		}
	default:
		return fmt.Errorf("id %s is neither a string, a number nor null", rawID)
	}
	if hasError {
		var e struct {
			Code    *json.Number `json:"code"`
			Message *string      `json:"message"`
		}
		if err := json.Unmarshal(rawErr, &e); err != nil {
			return fmt.Errorf("error is not an object: %v", err)
		}
		if e.Code == nil {
			return errors.New("error without a code")
		}
		if code, err := strconv.ParseInt(e.Code.String(), 10, 64); err != nil || code == 0 {
			return fmt.Errorf("error code %s is not a non-zero integer", e.Code)
		}
		if e.Message == nil {
			return errors.New("error without a string message")
		}
	}
	return nil
}

// sameID reports whether a response id echoes a request id: the same string,
// or the same number (1 and 1.0 are one id; 2^53 and 2^53+1 are two, though
// a float64 holds them as one).
func sameID(got, want any) bool {
	switch g := got.(type) {
	case string:
		w, ok := want.(string)
		return ok && g == w
	case json.Number:
		w, ok := want.(json.Number)
		if !ok {
			return false
		}
		if g == w {
			return true
		}
		gf, _, err1 := big.ParseFloat(string(g), 10, 512, big.ToNearestEven)
		wf, _, err2 := big.ParseFloat(string(w), 10, 512, big.ToNearestEven)
		return err1 == nil && err2 == nil && gf.Cmp(wf) == 0
	}
	return false
}

// FuzzStatefulFastPathDifferential is FuzzFastPathDifferential on stateful
// gateways: every input is posted on a session of each (opened alike,
// reopened alike when an input has ended it), so that the fast path's
// answers to the calls on a session (frontDoor.sessionFastPath) are held to
// go-sdk's session's. Its seeds are FuzzFastPathDifferential's.
func FuzzStatefulFastPathDifferential(f *testing.F) {
	api := httptest.NewServer(http.HandlerFunc(fastAPI))
	f.Cleanup(api.Close)
	fast, fastG := newStatefulFuzzGateway(f, api.URL, false)
	sdk, _ := newStatefulFuzzGateway(f, api.URL, true)
	var fastID, sdkID string
	f.Fuzz(func(t *testing.T, body []byte, accept, ctype, version, host uint8) {
		if fastID == "" || !fastG.life.ready(fastID) {
			fastID, sdkID = fuzzSession(t, fast), fuzzSession(t, sdk)
		}
		onSession := func(h http.Handler, id string) *httptest.ResponseRecorder {
			r := fuzzRequest(body, accept, ctype, version, host)
			r.Header.Set("Mcp-Session-Id", id)
			return fuzzServe(t, h, r)
		}
		sameAnswer(t, recordedAnswer(t, onSession(fast, fastID)), recordedAnswer(t, onSession(sdk, sdkID)), " on a session")
		if bytes.Contains(body, []byte("notifications/cancelled")) {
			// go-sdk cancels in a goroutine of its own, which could cancel
			// the next input's call of that id on one gateway only: wait
			// for it (see TestFastPathStatefulDifferentialSessionState).
			ping := func(h http.Handler, id string) {
				r := fuzzRequest([]byte(`{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`), 0, 0, 3, 0)
				r.Header.Set("Mcp-Session-Id", id)
				fuzzServe(t, h, r)
			}
			ping(fast, fastID)
			ping(sdk, sdkID)
			waitNoGoroutineIn(t, "jsonrpc2.(*Connection).Cancel")
		}
	})
}

// newStatefulFuzzGateway is newFuzzGateway, stateful.
func newStatefulFuzzGateway(tb testing.TB, api string, disableFastPath bool) (http.Handler, *Gateway) {
	tb.Helper()
	cfg := &Config{Stateful: true, Upstreams: []Upstream{
		{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api, Timeout: 10 * time.Second},
		{Name: "noetl", OpenAPI: "/openapi.json", Handler: engine.New(&engine.Options{NumericIDs: true, Step: time.Nanosecond}).Handler(), Playbooks: &Playbooks{}},
	}}
	g, err := New(context.Background(), cfg, &Options{DisableFastPath: disableFastPath})
	if err != nil {
		tb.Fatal(err)
	}
	if (g.fast == nil) != disableFastPath || (g.life == nil) != disableFastPath {
		tb.Fatalf("fast path on: %v, want %v", g.fast != nil, !disableFastPath)
	}
	return g.Handler(), g
}

// fuzzSession opens a session on h (initialize, notifications/initialized)
// and returns its id.
func fuzzSession(t *testing.T, h http.Handler) string {
	t.Helper()
	w := fuzzServe(t, h, fuzzRequest([]byte(initialize), 0, 0, 0, 0))
	id := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q: %s", w.Code, id, w.Body.Bytes())
	}
	r := fuzzRequest([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), 0, 0, 3, 0)
	r.Header.Set("Mcp-Session-Id", id)
	if w := fuzzServe(t, h, r); w.Code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", w.Code, w.Body.Bytes())
	}
	return id
}
