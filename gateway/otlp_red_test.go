package gateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestOTLPFramingMatchesCollector: the request written with protowire is,
// byte for byte, the collector's ExportTraceServiceRequest marshalled.
func TestOTLPFramingMatchesCollector(t *testing.T) {
	var spans []*tracepb.ResourceSpans
	for i := 0; i < 3; i++ {
		rs := &tracepb.ResourceSpans{SchemaUrl: "s", ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "x"}}}}
		for j := 0; j < 200*i; j++ {
			rs.ScopeSpans[0].Spans = append(rs.ScopeSpans[0].Spans, &tracepb.Span{Name: string(bytes.Repeat([]byte("n"), j)), TraceId: make([]byte, 16), SpanId: make([]byte, 8)})
		}
		spans = append(spans, rs)
	}
	got, err := otlpRequest(spans)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: spans})
	if !bytes.Equal(got, want) {
		t.Fatalf("framing differs: %d vs %d bytes", len(got), len(want))
	}
}

// TestOTLPHeaderUnusable: a header value that percent-decodes to a line
// break is a start-up error naming the variable, not a client whose every
// export fails (found by a red-team review).
func TestOTLPHeaderUnusable(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c, err := newOTLPClient(srv.URL, func(n string) string {
		if n == "OTEL_EXPORTER_OTLP_HEADERS" {
			return "api-key=a%0D%0AX-Injected: 1"
		}
		return ""
	})
	if err != nil {
		return // refused at start: fine
	}
	err = c.UploadTraces(context.Background(), nil)
	t.Fatalf("accepted at start; export: err=%v, collector hits=%d", err, hits.Load())
}

// TestOTLPHeadersFollowRedirect: a collector's 307 to another host is not
// followed, so the OTLP headers (API keys) are never sent there (they were,
// as otlptracehttp sent them, before a red-team review).
func TestOTLPHeadersFollowRedirect(t *testing.T) {
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { leaked.Store(r.Header.Get("Api-Key")) }))
	defer other.Close()
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+other.URL[len("http://127.0.0.1:"):]+"/v1/traces", http.StatusTemporaryRedirect)
	}))
	defer col.Close()
	c, err := newOTLPClient(col.URL, func(n string) string {
		if n == "OTEL_EXPORTER_OTLP_HEADERS" {
			return "api-key=secret"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c.UploadTraces(context.Background(), nil)
	if v, _ := leaked.Load().(string); v != "" {
		t.Fatalf("api-key %q sent to the redirect's host", v)
	}
}

// TestOTLPRetryAfterOverflow: a Retry-After of seconds whose Duration
// would overflow to a few hundred nanoseconds is capped, not a busy loop of
// exports for the whole timeout (found by a red-team review).
func TestOTLPRetryAfterOverflow(t *testing.T) {
	// s*1e9 ≡ 512 (mod 2^64): s = 1953125⁻¹ mod 2^55.
	inv := uint64(1953125)
	for i := 0; i < 6; i++ {
		inv *= 2 - 1953125*inv
	}
	s := int64(inv & (1<<55 - 1))
	if d := time.Duration(s) * time.Second; d != 512 {
		t.Fatalf("s=%d gives %v", s, d)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", strconv.FormatInt(s, 10))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := newOTLPClient(srv.URL, func(n string) string {
		if n == "OTEL_EXPORTER_OTLP_TIMEOUT" {
			return "500"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c.UploadTraces(context.Background(), nil)
	if n := hits.Load(); n > 3 {
		t.Fatalf("Retry-After: %d made %d exports in 500 ms", s, n)
	}
}
