package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestForwardDifferential calls each tool through Forward and through
// go-sdk's session (CallTool) on every kind of Streamable HTTP server and
// requires the same result, and the same log messages.
func TestForwardDifferential(t *testing.T) {
	for _, m := range serverModes {
		if m.o.sse {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			ts := newTestServer(t, m.o)
			var mu sync.Mutex
			var viaSDK []string
			u := newUpstream(t, cfgFor(ts, m.o), &Options{LogLevel: "info"})
			relay := &Relay{Log: func(_ context.Context, p *mcp.LoggingMessageParams) {
				mu.Lock()
				viaSDK = append(viaSDK, fmt.Sprint(p.Level, " ", p.Logger, " ", p.Data))
				mu.Unlock()
			}}
			for _, tc := range []struct{ name, args string }{
				{"echo", `{"x":1}`},
				{"add", `{"a":2,"b":3}`},
				{"image", `{}`},
				{"log", `{}`},
				{"progress", `{}`},
				{"echo", ``},
			} {
				var notes []string
				fres, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: tc.name, Arguments: json.RawMessage(tc.args)}, func(p *mcp.LoggingMessageParams) {
					notes = append(notes, fmt.Sprint(p.Level, " ", p.Logger, " ", p.Data))
				})
				if err != nil {
					t.Fatalf("%s: Forward: %v", tc.name, err)
				}
				mu.Lock()
				viaSDK = nil
				mu.Unlock()
				res, err := u.CallTool(t.Context(), "", &mcp.CallToolParams{Name: tc.name, Arguments: json.RawMessage(cmpOr(tc.args, "{}"))}, false, relay)
				if err != nil {
					t.Fatalf("%s: CallTool: %v", tc.name, err)
				}
				want, _ := json.Marshal(res)
				raw, _ := json.Marshal(fres)
				var got, wantV any
				_ = json.Unmarshal(raw, &got)
				_ = json.Unmarshal(want, &wantV)
				if !reflect.DeepEqual(got, wantV) {
					t.Errorf("%s: Forward %s\n CallTool %s", tc.name, raw, want)
				}
				mu.Lock()
				if tc.name == "log" && !m.o.json && !reflect.DeepEqual(notes, viaSDK) {
					t.Errorf("log messages: Forward %q, CallTool %q", notes, viaSDK)
				}
				mu.Unlock()
			}
		})
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// TestForwardNotForwarded: what Forward does not speak to, it sends
// nothing to and says so, and the caller's go-sdk path serves.
func TestForwardNotForwarded(t *testing.T) {
	sse := newTestServer(t, serverOpts{sse: true})
	plain := newTestServer(t, serverOpts{})
	for _, tc := range []struct {
		name    string
		cfg     Config
		version string
	}{
		{"legacy SSE", Config{URL: sse.URL, Transport: TransportSSE}, "2025-06-18"},
		{"a 2026-07-28 caller", Config{URL: plain.URL}, "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.cfg, nil)
			before := sse.calls.Load() + plain.calls.Load()
			_, err := u.Forward(t.Context(), "", tc.version, &ForwardParams{Name: "echo"}, nil)
			if !errors.Is(err, ErrNotForwarded) {
				t.Errorf("Forward: %v, want ErrNotForwarded", err)
			}
			if n := sse.calls.Load() + plain.calls.Load() - before; n != 0 {
				t.Errorf("%d tools/call reached an upstream", n)
			}
		})
	}
}

// TestForwardVersion: the call goes on a session of the caller's version,
// as the server supports it, and carries that version; a pinned
// protocol_version wins.
func TestForwardVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		pinned   string
		caller   string
		want     string
	}{
		{"the caller's", nil, "", "2025-06-18", "2025-06-18"},
		{"the caller's, older", nil, "", "2025-03-26", "2025-03-26"},
		{"what the server supports", []string{"2025-03-26"}, "", "2025-06-18", "2025-03-26"},
		{"pinned", nil, "2025-11-25", "2025-06-18", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			ts := newTestServer(t, serverOpts{versions: tc.versions})
			inner := ts.srv.Config.Handler
			ts.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					mu.Lock()
					seen = append(seen, r.Header.Get("Mcp-Protocol-Version"))
					mu.Unlock()
				}
				inner.ServeHTTP(w, r)
			})
			u := newUpstream(t, Config{URL: ts.URL, ProtocolVersion: tc.pinned}, nil)
			if _, err := u.Forward(t.Context(), "", tc.caller, &ForwardParams{Name: "echo"}, nil); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if last := seen[len(seen)-1]; last != tc.want {
				t.Errorf("tools/call sent with Mcp-Protocol-Version %q, want %q (all: %q)", last, tc.want, seen)
			}
		})
	}
}

