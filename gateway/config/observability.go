package config

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The log formats of Config.LogFormat (and --log-format).
const (
	LogText = "text" // slog's TextHandler: key=value, the default
	LogJSON = "json" // slog's JSONHandler: one JSON object a line
)

// DefaultRequestIDHeader is the header that carries the gateway's request id
// to the upstream when Config.RequestIDHeader is empty: the name nginx
// ($request_id), Envoy and most tracing proxies read.
const DefaultRequestIDHeader = "X-Request-Id"

// NoRequestIDHeader, as Config.RequestIDHeader, sends no request id upstream.
const NoRequestIDHeader = "none"

// DefaultServiceName is TracingConfig.ServiceName when it is empty: the
// service.name resource attribute of every span.
const DefaultServiceName = "mcpgate"

// TracingConfig turns on OpenTelemetry tracing: a span per MCP request and
// per upstream call, exported over OTLP/HTTP. The zero value (no
// OTLPEndpoint) is off: no span is made, and a traceparent a caller sent is
// passed on to the upstream unchanged (see docs/observability.md).
type TracingConfig struct {
	// OTLPEndpoint is the collector's OTLP/HTTP base URL, e.g.
	// "http://otel-collector:4318": spans are POSTed to its /v1/traces, as
	// OTEL_EXPORTER_OTLP_ENDPOINT means. A URL whose path already ends in
	// /v1/traces is used as it is. Empty: tracing is off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName is the service.name of the spans. Default
	// DefaultServiceName ("mcpgate").
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of new traces recorded, 0 to 1. A request
	// that arrives with a traceparent follows its caller's sampled flag
	// (parent-based sampling), whatever the ratio. Nil: 1, every trace.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// On reports whether tracing is on: an OTLP endpoint is set.
func (t *TracingConfig) On() bool { return t.OTLPEndpoint != "" }

// Ratio is SampleRatio, 1 when unset.
func (t *TracingConfig) Ratio() float64 {
	if t.SampleRatio == nil {
		return 1
	}
	return *t.SampleRatio
}

// TracesURL is the URL spans are POSTed to: OTLPEndpoint with /v1/traces
// appended unless its path already ends with it.
func (t *TracingConfig) TracesURL() string {
	if strings.HasSuffix(strings.TrimSuffix(t.OTLPEndpoint, "/"), "/v1/traces") {
		return t.OTLPEndpoint
	}
	return strings.TrimSuffix(t.OTLPEndpoint, "/") + "/v1/traces"
}

// resolve checks the tracing settings and fills in the defaults.
func (t *TracingConfig) resolve() error {
	if !t.On() {
		if t.ServiceName != "" || t.SampleRatio != nil {
			return errors.New("tracing: service_name and sample_ratio need otlp_endpoint (tracing is off without it)")
		}
		return nil
	}
	u, err := url.Parse(t.OTLPEndpoint)
	switch {
	case err != nil:
		return fmt.Errorf("tracing.otlp_endpoint: %q is not a URL: %v", t.OTLPEndpoint, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("tracing.otlp_endpoint: %q must be an absolute http or https URL (OTLP over HTTP, e.g. http://otel-collector:4318)", t.OTLPEndpoint)
	case u.User != nil:
		return errors.New("tracing.otlp_endpoint: must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("tracing.otlp_endpoint: %q must hold no query or fragment", t.OTLPEndpoint)
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		return fmt.Errorf("tracing.sample_ratio: %v is not between 0 and 1", *r)
	}
	if t.ServiceName == "" {
		t.ServiceName = DefaultServiceName
	}
	return nil
}

// reservedRequestIDHeaders are headers the gateway sets itself or that carry
// credentials or routing: a request id in one of them would replace the
// caller's token, forge a trace or change where the request goes.
var reservedRequestIDHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Host": true,
	"Content-Type": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Accept": true, "User-Agent": true, "Traceparent": true, "Tracestate": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true,
}

// resolveObservability checks log_format, request_id_header and tracing,
// and fills in their defaults.
func (c *Config) resolveObservability() error {
	switch c.LogFormat {
	case "":
		c.LogFormat = LogText
	case LogText, LogJSON:
	default:
		return fmt.Errorf("log_format: %q is not text or json", c.LogFormat)
	}
	switch h := c.RequestIDHeader; {
	case h == "":
		c.RequestIDHeader = DefaultRequestIDHeader
	case h == NoRequestIDHeader:
	case !httpguts.ValidHeaderFieldName(h):
		return fmt.Errorf("request_id_header: %q is not a header name (or none)", h)
	case reservedRequestIDHeaders[http.CanonicalHeaderKey(h)]:
		return fmt.Errorf("request_id_header: %q is a header the gateway sets or that carries credentials; choose another (e.g. X-Request-Id)", h)
	default:
		c.RequestIDHeader = http.CanonicalHeaderKey(h)
	}
	return c.Tracing.resolve()
}

// SendsRequestID reports whether the request id goes upstream, and in which
// header. Call it on a resolved Config.
func (c *Config) SendsRequestID() (string, bool) {
	if c.RequestIDHeader == NoRequestIDHeader || c.RequestIDHeader == "" {
		return "", false
	}
	return c.RequestIDHeader, true
}
