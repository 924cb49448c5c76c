package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// releaseBlock ends the "block" tool's handler that a test left running.
func releaseBlock(t *testing.T, ts *testServer, cancel context.CancelFunc) {
	cancel()
	select {
	case <-ts.cancelled:
	case <-time.After(5 * time.Second):
	}
}

// TestReviewForwardConcurrentSameSession: two callers of an upstream whose
// session they share (auth none or static, or one forward-mode caller's
// concurrent calls) call at once. Every forwarded call carries the JSON-RPC
// id 1, so while one is in flight a go-sdk upstream refuses the other
// ("duplicate in-flight request ID 1"); go-sdk's own path (CallTool) serves
// both.
func TestReviewForwardConcurrentSameSession(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL, Timeout: 10 * time.Second}, nil)
	// Caller A: a long call.
	ctxA, cancelA := context.WithCancel(t.Context())
	defer releaseBlock(t, ts, cancelA)
	go u.Forward(ctxA, "Bearer shared", "2025-06-18", &ForwardParams{Name: "block"}, nil)
	<-ts.blocking
	// Caller B, on the same credential and version: a quick call.
	res, err := u.Forward(t.Context(), "Bearer shared", "2025-06-18", &ForwardParams{Name: "echo", Arguments: json.RawMessage(`{"b":1}`)}, nil)
	if err != nil {
		t.Errorf("caller B's call failed while caller A's is in flight: %v", err)
	} else if got := text(t, res); got != `{"b":1}` {
		t.Errorf("caller B got %s", got)
	}
}

// TestReviewForwardCancelHitsOtherCaller: a caller that hangs up sends
// notifications/cancelled naming its own call's id, which no other call on
// the session carries (it once named id 1, which every forwarded call
// carried: on a shared session it cancelled another caller's call).
func TestReviewForwardCancelHitsOtherCaller(t *testing.T) {
	ids := make(chan string, 8)
	cancelledID := make(chan string, 1)
	srv := rawUpstream(t, func(http.ResponseWriter, json.RawMessage, []byte) {})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "tools/call": // runs until its caller goes away
			ids <- string(m.ID)
			<-r.Context().Done()
		case "notifications/cancelled":
			cancelledID <- string(m.Params.RequestID)
			w.WriteHeader(http.StatusAccepted)
		default:
			inner.ServeHTTP(w, r)
		}
	})
	u := newUpstream(t, Config{URL: srv.URL, Timeout: 10 * time.Second}, nil)
	var sent []string
	for range 2 {
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := u.Forward(ctx, "Bearer shared", "2025-06-18", &ForwardParams{Name: "block"}, nil)
			errc <- err
		}()
		sent = append(sent, <-ids)
		cancel()
		<-errc
		if got := <-cancelledID; got != sent[len(sent)-1] {
			t.Errorf("notifications/cancelled names %s; the call was %s", got, sent[len(sent)-1])
		}
	}
	if sent[0] == sent[1] {
		t.Errorf("two calls on one session carried the same id %s", sent[0])
	}
}

// rawUpstream is a minimal stateful MCP server over Streamable HTTP: it
// answers initialize, notifications and responses itself and hands every
// tools/call (its raw id and body) to call.
func rawUpstream(t *testing.T, call func(w http.ResponseWriter, id json.RawMessage, body []byte)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`, m.ID)
		case m.Method == "tools/call":
			call(w, m.ID, body)
		case m.Method == "server/discover": // not a 2026-07-28 server
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
		case m.Method == "ping" || m.Method == "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
		default: // notifications, responses
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReviewForwardResentAfterServerError: an upstream that ran a call
// and answered it with a JSON-RPC error in the implementation-defined
// server-error range (-32000…-32099: here -32003 and -32005, which go-sdk
// also uses for its own transport failures) gets the call sent a second
// time: it ran, and is not idempotent by any hint.
func TestReviewForwardResentAfterServerError(t *testing.T) {
	for _, code := range []int{-32003, -32005} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var calls atomic.Int32
			srv := rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
				calls.Add(1) // the tool ran (say it sent an e-mail), then failed
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"quota exceeded after sending"}}`, id, code)
			})
			u := newUpstream(t, Config{URL: srv.URL}, nil)
			_, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "send_mail"}, nil)
			if n := calls.Load(); n != 1 {
				t.Errorf("the upstream ran the call %d times (Forward: %v)", n, err)
			}
		})
	}
}