// TestForwardSessionLost: a stateful upstream that forgot the session
// (404) gets a new one, and the call, which did not run, is sent once more.
func TestForwardSessionLost(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	u := newUpstream(t, Config{URL: ts.URL}, nil)
	call := func() string {
		res, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "add", Arguments: json.RawMessage(`{"a":1,"b":1}`)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res)
		return string(raw)
	}
	call()
	inits := ts.inits.Load()
	ts.swap(serverOpts{}) // a restart: every session forgotten
	if got := call(); !strings.Contains(got, `"sum":2`) {
		t.Errorf("after the restart: %s", got)
	}
	if n := ts.inits.Load() - inits; n != 1 {
		t.Errorf("%d handshakes after the restart, want 1", n)
	}
}

// TestForwardCancel: a caller that gives up ends the upstream's handler,
// by notifications/cancelled: a stateful go-sdk server does not end a
// pre-2026-07-28 handler when its POST goes away. (A stateless one, on
// those versions, ends it on neither: the upstream cannot be told, as it
// could not by the caller itself.)
func TestForwardCancel(t *testing.T) {
	for _, o := range []serverOpts{{}, {json: true}} {
		t.Run(fmt.Sprint("json=", o.json), func(t *testing.T) {
			ts := newTestServer(t, o)
			u := newUpstream(t, Config{URL: ts.URL}, nil)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				_, err := u.Forward(ctx, "", "2025-06-18", &ForwardParams{Name: "block"}, nil)
				errc <- err
			}()
			<-ts.blocking
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("error: %v", err)
			}
			if reason := <-ts.cancelled; reason == "not cancelled" {
				t.Error("the upstream's handler was not cancelled")
			}
		})
	}
}

