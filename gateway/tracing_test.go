package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway/internal/testaddr"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// headerRecorder is an upstream that answers fastAPI's answers and keeps
// the header of every request it got.
type headerRecorder struct {
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Clone())
	h.mu.Unlock()
	fastAPI(w, r)
}

func (h *headerRecorder) take() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.seen
	h.seen = nil
	return out
}

const (
	inTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	inParentID    = "00f067aa0ba902b7"
	inTraceparent = "00-" + inTraceID + "-" + inParentID + "-01"
	inTracestate  = "vendor=opaque,other=1"
	secretArg     = "se7ret"
	secretToken   = "token-must-not-leave"
)

// tracedGateway serves fastDoc against a recording upstream, through the
// fast path or go-sdk.
func tracedGateway(t *testing.T, cfg Config, opts Options) (*headerRecorder, string, *Gateway) {
	t.Helper()
	rec := &headerRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	cfg.Upstreams = []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: api.URL, Timeout: time.Minute}}
	g, err := New(context.Background(), &cfg, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return rec, srv.URL + "/mcp", g
}

// callThing sends one tools/call of get_thing with h and returns the
// answer's Mcpgate-Request-Id.
func callThing(t *testing.T, url string, h http.Header) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(rpc("1", "tools/call", `{"name":"get_thing","arguments":{"id":"`+secretArg+`"}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secretToken)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) || strings.Contains(string(body), `"isError":true`) {
		t.Fatalf("answer %d: %s", resp.StatusCode, body)
	}
	return resp.Header.Get(requestIDHeader)
}

// TestTracingOffPassesThrough: with tracing off, the caller's traceparent
// and tracestate reach the upstream unchanged, an invalid one does not,
// and the gateway's request id goes in request_id_header (or nowhere with
// "none") — through the fast path and go-sdk alike.
func TestTracingOffPassesThrough(t *testing.T) {
	for _, path := range []string{"fast", "sdk"} {
		for _, c := range []struct {
			name        string
			idHeader    string
			traceparent string
			wantParent  string
			wantIDIn    string
		}{
			{"default", "", inTraceparent, inTraceparent, "X-Request-Id"},
			{"named header", "x-correlation-id", inTraceparent, inTraceparent, "X-Correlation-Id"},
			{"none", "none", inTraceparent, inTraceparent, ""},
			{"invalid traceparent", "", "00-" + inTraceID + "-0000000000000000-01", "", "X-Request-Id"},
			{"upper-case hex", "", strings.ToUpper(inTraceparent), "", "X-Request-Id"},
			{"no traceparent", "", "", "", "X-Request-Id"},
		} {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				rec, url, _ := tracedGateway(t, Config{RequestIDHeader: c.idHeader}, Options{DisableFastPath: path == "sdk"})
				h := http.Header{}
				if c.traceparent != "" {
					h.Set("Traceparent", c.traceparent)
					h.Set("Tracestate", inTracestate)
				}
				id := callThing(t, url, h)
				seen := rec.take()
				if len(seen) != 1 {
					t.Fatalf("upstream got %d requests", len(seen))
				}
				got := seen[0]
				if got.Get("Traceparent") != c.wantParent {
					t.Errorf("traceparent upstream %q, want %q", got.Get("Traceparent"), c.wantParent)
				}
				wantState := ""
				if c.wantParent != "" {
					wantState = inTracestate
				}
				if got.Get("Tracestate") != wantState {
					t.Errorf("tracestate upstream %q, want %q", got.Get("Tracestate"), wantState)
				}
				for _, k := range []string{"X-Request-Id", "X-Correlation-Id"} {
					want := ""
					if k == c.wantIDIn {
						want = id
					}
					if got.Get(k) != want {
						t.Errorf("%s upstream %q, want %q", k, got.Get(k), want)
					}
				}
				if c.wantIDIn != "" && id == "" {
					t.Error("no request id on the answer")
				}
			})
		}
	}
}

// TestTracingSpans: with a tracer, an inbound traceparent is continued: a
// server span per MCP request (tools/call get_thing), a client span per
// upstream request under it, whose traceparent the upstream received; the
// spans carry tool, upstream, outcome, status and request id, and nothing
// of the arguments or the token.
func TestTracingSpans(t *testing.T) {
	for _, path := range []string{"fast", "sdk"} {
		t.Run(path, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			rec, url, _ := tracedGateway(t, Config{}, Options{TracerProvider: tp, DisableFastPath: path == "sdk"})
			id := callThing(t, url, http.Header{"Traceparent": {inTraceparent}})
			spans := exp.GetSpans()
			var server, client *tracetest.SpanStub
			for i := range spans {
				switch spans[i].SpanKind {
				case trace.SpanKindServer:
					server = &spans[i]
				case trace.SpanKindClient:
					client = &spans[i]
				}
			}
			if server == nil || client == nil {
				t.Fatalf("spans %v: want a server and a client span", spanNames(spans))
			}
			if server.Name != "tools/call get_thing" || client.Name != "GET api" {
				t.Errorf("span names %q, %q", server.Name, client.Name)
			}
			if server.SpanContext.TraceID().String() != inTraceID || server.Parent.SpanID().String() != inParentID {
				t.Errorf("server span is not the caller's child: trace %s parent %s", server.SpanContext.TraceID(), server.Parent.SpanID())
			}
			if client.Parent.SpanID() != server.SpanContext.SpanID() || client.SpanContext.TraceID() != server.SpanContext.TraceID() {
				t.Error("the upstream call's span is not the request span's child")
			}
			want := "00-" + inTraceID + "-" + client.SpanContext.SpanID().String() + "-01"
			seen := rec.take()
			if len(seen) != 1 || seen[0].Get("Traceparent") != want {
				t.Fatalf("upstream traceparent %v, want %s", seen, want)
			}
			if seen[0].Get("X-Request-Id") != id {
				t.Errorf("X-Request-Id %q, want %q", seen[0].Get("X-Request-Id"), id)
			}
			attrs := func(s *tracetest.SpanStub) map[attribute.Key]string {
				m := map[attribute.Key]string{}
				for _, a := range s.Attributes {
					m[a.Key] = a.Value.Emit()
				}
				return m
			}
			sa, ca := attrs(server), attrs(client)
			for k, v := range map[attribute.Key]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_thing", "mcpgate.outcome": "ok", "mcpgate.request_id": id} {
				if sa[k] != v {
					t.Errorf("server span %s = %q, want %q", k, sa[k], v)
				}
			}
			for k, v := range map[attribute.Key]string{"gen_ai.tool.name": "get_thing", "mcpgate.upstream": "api", "mcpgate.outcome": "ok", "http.response.status_code": "200", "http.request.method": "GET"} {
				if ca[k] != v {
					t.Errorf("client span %s = %q, want %q", k, ca[k], v)
				}
			}
			for _, s := range spans {
				for _, a := range s.Attributes {
					if v := a.Value.Emit(); strings.Contains(v, secretArg) || strings.Contains(v, secretToken) {
						t.Errorf("span %s holds %s=%q", s.Name, a.Key, v)
					}
				}
			}
		})
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"/"+s.SpanKind.String())
	}
	return out
}

// TestTracingFailedCall: an upstream that refuses connections gives error
// spans, outcome unreachable, no status.
func TestTracingFailedCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	deadURL := testaddr.RefusedURL(t)
	cfg := &Config{Upstreams: []Upstream{{Name: "down", OpenAPI: "fast.json", Document: fastDoc(0), BaseURL: deadURL}}}
	g, err := New(context.Background(), cfg, &Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	sendRaw(t, srv.URL+"/mcp", rpc("1", "tools/call", `{"name":"get_thing","arguments":{"id":"1"}}`), nil)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("spans %v", spanNames(spans))
	}
	for _, s := range spans {
		if s.Status.Code.String() != "Error" || s.Status.Description != "unreachable" {
			t.Errorf("span %s status %v %q", s.Name, s.Status.Code, s.Status.Description)
		}
		for _, a := range s.Attributes {
			if a.Key == "http.response.status_code" {
				t.Errorf("span %s has a status with no answer", s.Name)
			}
		}
	}
}

// TestTracingOTLPExport: with tracing.otlp_endpoint set, the spans are
// POSTed as OTLP/HTTP protobuf to its /v1/traces, with the service name,
// by the time Close returns.
func TestTracingOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var got []*coltrace.ExportTraceServiceRequest
	var paths []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &coltrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			t.Errorf("collector: %s is not OTLP protobuf: %v", r.Header.Get("Content-Type"), err)
		}
		mu.Lock()
		got = append(got, req)
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	ratio := 1.0
	rec, url, g := tracedGateway(t, Config{Tracing: TracingConfig{OTLPEndpoint: collector.URL, ServiceName: "gw-test", SampleRatio: &ratio}}, Options{})
	callThing(t, url, http.Header{"Traceparent": {inTraceparent}})
	if tp := rec.take()[0].Get("Traceparent"); !strings.HasPrefix(tp, "00-"+inTraceID+"-") || tp == inTraceparent {
		t.Errorf("upstream traceparent %q: not a child in the caller's trace", tp)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	names := map[string]bool{}
	for i, req := range got {
		if paths[i] != "/v1/traces" {
			t.Errorf("exported to %s", paths[i])
		}
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service = a.Value.GetStringValue()
				}
			}
			if service != "gw-test" {
				t.Errorf("service.name %q", service)
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name] = true
				}
			}
		}
	}
	if !names["tools/call get_thing"] || !names["GET api"] {
		t.Errorf("exported spans %v", names)
	}
}

// TestTracingConfig: what tracing and request_id_header refuse, in words.
func TestTracingConfig(t *testing.T) {
	ratio := func(f float64) *float64 { return &f }
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Tracing: TracingConfig{OTLPEndpoint: "collector:4318"}}, "must be an absolute http or https URL"},
		{Config{Tracing: TracingConfig{OTLPEndpoint: "http://u:p@c:4318"}}, "must not carry credentials"},
		{Config{Tracing: TracingConfig{OTLPEndpoint: "http://c:4318", SampleRatio: ratio(1.5)}}, "sample_ratio: 1.5 is not between 0 and 1"},
		{Config{Tracing: TracingConfig{ServiceName: "x"}}, "need otlp_endpoint"},
		{Config{RequestIDHeader: "Authorization"}, "carries credentials"},
		{Config{RequestIDHeader: "traceparent"}, "carries credentials"},
		{Config{RequestIDHeader: "bad header"}, "is not a header name"},
		{Config{LogFormat: "yaml"}, `log_format: "yaml" is not text or json`},
	} {
		c.cfg.Upstreams = []Upstream{{OpenAPI: "x.json"}}
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.Tracing, err, c.want)
		}
	}
	ok := Config{Tracing: TracingConfig{OTLPEndpoint: "http://c:4318/v1/traces"}, Upstreams: []Upstream{{OpenAPI: "x.json"}}}
	r, err := ok.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Tracing.TracesURL() != "http://c:4318/v1/traces" || r.Tracing.ServiceName != "mcpgate" || r.RequestIDHeader != "X-Request-Id" || r.LogFormat != "text" {
		t.Errorf("resolved %+v", r)
	}
}

// TestValidTraceparent: what is passed on with tracing off.
func TestValidTraceparent(t *testing.T) {
	for s, want := range map[string]bool{
		inTraceparent: true,
		"01-" + inTraceID + "-" + inParentID + "-01-extra":          true,
		"01-" + inTraceID + "-" + inParentID + "-01":                true,
		"00-" + inTraceID + "-" + inParentID + "-01-extra":          false,
		"ff-" + inTraceID + "-" + inParentID + "-01":                false,
		"00-00000000000000000000000000000000-" + inParentID + "-01": false,
		"00-" + inTraceID + "-" + inParentID + "-0g":                false,
		"00-" + inTraceID + "-" + inParentID + "-03":                true,
		"00-" + inTraceID + "-" + inParentID + "-04":                false,
		"00-" + inTraceID + "-" + inParentID + "-10":                false,
		"01-" + inTraceID + "-" + inParentID + "-10":                true,
		"00-" + inTraceID + "_" + inParentID + "-01":                false,
		"": false, "00": false,
	} {
		if validTraceparent(s) != want {
			t.Errorf("validTraceparent(%q) = %v", s, !want)
		}
	}
}

// FuzzTraceparent: validTraceparent never panics, and what it accepts the
// OpenTelemetry propagator reads as a valid span context.
func FuzzTraceparent(f *testing.F) {
	f.Add(inTraceparent)
	f.Add("01-" + inTraceID + "-" + inParentID + "-01-x")
	f.Fuzz(func(t *testing.T, s string) {
		if !validTraceparent(s) {
			return
		}
		ctx := traceContext.Extract(context.Background(), mapCarrier{"traceparent": s})
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("%q accepted, but not by the propagator", s)
		}
	})
}

type mapCarrier map[string]string

func (m mapCarrier) Get(k string) string { return m[k] }
func (m mapCarrier) Set(k, v string)     { m[k] = v }
func (m mapCarrier) Keys() []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// recordingHandler keeps the header of each request h serves whose path
// has prefix (or whose body holds bodyHas), then serves it.
type recordingHandler struct {
	h       http.Handler
	prefix  string
	bodyHas string
	rec     headerRecorder
}

func (r *recordingHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	keep := r.prefix != "" && strings.HasPrefix(req.URL.Path, r.prefix)
	if r.bodyHas != "" && req.Body != nil {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		keep = strings.Contains(string(body), r.bodyHas)
	}
	if keep {
		r.rec.mu.Lock()
		r.rec.seen = append(r.rec.seen, req.Header.Clone())
		r.rec.mu.Unlock()
	}
	r.h.ServeHTTP(w, req)
}

// mcpCall makes one tools/call with go-sdk's client, a traceparent on
// every POST.
func mcpCall(t *testing.T, url, tool string, args map[string]any) {
	t.Helper()
	cs := connect(t, url, http.Header{"Traceparent": {inTraceparent}, "Tracestate": {inTracestate}})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
}

// checkUpstreamTrace checks the trace headers an upstream got on each
// request of a call: the caller's traceparent as it came (tracing off), or
// a child of it (on), and the request id.
func checkUpstreamTrace(t *testing.T, seen []http.Header, on bool) {
	t.Helper()
	if len(seen) == 0 {
		t.Fatal("the upstream got no request of the call")
	}
	for _, h := range seen {
		tp := h.Get("Traceparent")
		switch {
		case !on && tp != inTraceparent:
			t.Errorf("traceparent %q, want the caller's %q", tp, inTraceparent)
		case on && (!strings.HasPrefix(tp, "00-"+inTraceID+"-") || tp == inTraceparent):
			t.Errorf("traceparent %q, want a child span in trace %s", tp, inTraceID)
		}
		if h.Get("X-Request-Id") == "" {
			t.Error("no X-Request-Id")
		}
	}
}

// TestTracingPlaybookAndFederation: the playbook engine's requests (its
// execute and status polls, made by a run that outlives the request) and
// an MCP upstream's tools/call POST carry the call's trace and request
// id, with tracing off and on; with it on, each is a client span in the
// caller's trace.
func TestTracingPlaybookAndFederation(t *testing.T) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		opts := func() (*Options, *tracetest.InMemoryExporter) {
			if !on {
				return &Options{}, nil
			}
			exp := tracetest.NewInMemoryExporter()
			return &Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))}, exp
		}
		t.Run("playbook/"+name, func(t *testing.T) {
			eng := &recordingHandler{h: engine.New(nil).Handler(), prefix: "/api/execut"} // not the catalog, read at start-up
			o, exp := opts()
			_, url := serveGateway(t, &Config{Upstreams: []Upstream{{Name: "noetl", OpenAPI: "/openapi.json", Handler: eng, Playbooks: &Playbooks{}}}}, o)
			mcpCall(t, url, "demo_fast", map[string]any{"name": "Ada"})
			seen := eng.rec.take()
			if len(seen) < 2 {
				t.Fatalf("engine got %d requests, want execute and a status poll", len(seen))
			}
			checkUpstreamTrace(t, seen, on)
			if on {
				clients := 0
				for _, s := range exp.GetSpans() {
					if s.SpanKind == trace.SpanKindClient && s.SpanContext.TraceID().String() == inTraceID {
						clients++
					}
				}
				if clients != len(seen) {
					t.Errorf("%d client spans in the caller's trace for %d engine requests: %v", clients, len(seen), spanNames(exp.GetSpans()))
				}
			}
		})
		t.Run("federation/"+name, func(t *testing.T) {
			up := newFedUpstream(t)
			rh := &recordingHandler{h: up.handler(false), bodyHas: `"tools/call"`}
			srv := httptest.NewServer(rh)
			t.Cleanup(srv.Close)
			o, exp := opts()
			g, url := serveGateway(t, &Config{Upstreams: []Upstream{{Name: "fs", MCP: &federation.Config{URL: srv.URL}}}}, o)
			var tool string
			for _, tl := range g.Catalog().Tools {
				if strings.HasSuffix(tl.Tool.Name, "echo") {
					tool = tl.Tool.Name
				}
			}
			mcpCall(t, url, tool, map[string]any{"text": "hi"})
			seen := rh.rec.take()
			checkUpstreamTrace(t, seen, on)
			if on {
				found := false
				for _, s := range exp.GetSpans() {
					found = found || s.SpanKind == trace.SpanKindClient && s.Name == "POST fs"
				}
				if !found {
					t.Errorf("no client span for the MCP upstream's POST: %v", spanNames(exp.GetSpans()))
				}
			}
		})
	}
}

// TestTracingStdio: over stdio (no POST, no front door) each request gets
// its server span from go-sdk middleware, or the stdio fast path for a call
// it answers, and a tool call's upstream request is its child and carries
// its traceparent; there is no request id.
func TestTracingStdio(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast", false: "sdk"}[fast], func(t *testing.T) { tracingStdio(t, fast) })
	}
}

func tracingStdio(t *testing.T, fast bool) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	rec := &headerRecorder{}
	cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "fast.json", Document: fastDoc(0), Handler: rec}}}
	g, err := New(context.Background(), cfg, &Options{TracerProvider: tp, DisableFastPath: !fast})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var served atomic.Int32
	if fast {
		g.fast.onServe = func() { served.Add(1) }
	}
	s := startStdio(t, g)
	s.send(t, rpc("1", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.next(t)
	s.send(t, rpc("2", "tools/call", `{"name":"get_thing","arguments":{"id":"7"}}`))
	if a := s.next(t); !strings.Contains(a.line, `"result"`) {
		t.Fatalf("tools/call: %s", a.line)
	}
	if fast && served.Load() != 1 {
		t.Fatal("the stdio fast path did not answer the call")
	}
	var server, client *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		switch {
		case spans[i].Name == "tools/call get_thing" && spans[i].SpanKind == trace.SpanKindServer:
			server = &spans[i]
		case spans[i].SpanKind == trace.SpanKindClient:
			client = &spans[i]
		}
	}
	if server == nil || client == nil || client.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("spans %v: want tools/call get_thing with its upstream call under it", spanNames(spans))
	}
	seen := rec.take()
	want := "00-" + server.SpanContext.TraceID().String() + "-" + client.SpanContext.SpanID().String() + "-01"
	if len(seen) != 1 || seen[0].Get("Traceparent") != want || seen[0].Get("X-Request-Id") != "" {
		t.Errorf("upstream headers %v, want traceparent %s and no request id", seen, want)
	}
}

// TestTracingExportFailureLogged: a collector that cannot be reached costs
// the calls nothing, and the failed export is one warning on the gateway's
// own log (JSON here), not a line of OpenTelemetry's on stderr.
func TestTracingExportFailureLogged(t *testing.T) {
	deadURL := testaddr.RefusedURL(t)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	_, url, g := tracedGateway(t, Config{Tracing: TracingConfig{OTLPEndpoint: deadURL}}, Options{Logger: logger})
	callThing(t, url, nil)
	g.Close() // the last export, which fails
	var exports int
	for _, r := range logs.records(t) {
		if r["msg"] == "tracing export" {
			exports++
			if r["level"] != "WARN" || r["spans_dropped"] == nil || !strings.Contains(r["cause"].(string), "refused") {
				t.Errorf("export warning %v", r)
			}
		}
	}
	if exports != 1 {
		t.Errorf("%d export warnings, want 1", exports)
	}
}
