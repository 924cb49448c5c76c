package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchGateways builds the same catalog twice, with and without the fast
// path, calls going to api in this process (so that what is measured is the
// gateway, not a network hop).
func benchGateways(b *testing.B, name string, doc []byte, all bool, api http.Handler) map[string]http.Handler {
	b.Helper()
	out := map[string]http.Handler{}
	for _, path := range []string{"fast", "sdk"} {
		cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: name, Document: doc, ExposeAll: all, Handler: api}}}
		g, err := New(context.Background(), cfg, &Options{DisableFastPath: path == "sdk"})
		if err != nil {
			b.Fatal(err)
		}
		out[path] = g.Handler()
		if path == "fast" {
			r, _ := g.newMux()
			out["fast-router"] = r // /mcp through gorilla/mux alone (see Handler)
		}
	}
	return out
}

// serveOnce sends one stateless MCP POST through h and checks the answer.
func serveOnce(b *testing.B, h http.Handler, body string) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer bench-token")
	w := &benchWriter{header: http.Header{}}
	h.ServeHTTP(w, req)
	// The fast path answers application/json, go-sdk one SSE event.
	head := strings.TrimPrefix(string(w.head), "event: message\ndata: ")
	if w.code != http.StatusOK || !strings.HasPrefix(head, `{"jsonrpc":"2.0","id":7,"result"`) {
		b.Fatalf("answer %d: %.300s", w.code, w.head)
	}
}

// benchWriter is a ResponseWriter that keeps only the start of the answer,
// so that the benchmarks count the gateway's allocations, not a recorder's.
type benchWriter struct {
	header http.Header
	code   int
	head   []byte
	n      int
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if len(w.head) < 128 {
		w.head = append(w.head, p[:min(len(p), 128-len(w.head))]...)
	}
	w.n += len(p)
	return len(p), nil
}

func (w *benchWriter) Flush() {}

// benchCall is the gateways of benchGateways over an in-process upstream
// that answers a small JSON object, and the body of a tools/call of a GET.
func benchCall(b *testing.B) (map[string]http.Handler, string) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"}}`)
	})
	return benchGateways(b, "fast.json", fastDoc(0), false, api), rpc("7", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`)
}

// BenchmarkToolsCall measures one stateless tools/call of a GET, from the
// POST's body to the answer, through the fast path and through go-sdk
// (the upstream is in-process and answers a small JSON object). It is the
// benchmark fastPath cites.
//
//	go test ./gateway -run '^$' -bench ToolsCall -benchmem
func BenchmarkToolsCall(b *testing.B) {
	hs, body := benchCall(b)
	for _, path := range []string{"fast", "sdk"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serveOnce(b, hs[path], body)
			}
		})
	}
}

// BenchmarkRouteMCP measures what Handler's exact match of /mcp saves: the
// same fast-path tools/call, served by Handler and by the gorilla/mux router
// alone. The difference between the two is the router's cost per call.
//
//	go test ./gateway -run '^$' -bench RouteMCP -benchmem -count 6
func BenchmarkRouteMCP(b *testing.B) {
	hs, body := benchCall(b)
	for _, path := range []string{"fast", "fast-router"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serveOnce(b, hs[path], body)
			}
		})
	}
}

// BenchmarkToolsList measures one stateless tools/list: of GitHub's REST API
// with every operation exposed (600+ tools, 1.5 MB of JSON) when the shared
// corpus is beside the repository, and of a small catalog always.
//
//	go test ./gateway -run '^$' -bench ToolsList -benchmem
func BenchmarkToolsList(b *testing.B) {
	docs := []struct {
		name string
		doc  []byte
		all  bool
	}{{"small", fastDoc(20), false}}
	if data, err := os.ReadFile(filepath.Join(corpusDir, "github-api-2020.json")); err == nil {
		docs = append(docs, struct {
			name string
			doc  []byte
			all  bool
		}{"github", data, true})
	}
	for _, d := range docs {
		hs := benchGateways(b, d.name+".json", d.doc, d.all, http.NotFoundHandler())
		body := rpc("7", "tools/list", "")
		for _, path := range []string{"fast", "sdk"} {
			b.Run(d.name+"/"+path, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					serveOnce(b, hs[path], body)
				}
			})
		}
	}
}

// BenchmarkToolsCallLarge measures one stateless tools/call whose upstream
// answers 1 MB of JSON (a listing), through the fast path and go-sdk: what
// a call allocates to map and write a large answer, for tools whose output
// schema checks only that it is an object ("object") and one that names
// its properties, so that checking it means decoding it ("decoded").
//
//	go test ./gateway -run '^$' -bench ToolsCallLarge -benchmem
func BenchmarkToolsCallLarge(b *testing.B) {
	answer := heldAnswer(1_000_000)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
	body := rpc("7", "tools/call", `{"name":"big","arguments":{}}`)
	for _, d := range []struct{ name, doc string }{{"object", bigDoc}, {"decoded", listingDoc}} {
		hs := benchGateways(b, "big.json", []byte(d.doc), false, api)
		for _, path := range []string{"fast", "sdk"} {
			b.Run(d.name+"/"+path, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(answer)))
				for b.Loop() {
					serveOnce(b, hs[path], body)
				}
			})
		}
	}
}
