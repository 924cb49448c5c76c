package upstream

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is what a [Client] adds to its requests so that a call can be
// followed from the caller through the gateway to the upstream. The zero
// value adds nothing of its own and makes no span; a [CallTrace] in a call's
// context is still passed on (its Traceparent).
type Tracing struct {
	// Tracer, if set, makes a client span per request sent (a tool call,
	// a playbook engine's execute, status or cancel request), child of the
	// span in the call's context, and sends that span's traceparent
	// upstream. Nil: no span; a CallTrace's Traceparent and Tracestate are
	// sent as they came.
	Tracer trace.Tracer
	// RequestIDHeader, if set, is the header a CallTrace's RequestID is
	// sent in (canonical form, e.g. "X-Request-Id"). An argument that
	// already set that header (a declared header parameter) is kept.
	RequestIDHeader string
}

// A CallTrace says which call a request belongs to, for what the client
// sends upstream with it (see [Tracing]) and its span. The gateway puts one
// in a call's context ([WithCallTrace]); a client reads it, never changes it.
type CallTrace struct {
	// Tool is the tool called: a span attribute.
	Tool string
	// RequestID is the gateway's id of the request that carried the call,
	// sent in Tracing.RequestIDHeader.
	RequestID string
	// Traceparent and Tracestate are the caller's own W3C trace context,
	// sent as they came when the client has no Tracer: with tracing off the
	// upstream still joins the caller's trace, at the cost of two header
	// writes. Ignored when the client has a Tracer: its span's context is
	// sent instead.
	Traceparent, Tracestate string
}

type callTraceKey struct{}

// callTraceCtx is a context holding a CallTrace: one allocation for the
// value, the context and the request id's header value (a tool call pays
// for this on every call while request_id_header is on, the default).
// Everything but Value is the parent's, so that context.WithCancel and
// WithTimeout below it recognize the parent's cancelCtx and start no
// goroutine.
type callTraceCtx struct {
	context.Context
	t CallTrace
	// t's RequestID, Traceparent and Tracestate as the header values
	// propagate sets: no allocation per request, however many a call sends.
	id, tp, ts [1]string
}

