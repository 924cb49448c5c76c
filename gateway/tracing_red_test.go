package gateway

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTracingBoundsClientStrings: the method and the tool name of a span
// are the client's to choose, of any length up to max_body_bytes. A span
// carrying a megabyte of them is exported whole: one request can make the
// batch it is in (other callers' spans too) larger than a collector takes
// (4 MiB by default for an OTLP/gRPC receiver), and every such batch is
// dropped. The gateway keeps neither past a bound in a span's name or
// attributes.
func TestTracingBoundsClientStrings(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, url, _ := tracedGateway(t, Config{}, Options{TracerProvider: tp})
	long := strings.Repeat("a", 1<<20)
	sendRaw(t, url, rpc("1", "tools/call", `{"name":"`+long+`","arguments":{}}`), nil)
	sendRaw(t, url, rpc("2", "tools/"+long, `{}`), nil)
	sendRaw(t, url, rpc("3", "tools/call", `{"name":"get_thing","arguments":{"id":"1"}}`), nil)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) < 3 {
		t.Fatalf("spans %v, want one per request at least", spanNames(spans))
	}
	tool := false
	for _, s := range spans {
		if len(s.Name) > maxSpanString+len("tools/call ") {
			t.Errorf("a span named with %d bytes", len(s.Name))
		}
		for _, a := range s.Attributes {
			if v := a.Value.Emit(); len(v) > maxSpanString {
				t.Errorf("span %.40s: attribute %s of %d bytes", s.Name, a.Key, len(v))
			} else if a.Key == attrTool && v == "get_thing" {
				tool = true
			}
		}
	}
	if !tool {
		t.Error("a served tool's name is not on its span")
	}
}
