package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// otlpClient sends spans as OTLP/HTTP protobuf to one traces URL, the
// otlptrace.Client behind the gateway's exporter (otlptrace.New turns the
// SDK's spans into the protobuf it uploads).
//
// It is written here, not taken from otlptracehttp, because otlptracehttp
// links google.golang.org/grpc: the collector's protobuf package holds its
// gRPC service stubs beside the ExportTraceServiceRequest message. That is
// 17 MB of the binary and 5 ms of every process's start before main (its
// package initialization, and the pages of a larger binary), whether
// tracing is on or not, where a start from a snapshot targets 100 ms
// (`go run ./cmd/mcpgate-bench startup`, docs/snapshot.md). The request is
// that message's one field, written with protowire; the rest is what
// otlptracehttp does, read from the same environment variables (below).
//
// From the environment, the traces variable first, then the general one,
// as every OTLP exporter reads them:
//
//   - OTEL_EXPORTER_OTLP_[TRACES_]HEADERS: headers sent with every export,
//     "key=value,key2=value2", values percent-decoded;
//   - OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT: milliseconds an export may take,
//     retries included (default 10,000);
//   - OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION: gzip or none (default);
//   - OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE: a PEM file of the CAs that
//     verify the collector; OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE
//     and _CLIENT_KEY: a client certificate for mutual TLS.
//
// The endpoint is the configuration's (tracing.otlp_endpoint), never the
// environment's. A variable that cannot be used (a certificate file that
// does not load, a timeout that is not a number) is a start-up error naming
// it, where otlptracehttp logged it and went on without it.
//
// An export answered 429, 502, 503 or 504 is retried after a backoff (5 s,
// doubling to 30 s, or the answer's Retry-After) for up to a minute, within
// the export's timeout; any other answer outside 2xx, or a collector that
// cannot be reached, fails the export at once (its spans are dropped, with
// a warning: loggedExporter).
type otlpClient struct {
	url     string
	headers http.Header
	gzip    bool
	timeout time.Duration
	client  *http.Client
	// backoff is the first wait before a retry, doubled each time up to
	// maxBackoff; retries stop once maxElapsed has passed.
	backoff, maxBackoff, maxElapsed time.Duration
}

var _ otlptrace.Client = (*otlpClient)(nil)

// otlpDefaultTimeout is an export's bound without OTEL_EXPORTER_OTLP_TIMEOUT,
// as the specification and otlptracehttp set it.
const otlpDefaultTimeout = 10 * time.Second

// maxOTLPAnswer bounds what is read of a collector's answer.
const maxOTLPAnswer = 4 << 20

// newOTLPClient makes the client for traces URL u, with the environment
// read by getenv (os.Getenv).
func newOTLPClient(u string, getenv func(string) string) (*otlpClient, error) {
	env := func(name string) (string, string) {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	c := &otlpClient{url: u, headers: http.Header{}, timeout: otlpDefaultTimeout,
		backoff: 5 * time.Second, maxBackoff: 30 * time.Second, maxElapsed: time.Minute}
	if n, v := env("HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if !ok || err != nil || !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(dec) {
				// Checked here: a name or value no request can carry (a
				// line break percent-encoded) would fail every export.
				return nil, fmt.Errorf("%s: %q is not key=value (percent-encoded) of an HTTP header", n, strings.TrimSpace(kv))
			}
			c.headers.Set(k, dec)
		}
	}
	if n, v := env("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s: %q is not a number of milliseconds above 0", n, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	if n, v := env("COMPRESSION"); v != "" {
		switch v {
		case "gzip":
			c.gzip = true
		case "none":
		default:
			return nil, fmt.Errorf("%s: %q is neither gzip nor none", n, v)
		}
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if n, v := env("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", n, v)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	certName, certFile := env("CLIENT_CERTIFICATE")
	keyName, keyFile := env("CLIENT_KEY")
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY (or their TRACES_ forms) go together: set both or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %v", certName, keyName, err)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	// No redirect is followed: a collector's 307 elsewhere would have the
	// headers above, API keys as a rule, sent to that host (Go drops only
	// Authorization and Cookie across hosts).
	c.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// Start does nothing: the client connects on its first export.
func (c *otlpClient) Start(context.Context) error { return nil }

// Stop closes the client's idle connections.
func (c *otlpClient) Stop(context.Context) error {
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces sends spans in one ExportTraceServiceRequest, within the
// client's timeout and ctx, retrying as the type's doc says.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := otlpRequest(spans)
	if err != nil {
		return err
	}
	if c.gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	wait, start := c.backoff, time.Now()
	for {
		retryAfter, err := c.send(ctx, body)
		if retryAfter < 0 || err == nil {
			return err
		}
		if retryAfter == 0 {
			retryAfter, wait = wait, min(2*wait, c.maxBackoff)
		}
		if time.Since(start)+retryAfter > c.maxElapsed {
			return err
		}
		t := time.NewTimer(retryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%v (retrying: %v)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// send makes one export. A failure worth retrying comes with how long to
// wait first (0: the backoff's turn); one that is not, with -1.
func (c *otlpClient) send(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range c.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "mcpgate/"+Version+" OTLP exporter")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// Not retried, as otlptracehttp does not: a collector that is
		// down would hold every batch for the backoff (and a shutdown's
		// last export past its bound). The next batch tries again.
		return -1, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxOTLPAnswer))
	if err != nil {
		return -1, err
	}
	if resp.StatusCode/100 == 2 {
		if resp.Header.Get("Content-Type") == "application/x-protobuf" {
			return -1, partialSuccess(answer)
		}
		return -1, nil
	}
	err = fmt.Errorf("the collector answered %s: %s", resp.Status, collectorText(answer))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfterOf(resp.Header.Get("Retry-After")), err
	}
	return -1, err
}

// otlpRequest is the ExportTraceServiceRequest of spans: its one field,
// resource_spans (1), repeated.
func otlpRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(proto.Size(rs)))
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, rs); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// partialSuccess reads an ExportTraceServiceResponse: an error when its
// partial_success (1) says spans were rejected (rejected_spans, 1) or
// carries a message (error_message, 2).
func partialSuccess(answer []byte) error {
	var rejected int64
	var msg string
	err := walkProto(answer, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		return walkProto(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				rejected = int64(n)
			case num == 2 && typ == protowire.BytesType:
				msg = string(v)
			}
			return nil
		})
	})
	switch {
	case err != nil:
		return fmt.Errorf("the collector's answer is not OTLP protobuf: %v", err)
	case rejected != 0 || msg != "":
		return fmt.Errorf("the collector rejected %d spans: %s", rejected, collectorText([]byte(msg)))
	}
	return nil
}

// walkProto calls f with each field of the protobuf message b: a varint's
// value in n, a length-delimited field's bytes in v.
func walkProto(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.VarintType:
			n, k = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, k = protowire.ConsumeBytes(b)
		default:
			k = protowire.ConsumeFieldValue(num, typ, b)
		}
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

// retryAfterOf is how long a Retry-After header asks to wait (seconds, or
// an HTTP date; at most an hour, past any export's timeout); 0 when it says
// nothing usable.
func retryAfterOf(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
		// Capped before it is multiplied: a larger value wraps (to a few
		// hundred ns for some), a busy loop of retries.
		return time.Duration(min(s, int64(time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// collectorText is what a log line shows of a collector's text: one line,
// at most 256 bytes.
func collectorText(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(empty)"
	}
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "") + "…"
	}
	return s
}
