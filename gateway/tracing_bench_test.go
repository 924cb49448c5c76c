package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkToolsCallTracing measures what tracing costs a fast-path
// tools/call (BenchmarkToolsCall's, in-process upstream): off, off with a
// traceparent passed through, and on with every trace sampled or none,
// spans batched to an exporter that drops them (the SDK's whole cost,
// without a network).
//
//	go test ./gateway -run '^$' -bench ToolsCallTracing -benchmem -count 5
func BenchmarkToolsCallTracing(b *testing.B) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"7","name":"a thing","state":"active","tags":["x","y"],"owner":{"id":1,"name":"ops"}}`)
	})
	body := rpc("7", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`)
	for _, c := range []struct {
		name        string
		ratio       float64 // <0: tracing off
		traceparent bool
	}{
		{"off", -1, false},
		{"off-traceparent", -1, true},
		{"on-sampled", 1, true},
		{"on-unsampled", 0, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := &Options{}
			if c.ratio >= 0 {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
					sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))))
				defer tp.Shutdown(context.Background())
				opts.TracerProvider = tp
			}
			cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: api}}}
			g, err := New(context.Background(), cfg, opts)
			if err != nil {
				b.Fatal(err)
			}
			h := g.Handler()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				req.Header.Set("Authorization", "Bearer bench-token")
				if c.traceparent {
					req.Header.Set("Traceparent", inTraceparent)
				}
				w := &benchWriter{header: http.Header{}}
				h.ServeHTTP(w, req)
				if w.code != http.StatusOK || !strings.HasPrefix(string(w.head), `{"jsonrpc":"2.0","id":7,"result"`) {
					b.Fatalf("answer %d: %.300s", w.code, w.head)
				}
			}
		})
	}
}
