package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/upstream"
)

// Tracing, in one place (docs/observability.md says it for operators):
//
//   - Off (no tracing.otlp_endpoint, no Options.TracerProvider): no span is
//     made. A caller's valid traceparent (and its tracestate) is passed on
//     to the upstream unchanged, so the upstream joins the caller's trace
//     at the cost of two header writes; the gateway is simply not in it.
//   - On: the front door continues the caller's traceparent (or starts a
//     trace) with a server span per MCP request, named by its method and,
//     for tools/call, the tool; each upstream request (REST call, playbook
//     engine request, MCP upstream's POST) is a client span under it, whose
//     traceparent goes upstream. stdio requests get their span from a
//     go-sdk middleware.
//   - Either way the gateway's request id goes upstream in
//     request_id_header (X-Request-Id) unless that is "none".
//
// Spans hold the method, the tool, the upstream, the outcome, the HTTP
// status and the request id: never arguments, URLs (their paths hold
// arguments), tokens, cookies, claims or session ids.

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/mcpgate/mcpgate"

// maxTracestate bounds a tracestate passed on with tracing off: W3C Trace
// Context asks a vendor to propagate at least 512 characters of it, and a
// longer one is dropped rather than cut (a cut list is not a list).
const maxTracestate = 512

// maxSpanString bounds what a client chooses that goes in a span: the
// method and the tool name (a name, an attribute). A longer one is cut to
// this many bytes (at a rune boundary): a span carrying a megabyte of them
// would make the batch it is exported in, other callers' spans too, larger
// than a collector takes (an OTLP/gRPC receiver takes 4 MiB by default;
// such a request puts its name in the span twice), and the whole batch
// is dropped. MCP tool names are at most 128 characters.
const maxSpanString = 256

// The span attributes the gateway adds (upstream.Client adds its own).
const (
	attrMethod    = attribute.Key("mcp.method.name")  // OTel's MCP conventions
	attrTool      = attribute.Key("gen_ai.tool.name") // the same
	attrRequestID = attribute.Key("mcpgate.request_id")
	attrOutcome   = attribute.Key("mcpgate.outcome")
)

// tracingShutdownTimeout bounds Close's last export of batched spans: a
// collector that is down must not hold the process's exit longer.
const tracingShutdownTimeout = 5 * time.Second

// traceContext reads and writes traceparent and tracestate.
var traceContext propagation.TraceContext

// startTracing sets g.tracer from Options.TracerProvider, or from
// cfg.Tracing by an OTLP/HTTP exporter of the gateway's own (otlpClient;
// shut down by Close, which sends what is still batched). Off: g.tracer
// stays nil.
func (g *Gateway) startTracing(ctx context.Context) error {
	if tp := g.opts.TracerProvider; tp != nil {
		g.tracer = tp.Tracer(tracerName, trace.WithInstrumentationVersion(Version))
		return nil
	}
	t := g.cfg.Tracing
	if !t.On() {
		return nil
	}
	client, err := newOTLPClient(t.TracesURL(), os.Getenv)
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return fmt.Errorf("tracing.otlp_endpoint: %v", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", t.ServiceName), attribute.String("service.version", Version)))
	if err != nil {
		return fmt.Errorf("tracing: %v", err)
	}
	g.ownTracer = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(loggedExporter{exp, g.logger}),
		sdktrace.WithResource(res),
		// A caller's sampled flag wins; the ratio decides new traces.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.Ratio()))),
	)
	g.tracer = g.ownTracer.Tracer(tracerName, trace.WithInstrumentationVersion(Version))
	return nil
}

// loggedExporter reports a failed export on the gateway's log, as a
// warning with its cause (sampled like any other: a collector that is down
// writes a line a second at most), rather than returning it to the batch
// processor, which hands it to OpenTelemetry's process-wide error handler:
// a plain log.Printf line on stderr, outside log_format, once per batch.
// The spans of a failed export are dropped (the exporter has retried them).
type loggedExporter struct {
	sdktrace.SpanExporter
	logger *slog.Logger
}

func (e loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.logger.LogAttrs(ctx, slog.LevelWarn, "tracing export", slog.Int("spans_dropped", len(spans)), slog.String("cause", err.Error()))
	}
	return nil
}

// stopTracing sends the spans still batched and stops the exporter, within
// ctx.
func (g *Gateway) stopTracing(ctx context.Context) error {
	if g.ownTracer == nil {
		return nil
	}
	return g.ownTracer.Shutdown(ctx)
}

// upstreamTracing is what each upstream client sends to follow a call.
func (g *Gateway) upstreamTracing() upstream.Tracing {
	h, _ := g.cfg.SendsRequestID()
	return upstream.Tracing{Tracer: g.tracer, RequestIDHeader: h}
}

