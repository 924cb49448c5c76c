package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
)

// BenchmarkStatefulToolsCall measures one tools/call on an open stateful
// session (go-sdk serves it), from the POST's body to the answer, the
// upstream in this process: the in-process side of mcpgate-bench's
// stateful row (docs/performance.md, every mode).
//
//	go test ./gateway -run '^$' -bench StatefulToolsCall -benchmem
func BenchmarkStatefulToolsCall(b *testing.B) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"}}`)
	})
	cfg := &Config{Stateful: true, Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: api}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := g.Handler()
	post := func(session, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	w := post("", rpc("1", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`))
	session := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || session == "" {
		b.Fatalf("initialize: %d %q: %.300s", w.Code, session, w.Body.String())
	}
	if w := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code != http.StatusAccepted {
		b.Fatalf("notifications/initialized: %d", w.Code)
	}
	body := rpc("7", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		bw := &benchWriter{header: http.Header{}}
		h.ServeHTTP(bw, req)
		if head := strings.TrimPrefix(string(bw.head), "event: message\ndata: "); bw.code != http.StatusOK || !strings.HasPrefix(head, `{"jsonrpc":"2.0","id":7,"result"`) {
			b.Fatalf("answer %d: %.300s", bw.code, bw.head)
		}
	}
}

// BenchmarkIdleSessions opens b.N stateful sessions (initialize and
// notifications/initialized, nothing else) and reports the live heap and
// the goroutines each leaves behind: the in-process side of mcpgate-bench's
// -sessions line (docs/performance.md, every mode). With -memprofile, the
// heap profile's inuse_space says whose they are.
//
//	go test ./gateway -run '^$' -bench IdleSessions -benchtime 2000x
func BenchmarkIdleSessions(b *testing.B) {
	cfg := &Config{Stateful: true, MaxSessions: b.N + 1, Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: http.NotFoundHandler()}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	h := g.Handler()
	post := func(session, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	init := rpc("1", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	heap := func() (uint64, int) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc + ms.StackInuse, runtime.NumGoroutine()
	}
	h0, g0 := heap()
	b.ResetTimer()
	for range b.N {
		w := post("", init)
		session := w.Header().Get("Mcp-Session-Id")
		if w.Code != http.StatusOK || session == "" {
			b.Fatalf("initialize: %d %q: %.300s", w.Code, session, w.Body.String())
		}
		if w := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code != http.StatusAccepted {
			b.Fatalf("notifications/initialized: %d", w.Code)
		}
	}
	b.StopTimer()
	h1, g1 := heap()
	b.ReportMetric(float64(h1-h0)/float64(b.N), "live-B/session")
	b.ReportMetric(float64(g1-g0)/float64(b.N), "goroutines/session")
}

// BenchmarkStdioToolsCall measures one tools/call over stdio (go-sdk serves
// it through the gateway's stdio transport), from the line written to the
// answer's line read, the upstream in this process: the in-process side of
// mcpgate-bench's stdio row (docs/performance.md, every mode).
//
//	go test ./gateway -run '^$' -bench StdioToolsCall -benchmem
func BenchmarkStdioToolsCall(b *testing.B) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"}}`)
	})
	cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: api}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(ctx, inR, outW) }()
	defer func() { cancel(); inW.Close(); outR.Close(); <-done }()
	lines := bufio.NewReader(outR)
	call := func(line string, want string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		got, err := lines.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, want) {
			b.Fatalf("answer %.300q (%v), want it to start %s", got, err, want)
		}
	}
	call(rpc("1", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`), `{"jsonrpc":"2.0","id":1,"result"`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	body := rpc("7", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`)
	b.ReportAllocs()
	for b.Loop() {
		call(body, `{"jsonrpc":"2.0","id":7,"result"`)
	}
}

// BenchmarkPlaybookCall measures one playbook tools/call (demo/fast: an
// execute and one status poll, the example engine in this process) over
// /mcp and on the NoETL-compatible endpoint of the same gateway: the
// in-process side of mcpgate-bench's playbook and noetl rows
// (docs/performance.md, every mode).
//
//	go test ./gateway -run '^$' -bench PlaybookCall -benchmem
func BenchmarkPlaybookCall(b *testing.B) {
	e := engine.New(nil)
	cfg := &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: e.Handler(), Playbooks: &Playbooks{}}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := g.Handler()
	for _, path := range []string{"/mcp", "/api/mcp/playbook/demo/fast/jsonrpc"} {
		b.Run(strings.Trim(strings.ReplaceAll(path, "/", "-"), "-")[:3], func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				body := rpc("7", "tools/call", `{"name":"demo_fast","arguments":{"name":"b`+strconv.Itoa(n)+`"}}`)
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				bw := &benchWriter{header: http.Header{}}
				h.ServeHTTP(bw, req)
				if head := strings.TrimPrefix(string(bw.head), "event: message\ndata: "); bw.code != http.StatusOK || !strings.HasPrefix(head, `{"jsonrpc":"2.0","id":7,"result"`) {
					b.Fatalf("answer %d: %.300s", bw.code, bw.head)
				}
			}
		})
	}
}