func (c *callTraceCtx) Value(key any) any {
	if key == (callTraceKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// WithCallTrace returns ctx carrying a copy of t.
func WithCallTrace(ctx context.Context, t *CallTrace) context.Context {
	c := &callTraceCtx{Context: ctx, t: *t}
	c.id[0], c.tp[0], c.ts[0] = t.RequestID, t.Traceparent, t.Tracestate
	return c
}

// CallTraceFrom returns the CallTrace of ctx, or nil. It is not to be
// changed.
func CallTraceFrom(ctx context.Context) *CallTrace {
	if c := callTraceOf(ctx); c != nil {
		return &c.t
	}
	return nil
}

func callTraceOf(ctx context.Context) *callTraceCtx {
	c, _ := ctx.Value(callTraceKey{}).(*callTraceCtx)
	return c
}

// DetachTrace returns a context that is never cancelled and holds nothing
// of ctx but its CallTrace and its span's context: for work that outlives
// the request that started it (a playbook run) and whose requests still
// belong to that request's trace. It keeps no reference to ctx, so a
// long-lived run does not hold the request's memory.
func DetachTrace(ctx context.Context) context.Context {
	out := context.Background()
	if t := CallTraceFrom(ctx); t != nil {
		out = WithCallTrace(out, t)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out = trace.ContextWithSpanContext(out, sc)
	}
	return out
}

// traceContext writes traceparent and tracestate (W3C Trace Context).
var traceContext propagation.TraceContext

// The header keys of W3C Trace Context, canonical.
const (
	traceparentHeader = "Traceparent"
	tracestateHeader  = "Tracestate"
)

// propagate sets what tracing sends upstream on h: the request id and the
// trace context (see Tracing). With neither a Tracer nor a CallTrace in
// ctx it does nothing but one context lookup.
func (c *Client) propagate(ctx context.Context, h http.Header) {
	cc := callTraceOf(ctx)
	var ct *CallTrace
	if cc != nil {
		ct = &cc.t
	}
	if ct != nil && ct.RequestID != "" && c.opts.Tracing.RequestIDHeader != "" {
		if _, set := h[c.opts.Tracing.RequestIDHeader]; !set {
			h[c.opts.Tracing.RequestIDHeader] = cc.id[:] // shared: net/http only reads it
		}
	}
	if c.opts.Tracing.Tracer != nil {
		if trace.SpanContextFromContext(ctx).IsValid() {
			traceContext.Inject(ctx, propagation.HeaderCarrier(h))
		}
		return
	}
	if ct != nil && ct.Traceparent != "" {
		h[traceparentHeader] = cc.tp[:]
		if ct.Tracestate != "" {
			h[tracestateHeader] = cc.ts[:]
		} else {
			delete(h, tracestateHeader)
		}
	}
}

// The attributes of an upstream call's span. Never the URL: its path and
// query hold the call's arguments.
const (
	attrTool     = attribute.Key("gen_ai.tool.name") // OTel's GenAI/MCP conventions
	attrUpstream = attribute.Key("mcpgate.upstream")
	attrOutcome  = attribute.Key("mcpgate.outcome")
	attrMethod   = attribute.Key("http.request.method")
	attrStatus   = attribute.Key("http.response.status_code")
)

// startSpan starts the client span of one request to the upstream, named
// "METHOD upstream" ("GET billing"). The caller ends it with endSpan.
func (c *Client) startSpan(ctx context.Context, method string) (context.Context, trace.Span) {
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, attrUpstream.String(c.opts.Name), attrMethod.String(method))
	if ct := CallTraceFrom(ctx); ct != nil && ct.Tool != "" {
		attrs = append(attrs, attrTool.String(ct.Tool))
	}
	return c.opts.Tracing.Tracer.Start(ctx, method+" "+c.opts.Name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records rep on span and ends it: the outcome, the status when
// the upstream answered, and an error status when the call failed (see
// Report.Failed) with the outcome as its description. Never rep.Cause: it
// may name internal addresses, and a trace backend is read more widely
// than the gateway's log.
func endSpan(span trace.Span, rep Report) {
	span.SetAttributes(attrOutcome.String(string(rep.Outcome)))
	if rep.Status != 0 {
		span.SetAttributes(attrStatus.Int(rep.Status))
	}
	if rep.Failed() {
		span.SetStatus(codes.Error, string(rep.Outcome))
	}
	span.End()
}

// TraceTransport returns a RoundTripper that sends what tr says with each
// request whose context holds a [CallTrace] (the request id; the trace
// context), with a client span per such request when tr has a Tracer, and
// passes every other request (a session's initialize, its pings, its event
// stream) to base as it is. name is the upstream's, for the span. It is
// the seam for clients the gateway does not build its requests for: an MCP
// upstream's go-sdk session, which sends each call's POST with the call's
// context.
func TraceTransport(base http.RoundTripper, tr Tracing, name string) http.RoundTripper {
	return &traceTransport{base: base, c: &Client{opts: ClientOptions{Name: name, Tracing: tr}}}
}

type traceTransport struct {
	base http.RoundTripper
	c    *Client // only its Name and Tracing: for propagate and startSpan
}

func (t *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if CallTraceFrom(ctx) == nil {
		return t.base.RoundTrip(req)
	}
	var span trace.Span
	if t.c.opts.Tracing.Tracer != nil {
		ctx, span = t.c.startSpan(ctx, req.Method)
	}
	r := req.Clone(ctx) // a RoundTripper must not change the request
	t.c.propagate(ctx, r.Header)
	resp, err := t.base.RoundTrip(r)
	if span != nil {
		rep := Report{Outcome: OutcomeOK}
		switch {
		case err != nil:
			_, rep = t.c.failure(ctx, err, 0)
		case resp.StatusCode < 200 || resp.StatusCode > 299:
			rep.Outcome, rep.Status = OutcomeHTTPError, resp.StatusCode
		default:
			rep.Status = resp.StatusCode
		}
		endSpan(span, rep)
	}
	return resp, err
}
