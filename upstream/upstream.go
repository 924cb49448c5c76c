// Package upstream turns OpenAPI operations into callable bindings and calls
// them: it loads the API's document, builds each operation's [Binding] (the
// flat input schema and the request builder, made together), sends requests
// through a [Client] — to a remote base URL or to an in-process http.Handler —
// and maps HTTP responses to MCP tool results.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for [ClientOptions].
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 4 << 20
)

// ClientOptions configures a [Client]. The zero value is ready to use.
type ClientOptions struct {
	// Timeout bounds one call, from sending the request to reading the whole
	// response. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds how much of a response body is read. Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Transport sends remote requests. Nil means a transport of the client's
	// own, tuned for one upstream (see NewTransport).
	Transport http.RoundTripper
	// UserAgent is sent upstream. Empty means "mcpgate".
	UserAgent string
	// Logger receives one debug record per call. Nil means no logging.
	Logger *slog.Logger
}

// A Client calls one upstream API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	rt      http.RoundTripper
	opts    ClientOptions
	logger  *slog.Logger
	inproc  bool
	timeout time.Duration
}

// NewTransport returns the http.Transport the gateway uses for one remote
// upstream: explicit dial, TLS and header timeouts, and an idle pool sized for
// many concurrent tool calls to the same host.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// NewRemote returns a Client for the API at baseURL (http or https). Operation
// paths are appended to baseURL's path.
func NewRemote(baseURL string, opts *ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("upstream: base URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream: base URL %q must be an absolute http or https URL", baseURL)
	}
	if u.User != nil {
		return nil, errors.New("upstream: base URL must not carry credentials")
	}
	c := newClient(u, opts)
	if c.rt == nil {
		c.rt = NewTransport()
	}
	return c, nil
}

// inProcessBase is the base URL of in-process requests. Nothing is dialed: the
// handler receives the request directly.
var inProcessBase = &url.URL{Scheme: "http", Host: "in-process"}

// NewInProcess returns a Client that serves every call with h, in this process,
// without a network hop — the way a Go service mounts the gateway beside its
// own API (orchestrator-core mounts its MCP sub-app likewise).
func NewInProcess(h http.Handler, opts *ClientOptions) *Client {
	c := newClient(inProcessBase, opts)
	c.rt = handlerTransport{h: h, max: c.opts.MaxResponseBytes}
	c.inproc = true
	return c
}

func newClient(base *url.URL, opts *ClientOptions) *Client {
	c := &Client{base: base}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Timeout <= 0 {
		c.opts.Timeout = DefaultTimeout
	}
	if c.opts.MaxResponseBytes <= 0 {
		c.opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.opts.UserAgent == "" {
		c.opts.UserAgent = "mcpgate"
	}
	c.rt = c.opts.Transport
	c.logger = c.opts.Logger
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// BaseURL returns the upstream's base URL (for in-process clients, a
// placeholder host that is never dialed).
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// Credentials are what a call presents to the upstream.
type Credentials struct {
	// BearerToken, if set, is sent as "Authorization: Bearer <token>".
	BearerToken string
}

// Call validates args against b's input schema, sends the request and maps the
// response to a tool result. Invalid arguments, upstream failures and non-2xx
// answers all come back as a result with IsError set; the error return is for
// none of these (it is always nil today, and kept for protocol-level failures).
func (c *Client) Call(ctx context.Context, b *Binding, args map[string]any, cred Credentials) (*mcp.CallToolResult, error) {
	if err := b.Validate(args); err != nil {
		return errorResult(err.Error()), nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := b.Request(ctx, c.base, args)
	if err != nil {
		var ae *ArgumentError
		if errors.As(err, &ae) {
			return errorResult(ae.Error()), nil
		}
		return errorResult("cannot build the upstream request: " + err.Error()), nil
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	// The request URL is always the configured base plus the operation path
	// (path values are escaped per segment), so the token goes to the
	// upstream's origin and nowhere else. Redirects are not followed, for the
	// same reason.
	if cred.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+cred.BearerToken)
	}
	start := time.Now()
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "upstream call failed",
			slog.String("method", b.Method), slog.String("path", b.Path), slog.String("error", err.Error()))
		return errorResult(transportMessage(ctx, err)), nil
	}
	defer resp.Body.Close()
	limit := c.opts.MaxResponseBytes
	if b.maxResponse > 0 && b.maxResponse < limit {
		limit = b.maxResponse
	}
	body, truncated, err := readBody(resp.Body, limit)
	if err != nil {
		return errorResult(transportMessage(ctx, err)), nil
	}
	c.logger.LogAttrs(ctx, slog.LevelDebug, "upstream call",
		slog.String("method", b.Method), slog.String("path", b.Path),
		slog.Int("status", resp.StatusCode), slog.Duration("elapsed", time.Since(start)))
	return b.result(resp, body, truncated), nil
}

// transportMessage words a failed round trip the way a reverse proxy would
// (cf. caddy's 502/504 mapping): timeout, cancellation, or unreachable.
func transportMessage(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return "upstream timed out (504 Gateway Timeout)"
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return "call cancelled before the upstream answered (499)"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "upstream timed out (504 Gateway Timeout)"
	}
	// Keep the detail, but not the request URL that url.Error adds.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "upstream unreachable (502 Bad Gateway): " + err.Error()
}

func readBody(r io.Reader, max int64) ([]byte, bool, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: msg}},
	}
}

// HandlerTransport returns a RoundTripper that serves every request with h, in
// this process.
func HandlerTransport(h http.Handler) http.RoundTripper {
	return handlerTransport{h: h, max: MaxDocumentBytes}
}

// handlerTransport serves requests with an http.Handler in this process.
type handlerTransport struct {
	h   http.Handler
	max int64
}

func (t handlerTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	// Give the handler what a server would: RequestURI, RemoteAddr, Host.
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "in-process"
	r.Host = req.URL.Host
	if r.Body == nil {
		r.Body = http.NoBody
	}
	w := &bufferedResponse{header: http.Header{}, max: t.max}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				err = errors.New("handler aborted the response")
				return
			}
			err = fmt.Errorf("in-process handler panicked: %v", p)
		}
	}()
	t.h.ServeHTTP(w, r)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(strings.NewReader(w.buf.String())),
		ContentLength: int64(w.buf.Len()),
		Request:       req,
	}, nil
}

// bufferedResponse is the http.ResponseWriter of an in-process call. It keeps at
// most max+1 bytes, so a runaway handler cannot exhaust memory; the caller sees
// the body as truncated.
type bufferedResponse struct {
	header http.Header
	code   int
	buf    strings.Builder
	max    int64
}

func (w *bufferedResponse) Header() http.Header { return w.header }

func (w *bufferedResponse) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *bufferedResponse) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if room := w.max + 1 - int64(w.buf.Len()); room > 0 {
		if int64(len(p)) > room {
			w.buf.Write(p[:room])
		} else {
			w.buf.Write(p)
		}
	}
	return len(p), nil
}