// callTrace returns ctx with the upstream.CallTrace of one call of t: the
// tool, the front door's request id (from the POST's header, h; none over
// stdio) and, with tracing off, the caller's own trace context to pass on.
// When there is nothing to send and no span to make it returns ctx as it
// is: a call pays for this only when it carries something.
func (g *Gateway) callTrace(ctx context.Context, t *Tool, h http.Header) context.Context {
	ct := upstream.CallTrace{Tool: t.Tool.Name}
	if h != nil {
		if _, on := g.cfg.SendsRequestID(); on {
			if v := h[requestIDHeader]; len(v) > 0 {
				ct.RequestID = v[0]
			}
		}
		if g.tracer == nil {
			if v := h["Traceparent"]; len(v) == 1 && validTraceparent(v[0]) {
				ct.Traceparent = v[0]
				if s := h["Tracestate"]; len(s) == 1 && len(s[0]) <= maxTracestate {
					ct.Tracestate = s[0]
				}
			}
		}
	}
	if g.tracer == nil && ct.RequestID == "" && ct.Traceparent == "" {
		return ctx
	}
	return upstream.WithCallTrace(ctx, &ct)
}

// validTraceparent reports whether s is a traceparent W3C Trace Context
// lets a receiver use: version (not ff), a trace id and a parent id not all
// zero, flags; version 00 exactly so long and with no flag set beyond
// sampled and random (the OpenTelemetry propagator refuses reserved bits
// under 00, so with tracing on such a value would start a new trace), a
// later version at least so long with a '-' after the flags. Only such a
// value is passed on.
func validTraceparent(s string) bool {
	const n = 55 // "00-" + 32 + "-" + 16 + "-" + 2
	if len(s) < n || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	switch {
	case s[:2] == "ff":
		return false
	case s[:2] == "00" && (len(s) != n || s[53] != '0' || s[54] > '3'):
		return false
	case len(s) > n && s[n] != '-':
		return false
	}
	return lowerHex(s[:2], false) && lowerHex(s[3:35], true) && lowerHex(s[36:52], true) && lowerHex(s[53:55], false)
}

// lowerHex reports whether s is lower-case hex, and not all zeros when
// nonZero is set.
func lowerHex(s string, nonZero bool) bool {
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '0':
		case '1' <= c && c <= '9', 'a' <= c && c <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !(nonZero && zero)
}

// spanName is the name of an MCP request's span: the method, and for
// tools/call the tool when it reads as a tool name (a client chooses it: a
// name of any length or characters stays an attribute only).
func spanName(method, tool string) string {
	if method == "" {
		method = "mcp"
	}
	if tool == "" || len(tool) > 128 {
		return method
	}
	for i := 0; i < len(tool); i++ {
		switch c := tool[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.', c == '/':
		default:
			return method
		}
	}
	return method + " " + tool
}

// cutSpanString is s cut to maxSpanString bytes, at a rune boundary.
func cutSpanString(s string) string {
	if len(s) <= maxSpanString {
		return s
	}
	n := maxSpanString
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// startRequestSpan starts the server span of one MCP request, under the
// caller's traceparent in h when it sent one.
func startRequestSpan(ctx context.Context, tracer trace.Tracer, h http.Header, method, tool string) (context.Context, trace.Span) {
	if h != nil {
		ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(h))
	}
	method, tool = cutSpanString(method), cutSpanString(tool)
	attrs := make([]attribute.KeyValue, 0, 2)
	if method != "" {
		attrs = append(attrs, attrMethod.String(method))
	}
	if tool != "" {
		attrs = append(attrs, attrTool.String(tool))
	}
	return tracer.Start(ctx, spanName(method, tool), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// traceRequest is the front door's tracing stage: with tracing on, a
// server span for each POSTed message, under the caller's traceparent. It
// comes before the stages that derive the calls' context, so every call in
// the POST (fast path, go-sdk's handlers through callContexts.join, the
// task door) runs under it; it ends when the exchange finishes.
func (f *frontDoor) traceRequest(x *exchange) bool {
	if f.tracer == nil || !x.rpc {
		return true
	}
	method, tool, _ := peekCall(x.msg())
	ctx, span := startRequestSpan(x.ctx, f.tracer, x.r.Header, method, tool)
	x.ctx = ctx
	x.r = x.r.WithContext(ctx)
	x.span = span
	return true
}

// endRequestSpan ends the exchange's span, with its request id.
func (x *exchange) endRequestSpan() {
	if x.requestID != "" {
		x.span.SetAttributes(attrRequestID.String(x.requestID))
	}
	x.span.End()
}

// traceStdio is go-sdk middleware that gives a stdio request the span the
// front door gives an HTTP one. A request that came over HTTP (its Extra
// holds the POST's header, stamped by the front door) has its span
// already, in the POST's context (see callContexts.join).
func (g *Gateway) traceStdio(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			return next(ctx, method, req)
		}
		var tool string
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
			tool = p.Name
		}
		ctx, span := startRequestSpan(ctx, g.tracer, nil, method, tool)
		defer span.End()
		res, err := next(ctx, method, req)
		if err != nil {
			span.SetStatus(codes.Error, "the request failed")
		}
		return res, err
	}
}

// traceCall records a tool call's outcome on the span of the request that
// carried it, if any: the outcome, and an error status when the call
// failed on the upstream's side or the gateway's.
func traceCall(ctx context.Context, rep upstream.Report) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(string(rep.Outcome)))
	if rep.Failed() {
		span.SetStatus(codes.Error, string(rep.Outcome))
	}
}
