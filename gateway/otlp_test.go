package gateway

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is an OTLP/HTTP collector: it decodes each export with the
// collector's own protobuf types and answers with answer (nil: 200 and no
// body).
type otlpCollector struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []*coltrace.ExportTraceServiceRequest
	answer   func(n int, w http.ResponseWriter)
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, _ := io.ReadAll(body)
	req := &coltrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, r)
	c.bodies = append(c.bodies, req)
	n := len(c.requests)
	c.mu.Unlock()
	if c.answer != nil {
		c.answer(n, w)
	}
}

// testSpans are two resources' spans, as otlptrace hands them to a client.
func testSpans() []*tracepb.ResourceSpans {
	span := func(name string) *tracepb.Span {
		return &tracepb.Span{TraceId: make([]byte, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: name,
			Attributes: []*commonpb.KeyValue{{Key: "gen_ai.tool.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "get_thing"}}}}}
	}
	return []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("tools/call get_thing"), span("GET api")}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span("tools/list")}}}},
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestOTLPClientExport: what the collector receives is the
// ExportTraceServiceRequest of the spans, as the collector's own types
// decode it, with the environment's headers (the traces variable over the
// general one, values percent-decoded) and compression.
func TestOTLPClientExport(t *testing.T) {
	for _, gz := range []bool{false, true} {
		col := &otlpCollector{}
		srv := httptest.NewServer(col)
		defer srv.Close()
		env := map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS":        "x-general=no,x-tenant=a%20b",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Api-Key%20s3cret, x-tenant=a%20b",
		}
		if gz {
			env["OTEL_EXPORTER_OTLP_COMPRESSION"] = "gzip"
		}
		c, err := newOTLPClient(srv.URL+"/v1/traces", envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		spans := testSpans()
		if err := c.UploadTraces(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
		if len(col.bodies) != 1 {
			t.Fatalf("%d exports", len(col.bodies))
		}
		if !proto.Equal(col.bodies[0], &coltrace.ExportTraceServiceRequest{ResourceSpans: spans}) {
			t.Errorf("gzip %v: the collector decoded %v", gz, col.bodies[0])
		}
		r := col.requests[0]
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" ||
			r.Header.Get("Authorization") != "Api-Key s3cret" || r.Header.Get("X-Tenant") != "a b" || r.Header.Get("X-General") != "" ||
			(r.Header.Get("Content-Encoding") == "gzip") != gz {
			t.Errorf("gzip %v: request %s %v", gz, r.URL.Path, r.Header)
		}
	}
}

// TestOTLPClientAnswers: 429, 502, 503 and 504 are retried (after
// Retry-After, or the backoff); another status fails the export at once,
// with the status and at most 256 bytes of the collector's text; a partial
// success that rejected spans is an error naming how many.
func TestOTLPClientAnswers(t *testing.T) {
	partial, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{PartialSuccess: &coltrace.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "too old"}})
	for _, tc := range []struct {
		name    string
		answer  func(n int, w http.ResponseWriter)
		exports int
		err     string
	}{
		{"503 then 200", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}, 2, ""},
		{"429 with Retry-After, then 200", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		}, 2, ""},
		{"502 and 504, then 200", func(n int, w http.ResponseWriter) {
			switch n {
			case 1:
				w.WriteHeader(http.StatusBadGateway)
			case 2:
				w.WriteHeader(http.StatusGatewayTimeout)
			}
		}, 3, ""},
		{"400", func(n int, w http.ResponseWriter) {
			http.Error(w, "bad\nspans "+strings.Repeat("x", 1000), http.StatusBadRequest)
		}, 1, "the collector answered 400 Bad Request: bad spans xxx"},
		{"always 503", func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }, 0, "503 Service Unavailable"},
		{"partial success", func(n int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.Write(partial)
		}, 1, "the collector rejected 2 spans: too old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := &otlpCollector{answer: tc.answer}
			srv := httptest.NewServer(col)
			defer srv.Close()
			c, err := newOTLPClient(srv.URL, envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			c.backoff, c.maxBackoff, c.maxElapsed = time.Millisecond, 2*time.Millisecond, 50*time.Millisecond
			err = c.UploadTraces(context.Background(), testSpans())
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("got %v, want %q", err, tc.err)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("an error of %d bytes", len(err.Error()))
			}
			if col.mu.Lock(); tc.exports > 0 && len(col.bodies) != tc.exports || tc.exports == 0 && len(col.bodies) < 2 {
				t.Errorf("%d exports, want %d", len(col.bodies), tc.exports)
			}
			col.mu.Unlock()
		})
	}
}

// TestOTLPClientTLSAndTimeout: a collector whose certificate is verified by
// OTEL_EXPORTER_OTLP_CERTIFICATE is exported to (and one without it is
// not); an export that outlasts OTEL_EXPORTER_OTLP_TIMEOUT fails; a
// variable that cannot be used is an error naming it.
func TestOTLPClientTLSAndTimeout(t *testing.T) {
	col := &otlpCollector{}
	srv := httptest.NewTLSServer(col)
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newOTLPClient(srv.URL, envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": ca}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UploadTraces(context.Background(), testSpans()); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	c, _ = newOTLPClient(srv.URL, envOf(nil))
	c.maxElapsed = 0
	if err := c.UploadTraces(context.Background(), testSpans()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}

	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)
	c, err = newOTLPClient(hang.URL, envOf(map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "50"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UploadTraces(context.Background(), testSpans()); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("a collector that does not answer: %v", err)
	}

	for env, want := range map[string]string{
		"OTEL_EXPORTER_OTLP_CERTIFICATE=" + filepath.Join(dir, "none.pem"): "OTEL_EXPORTER_OTLP_CERTIFICATE: open",
		"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE=" + filepath.Join(dir):      "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE:",
		"OTEL_EXPORTER_OTLP_TIMEOUT=10s":                                   `OTEL_EXPORTER_OTLP_TIMEOUT: "10s" is not a number of milliseconds`,
		"OTEL_EXPORTER_OTLP_COMPRESSION=zstd":                              `OTEL_EXPORTER_OTLP_COMPRESSION: "zstd" is neither gzip nor none`,
		"OTEL_EXPORTER_OTLP_HEADERS=novalue":                               `OTEL_EXPORTER_OTLP_HEADERS: "novalue" is not key=value`,
		"OTEL_EXPORTER_OTLP_CLIENT_KEY=" + ca:                              "set both or neither",
	} {
		k, v, _ := strings.Cut(env, "=")
		if _, err := newOTLPClient(srv.URL, envOf(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
}