// TestForwardHostile: an answer that is not the call's result is an error
// that names what is wrong, never a result; a request of the upstream's on
// the call's stream is refused, the call goes on.
func TestForwardHostile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter, id string)
		wantErr string // "": a result
	}{
		{"not JSON", func(w http.ResponseWriter, id string) { jsonAnswer(w, `not json`) }, "the answer is not JSON-RPC"},
		{"another id", func(w http.ResponseWriter, id string) {
			jsonAnswer(w, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
		}, "not the call's response"},
		{"no result", func(w http.ResponseWriter, id string) { jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`}`) }, "neither result nor error"},
		{"result not an object", func(w http.ResponseWriter, id string) { jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`,"result":[1]}`) }, "the result does not decode"},
		{"wrong jsonrpc", func(w http.ResponseWriter, id string) { jsonAnswer(w, `{"jsonrpc":"1.0","id":1,"result":{}}`) }, "not 2.0"},
		{"too deep", func(w http.ResponseWriter, id string) {
			jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"a":`+strings.Repeat("[", 2000)+strings.Repeat("]", 2000)+`}}`)
		}, "levels deep"},
		{"JSON-RPC error", func(w http.ResponseWriter, id string) {
			jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"unknown tool \"x\""}}`)
		}, `unknown tool "x"`},
		{"HTTP 500", func(w http.ResponseWriter, id string) { http.Error(w, "boom", http.StatusInternalServerError) }, "HTTP 500: boom"},
		{"another media type", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<p>")
		}, `Content-Type "text/html"`},
		{"too large", func(w http.ResponseWriter, id string) {
			jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`+strings.Repeat("x", 5000)+`"}]}}`)
		}, "answer over max_response_bytes (4096 bytes)"},
		{"stream ends first", func(w http.ResponseWriter, id string) {
			sseAnswer(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
		}, "ended before the call's response"},
		{"stream with a request", func(w http.ResponseWriter, id string) {
			sseAnswer(w, `{"jsonrpc":"2.0","id":"q","method":"sampling/createMessage","params":{}}`, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`)
		}, ""},
		{"event lines longer than the reader's buffer", func(w http.ResponseWriter, id string) {
			long := strings.Repeat("y", 3000)
			sseAnswer(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+long+long+`"}}`,
				`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`+long+`"}],"structuredContent":{"x":"`+long+`"}}}`)
		}, ""},
		{"resultType and hop _meta", func(w http.ResponseWriter, id string) {
			jsonAnswer(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"keep":1}}}`)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := make(chan string, 1)
			srv := forwardHostile(t, tc.answer, refused)
			max := int64(4096)
			if strings.Contains(tc.name, "longer") {
				max = 1 << 20
			}
			u := newUpstream(t, Config{URL: srv, MaxResponseBytes: max}, nil)
			res, err := u.Forward(t.Context(), "", "2025-06-18", &ForwardParams{Name: "x"}, nil)
			raw, _ := json.Marshal(res)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `upstream "test"`) {
					t.Fatalf("Forward: %s, %v; want an error naming the upstream and %q", raw, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), "resultType") || strings.Contains(string(raw), "io.modelcontextprotocol/") || (strings.Contains(tc.name, "_meta") && !strings.Contains(string(raw), `"keep":1`)) {
				t.Errorf("result %s: the hop's fields are not taken out, or the caller's are", raw)
			}
			if strings.Contains(tc.name, "longer") && !strings.Contains(string(raw), `"text":"`+strings.Repeat("y", 3000)+`"`) {
				t.Errorf("a long line came back changed: %.200s…", raw)
			}
			if strings.Contains(tc.name, "request") {
				if got := <-refused; !strings.Contains(got, `"id":"q"`) || !strings.Contains(got, `-32601`) {
					t.Errorf("the upstream's request was answered %s", got)
				}
			}
		})
	}
}

func jsonAnswer(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, body)
}

func sseAnswer(w http.ResponseWriter, msgs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, m := range msgs {
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
	}
}

// forwardHostile answers tools/call with answer, and everything else as a
// stateless go-sdk server would; a JSON-RPC response it is sent (the
// gateway refusing a request) goes to refused.
func forwardHostile(t *testing.T, answer func(http.ResponseWriter, string), refused chan<- string) string {
	ts := newTestServer(t, serverOpts{stateless: true})
	inner := ts.srv.Config.Handler
	ts.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			var m struct {
				Method string
				ID     json.RawMessage
			}
			_ = json.Unmarshal(body, &m)
			switch {
			case m.Method == "tools/call":
				answer(w, string(m.ID))
				return
			case m.Method == "" && len(m.ID) > 0:
				select {
				case refused <- string(body):
				default:
				}
				w.WriteHeader(http.StatusAccepted)
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	return ts.URL
}

// FuzzForwardAnswer: whatever an upstream answers a forwarded call with,
// as JSON or as an event stream, Forward's reading of it does not panic;
// a stream's response is read whole however long its lines (the oracle:
// lastData); what it returns as a result marshals without the hop's
// resultType or reserved _meta.
func FuzzForwardAnswer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"c","result":{"content":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"c","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/a":1}}}`))
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"c\",\"result\":{}}\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\n data: \"id\":\"c\"}\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"roots/list\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"c\",\"result\":{}}\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"c\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"" + strings.Repeat("z", 9000) + "\"}]}}\n\n"))
	u := &Upstream{name: "fuzz", opts: Options{LogLevel: "info"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(res *mcp.CallToolResult, err error) {
			if err != nil {
				return
			}
			b, err := json.Marshal(res)
			if err != nil {
				return // a result go-sdk cannot marshal either
			}
			if bytes.Contains(b, []byte(`"resultType"`)) || bytes.Contains(b, []byte(`"io.modelcontextprotocol/`)) {
				t.Fatalf("result %s keeps the hop's fields", b)
			}
		}
		h := &hop{u: u, id: "c", note: func(p *mcp.LoggingMessageParams) {
			if !atLeast(p.Level, "info") {
				t.Fatalf("a log at %q was relayed", p.Level)
			}
		}}
		if m, err := parseMessage(body); err == nil {
			check(h.result(t.Context(), m))
		}
		m, err := h.readEvents(t.Context(), bytes.NewReader(body))
		if err == nil && m.Method == "" {
			// The stream's response, read whole however long its lines.
			if want := lastData(body); want != nil {
				if w, perr := parseMessage(want); perr == nil && !bytes.Equal(w.Result, m.Result) {
					t.Fatalf("result %q, the stream's response says %q", m.Result, w.Result)
				}
			}
			check(h.result(t.Context(), m))
		}
	})
}

// lastData is the data of the first event of body that parses as the
// call's response, as the fuzz's oracle: lines "data: …" of one event
// joined by newlines.
func lastData(body []byte) []byte {
	var data [][]byte
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				d := bytes.Join(data, []byte("\n"))
				if m, err := parseMessage(d); err == nil && m.Method == "" {
					return d
				}
			}
			data = nil
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
	}
	return nil
}