// TestReviewForwardRefusalsUnbounded: every request an upstream puts on a
// call's stream is refused by a POST of its own, each on its own goroutine
// (refuse: go u.postMessage), with no bound: one answer within
// max_response_bytes (16 MiB by default: ~300,000 such requests) makes the
// gateway open that many goroutines and upstream requests at once.
func TestReviewForwardRefusalsUnbounded(t *testing.T) {
	const n = 2000
	var inFlight, peak atomic.Int32
	hold := make(chan struct{})
	srv := rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		var b bytes.Buffer
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"roots/list\"}\n\n", 100+i)
		}
		fmt.Fprintf(&b, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", id)
		w.Write(b.Bytes())
	})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"error"`)) && bytes.Contains(body, []byte(`-32601`)) {
			c := inFlight.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			select { // a slow upstream
			case <-hold:
			case <-r.Context().Done():
			}
			inFlight.Add(-1)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		inner.ServeHTTP(w, r)
	})
	defer close(hold)
	u := newUpstream(t, Config{URL: srv.URL, MaxResponseBytes: 1 << 20}, nil)
	_, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d requests", maxRefusals)) {
		t.Errorf("an answer with %d requests of the upstream's: %v; want the call failed, naming the bound", n, err)
	}
	eventually(t, "the refusals sent", func() bool { return inFlight.Load() == maxRefusals })
	if p := peak.Load(); p > maxRefusals {
		t.Errorf("one call's answer made the gateway send %d refusals at once; want at most %d", p, maxRefusals)
	}
}

// TestReviewForwardResultPassesThroughUnchecked: go-sdk's path decodes
// the upstream's result into a CallToolResult and hands the caller only
// its fields (content of the known types, structuredContent, isError,
// _meta): a result go-sdk cannot decode is an error, and fields of the
// upstream's own are dropped. Forward passes the result's bytes whole, so
// a caller of the fast path gets what the same caller through go-sdk
// never sees.
func TestReviewForwardResultPassesThroughUnchecked(t *testing.T) {
	for _, tc := range []struct{ name, result string }{
		{"extra fields", `{"content":[{"type":"text","text":"hi"}],"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"password?"}}},"requestState":"x","nextCursor":"y"}`},
		{"unknown content type", `{"content":[{"type":"script","text":"rm -rf /"}]}`},
		{"content not a list", `{"content":"hi","isError":"yes"}`},
		{"content null", `{"content":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, tc.result)
			})
			u := newUpstream(t, Config{URL: srv.URL}, nil)
			fres, ferr := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "x"}, nil)
			raw, _ := json.Marshal(fres)
			res, cerr := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: "x", Arguments: map[string]any{}}, false, nil)
			var viaSDK any
			if cerr == nil {
				if res.Content == nil {
					res.Content = []mcp.Content{} // as the gateway writes it
				}
				b, _ := json.Marshal(res)
				_ = json.Unmarshal(b, &viaSDK)
			}
			var viaForward any
			if ferr == nil {
				_ = json.Unmarshal(raw, &viaForward)
			}
			if (ferr == nil) != (cerr == nil) || !reflect.DeepEqual(viaForward, viaSDK) {
				t.Errorf("Forward: %s (%v)\nCallTool: %v (%v)", raw, ferr, viaSDK, cerr)
			}
		})
	}
}

// TestReviewForwardRedirectKeepsCredential (sound): an upstream that
// redirects the call to another origin gets neither the credential nor
// the call there.
func TestReviewForwardRedirectKeepsCredential(t *testing.T) {
	var stolen atomic.Value
	stolen.Store("")
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Store(r.Header.Get("Authorization") + " " + r.Method)
		jsonAnswer(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	}))
	defer thief.Close()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		srv := rawUpstream(t, func(w http.ResponseWriter, _ json.RawMessage, _ []byte) {
			w.Header().Set("Location", thief.URL+"/mcp")
			w.WriteHeader(status)
		})
		u := newUpstream(t, Config{URL: srv.URL}, nil)
		_, err := u.Forward(t.Context(), "Bearer secret-token", "2025-06-18", &ForwardParams{Name: "x"}, nil)
		if err == nil {
			t.Errorf("%d: a redirect to another origin answered the call", status)
		}
		if s := stolen.Load().(string); s != "" {
			t.Errorf("%d: the other origin got %q", status, s)
		}
	}
}

// TestReviewForwardEndlessStream (sound): an upstream that keeps the
// call's stream open, sending log lines forever, is cut at the call's
// timeout. It sends the next line once the last one was relayed (no
// pacing by the clock), until the test ends.
func TestReviewForwardEndlessStream(t *testing.T) {
	relayed, done := make(chan struct{}, 1), make(chan struct{})
	srv := rawUpstream(t, func(w http.ResponseWriter, _ json.RawMessage, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-relayed:
			case <-done:
				return
			}
		}
	})
	t.Cleanup(func() { close(done) }) // before the server's Close, which waits for this handler
	u := newUpstream(t, Config{URL: srv.URL, Timeout: 300 * time.Millisecond}, nil)
	start := time.Now()
	var notes atomic.Int32
	_, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "x"}, func(*mcp.LoggingMessageParams) {
		notes.Add(1)
		select {
		case relayed <- struct{}{}:
		default:
		}
	})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("after %v: %v", time.Since(start), err)
	}
	if notes.Load() == 0 {
		t.Error("no log line relayed")
	}
}

// TestReviewForwardLogsEndpointKey: the endpoint's query may hold a key
// (callErr takes it out of what callers read), but Forward's own debug
// logs ("upstream message not delivered", "upstream session lost") carry
// transport errors, and with them the URL, whole.
func TestReviewForwardLogsEndpointKey(t *testing.T) {
	var logs syncBuffer
	var srv *httptest.Server
	srv = rawUpstream(t, func(w http.ResponseWriter, id json.RawMessage, _ []byte) {
		srv.Listener.Close() // the upstream goes away: the refusal below is not delivered
		sseAnswer(w, `{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
		w.(http.Flusher).Flush()
		// The answer ends once the refusal failed: its connection is busy
		// until then, so the refusal needs a new one, which the closed
		// listener refuses.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "not delivered") && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		sseAnswer(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, id))
	})
	u := newUpstream(t, Config{URL: srv.URL + "/mcp?api_key=SECRET-KEY"}, &Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if _, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the refusal's failure logged", func() bool { return strings.Contains(logs.String(), "not delivered") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "SECRET-KEY") && (strings.Contains(line, "not delivered") || strings.Contains(line, "session lost")) {
			t.Errorf("the endpoint's key is logged: %s", line)
		}
	}
}

var _ sync.Mutex

// TestReviewForwardSessionsPerVersion: sessions are kept per (credential,
// protocol version), so one caller that varies the header over the four
// versions the fast path takes makes up to four sessions of an upstream
// that speaks one version (docs/federation.md says so). Once the upstream
// has answered an offer with another version, that offer goes on that
// version's session: a second round makes none.
func TestReviewForwardSessionsPerVersion(t *testing.T) {
	ts := newTestServer(t, serverOpts{versions: []string{"2025-03-26"}})
	u := newUpstream(t, Config{URL: ts.URL}, nil)
	versions := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	for round := 1; round <= 2; round++ {
		for _, v := range versions {
			if _, err := u.Forward(t.Context(), "Bearer one-caller", v, &ForwardParams{Name: "echo"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := ts.inits.Load(); n > int32(len(versions)) {
			t.Errorf("round %d: %d handshakes for one credential and %d versions", round, n, len(versions))
		}
		if round == 1 {
			ts.inits.Store(0)
		} else if n := ts.inits.Load(); n != 0 {
			t.Errorf("the second round made %d handshakes; want 0", n)
		}
	}
}
