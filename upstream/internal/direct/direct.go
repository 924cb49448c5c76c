// Package direct is the HTTP/1.1 transport of upstream's remote clients
// for a plain-http origin that is not reached through a proxy: a
// [Transport] whose calls write their requests and read their answers on
// the calling goroutine.
//
// net/http's Transport gives every connection a read and a write goroutine,
// so a call hands off to the writer, wakes the reader from the network, and
// is handed the response by it: goroutine wake-ups that this transport does
// not make. That is 15–20 µs of a tools/call's latency at one call in
// flight on 2 cores (mcpgate-bench, gateway and upstream in separate
// processes), 4–9% more calls a second under load, and a quarter less time
// and a third fewer allocations a request from two goroutines
// (BenchmarkRemoteTransport).
//
// The wire format is net/http's own: [http.Request.Write] writes the request
// and [http.ReadResponse] reads the answer, so what is sent and how an answer
// is framed (Content-Length, chunked, close-delimited, HEAD, 204/304) is
// exactly what net/http does. What is written here is the part around
// them, a connection pool:
//
//   - A connection is dialed to the base URL's host and port and to nothing
//     else: a request for another origin is refused before anything is sent,
//     so a caller's token cannot leave for one.
//   - Cancellation and the call's deadline interrupt a blocked read or write
//     (context.AfterFunc sets a deadline in the past); the connection is then
//     closed, never reused.
//   - A connection goes back to the pool only when its answer was read to
//     the end, the server did not ask to close it, and no byte is left over.
//     A truncated answer closes its connection rather than draining it.
//   - An idle connection is checked before reuse (a non-blocking peek: a
//     server that closed it, or sent bytes unasked, is found then), and is
//     closed after 90 s unused, or when more than 64 are idle (net/http's
//     IdleConnTimeout and MaxIdleConnsPerHost in upstream.NewTransport).
//   - A request that failed on a reused connection before any answer came is
//     sent once more, on a newly dialed one, when it is replayable (GET,
//     HEAD, OPTIONS, TRACE, or an Idempotency-Key header, with a body that
//     can be sent again): net/http's rule. Any other request is sent once.
//   - Requests are checked as net/http checks them (method, header names
//     and values) before anything is written.
//   - Response headers, those of 1xx answers included, are bounded by
//     [MaxResponseHeaderBytes].
//
// Clients whose upstream is https, or reached through a proxy
// (HTTP_PROXY/NO_PROXY), or given a Transport of their own (the gateway's
// direct_transport: false gives them upstream.NewTransport), use net/http,
// as do requests with a body of unknown length or over 16 KiB (see [New]),
// and every client on a system without a non-blocking peek ([Usable] says
// so). Unlike net/http it asks for no gzip: answers come uncompressed.
//
// The package is internal to upstream: upstream.NewRemote chooses it for a
// REST upstream, and upstream/federation for the POSTs of its lean
// tools/call hop (Upstream.Forward) to an MCP upstream; no other package
// has a use for a transport of one origin.
package direct

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Transport sends the requests of one upstream client to one plain-HTTP
// origin over HTTP/1.1 keep-alive connections that the calling goroutine
// writes and reads itself (see the package doc). It implements
// [http.RoundTripper] and is safe for concurrent use.
type Transport struct {
	// large sends requests with bodies of unknown length or over
	// maxBody: written here whole before the answer is read, an answer
	// the server sends early (413, 401) without reading the body would be
	// lost; net/http reads while it writes.
	large       http.RoundTripper
	host        string // the base URL's Host: the only origin served
	addr        string // host:port dialed
	dialer      net.Dialer
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*persistConn // most recently used last
	sweep  *time.Timer    // armed while idle is not empty
	closed bool           // Close was called: no connection is kept idle
}

// MaxResponseHeaderBytes bounds an answer's status line and headers; a REST
// API sends a few KiB. (net/http's default is 10 MiB; upstream.NewTransport
// sets this too, so that both transports refuse the same answers.)
const MaxResponseHeaderBytes = 1 << 20

// Bounds of Transport, net/http's where it has them.
const (
	// maxIdle is upstream.NewTransport's MaxIdleConnsPerHost.
	maxIdle = 64
	// idleTimeout is upstream.NewTransport's IdleConnTimeout.
	idleTimeout = 90 * time.Second
	// maxBody bounds the request bodies sent here, not through
	// net/http: what fits the socket buffers (Linux's initial send buffer
	// is 16 KiB) is sent whole even when the server answers without
	// reading it. A tool call's JSON body is far smaller.
	maxBody = 16 << 10
)

// NetHTTP returns net/http's transport as the gateway tunes it for one
// remote upstream (upstream.NewTransport is this): explicit dial and TLS
// timeouts, an idle pool sized for many concurrent calls to one host, and
// the same response header bound as this transport's. It is what an
// upstream this transport does not serve uses, what this one sends its
// large requests through, and what the differential tests hold it to.
func NetHTTP() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
}

// New returns a Transport for base, an http URL that [Usable] accepts.
// large sends the requests that are not sent here, those with a body of
// unknown length or over 16 KiB: net/http's Transport, made for the same
// upstream (upstream.NewTransport). It must not be nil.
func New(base *url.URL, large http.RoundTripper) *Transport {
	port := base.Port()
	if port == "" {
		port = "80"
	}
	return &Transport{
		large:       large,
		host:        base.Host,
		addr:        net.JoinHostPort(base.Hostname(), port),
		dialer:      net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle:     maxIdle,
		idleTimeout: idleTimeout,
	}
}

// Usable reports whether requests for base may use a Transport: base is an
// http URL that proxy (http.ProxyFromEnvironment: HTTP_PROXY, NO_PROXY) does
// not send through a proxy, on a system where an idle connection the server
// closed can be told before reuse.
func Usable(base *url.URL, proxy func(*http.Request) (*url.URL, error)) bool {
	if base.Scheme != "http" || !canPeek {
		return false
	}
	p, err := proxy(&http.Request{URL: base})
	return err == nil && p == nil
}

// persistConn is one connection of a Transport, used by one call at a time.
type persistConn struct {
	conn      net.Conn
	in        *countingReader
	br        *bufio.Reader
	bw        *bufio.Writer
	reused    bool
	idleSince time.Time
}

// countingReader reads the connection for br: at most left bytes (the
// header bound while an answer's headers are read), counting what came.
type countingReader struct {
	r    io.Reader
	left int64
	read int64
}

var errHeaderTooLarge = fmt.Errorf("direct: the upstream's response headers exceed %d bytes", MaxResponseHeaderBytes)

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.read += int64(n)
	return n, err
}

// aLongTimeAgo is a deadline in the past: it ends a blocked read or write at
// once (net/http's idiom).
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends req, a request for the base URL's origin, and returns the
// answer once its headers are read; the connection is the body's until it
// is closed (see [http.RoundTripper]).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host != t.host || req.Host != "" && req.Host != t.host {
		// Cannot happen: upstream builds every URL on the base (joinURL). Checked
		// anyway: this is what keeps a caller's token on its origin.
		closeBody(req)
		return nil, fmt.Errorf("direct: a request for another origin than %s", t.host)
	}
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength < 0 || req.ContentLength > maxBody) {
		return t.large.RoundTrip(req)
	}
	if err := validRequest(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			closeBody(req)
			return nil, err
		}
		dc, err := t.conn(ctx, attempt > 0)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, failed := t.exchange(ctx, dc, req)
		if failed == nil {
			return resp, nil
		}
		if attempt > 0 || !dc.reused || ctx.Err() != nil || !failed.retry {
			closeBody(req)
			return nil, failed.err
		}
		// Once more, on a new connection, with the body from the start.
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, failed.err
			}
			r := *req
			r.Body = body
			req = &r
		}
	}
}

// exchangeError is a failed exchange, and whether it may be sent again.
type exchangeError struct {
	err   error
	retry bool
}

// exchange sends req on dc and reads the answer's headers. On failure dc is
// closed.
func (t *Transport) exchange(ctx context.Context, dc *persistConn, req *http.Request) (*http.Response, *exchangeError) {
	stop := context.AfterFunc(ctx, func() { dc.conn.SetDeadline(aLongTimeAgo) })
	fail := func(err error, retry bool) (*http.Response, *exchangeError) {
		stop()
		dc.conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err() // a deadline set by the AfterFunc, or what it interrupted
		}
		return nil, &exchangeError{err: err, retry: retry}
	}
	if err := req.Write(dc.bw); err != nil {
		// Not sent again: a request larger than bw was partly written
		// before this failed (a write error of a kept-alive connection
		// shows at Flush, below, or at the answer).
		return fail(err, false)
	}
	if err := dc.bw.Flush(); err != nil {
		return fail(err, replayable(req))
	}
	dc.in.left, dc.in.read = MaxResponseHeaderBytes, 0
	resp, err := http.ReadResponse(dc.br, req)
	// Informational answers (100 Continue, 102 Processing sent as a
	// keep-alive, 103 Early Hints) come before the answer, and are skipped
	// as net/http does; all their headers count against the header bound.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode <= 199 {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// net/http hands over the connection; nothing here asked
			// to switch.
			return fail(errors.New("direct: the upstream answered 101 Switching Protocols to a request that did not ask to switch"), false)
		}
		resp, err = http.ReadResponse(dc.br, req)
	}
	if err != nil {
		if dc.in.read == 0 && errors.Is(err, io.ErrUnexpectedEOF) {
			// No byte of an answer came: the server closed a kept-alive
			// connection as the request arrived (and, for a replayable
			// request, did not act on it). net/http's word for it.
			err = io.EOF
		}
		return fail(err, dc.in.read == 0 && replayable(req))
	}
	dc.in.left = math.MaxInt64
	resp.Body = &responseBody{ReadCloser: resp.Body, t: t, dc: dc, ctx: ctx, stop: stop, keep: !resp.Close}
	return resp, nil
}

// validRequest applies net/http's checks of what it writes: a method that
// is a token, header names that are tokens and values without control
// characters (a NUL in a token from a token endpoint is refused, not sent).
func validRequest(req *http.Request) error {
	if req.Method != "" && !validToken(req.Method) {
		return fmt.Errorf("direct: invalid method %q", req.Method)
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("direct: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("direct: invalid value for header field %q", k) // the value may be a token: not quoted
			}
		}
	}
	return nil
}

func validToken(s string) bool {
	for _, r := range s {
		if !httpguts.IsTokenRune(r) {
			return false
		}
	}
	return true
}

// replayable is net/http's Request.isReplayable: a request sent again
// without harm.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// responseBody is an answer's body. Its connection goes back to the pool when
// the body was read to its end and closed.
type responseBody struct {
	io.ReadCloser
	t    *Transport
	dc   *persistConn
	ctx  context.Context
	stop func() bool
	keep bool // the server did not ask to close
	eof  bool
	done bool
}

func (b *responseBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("direct: read on a closed response body")
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

// Close returns the connection to the pool, or closes it: it never reads
// what is left of a body (net/http's body would, to its end).
func (b *responseBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if !b.stop() || !b.eof || !b.keep || b.dc.br.Buffered() > 0 {
		return b.dc.conn.Close()
	}
	b.ReadCloser.Close() // read to its end: nothing to drain
	b.t.put(b.dc)
	return nil
}

// conn returns an idle connection that is still open, or a new one (always
// when fresh).
func (t *Transport) conn(ctx context.Context, fresh bool) (*persistConn, error) {
	for !fresh {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		dc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if time.Since(dc.idleSince) < t.idleTimeout && stillOpen(dc.conn) {
			dc.reused = true
			return dc, nil
		}
		dc.conn.Close()
	}
	c, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	in := &countingReader{r: c, left: math.MaxInt64}
	return &persistConn{conn: c, in: in, br: bufio.NewReaderSize(in, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}, nil
}

// put makes dc idle, unless the pool is full.
func (t *Transport) put(dc *persistConn) {
	dc.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle) >= t.maxIdle || t.closed {
		t.mu.Unlock()
		dc.conn.Close()
		return
	}
	t.idle = append(t.idle, dc)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.sweepIdle)
	}
	t.mu.Unlock()
}

// sweepIdle closes the connections idle for idleTimeout, and comes back
// for the others when the oldest of them is due.
func (t *Transport) sweepIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep = nil
	now := time.Now()
	kept := t.idle[:0]
	for _, dc := range t.idle {
		if now.Sub(dc.idleSince) >= t.idleTimeout {
			dc.conn.Close()
			continue
		}
		kept = append(kept, dc)
	}
	clear(t.idle[len(kept):])
	t.idle = kept
	if len(kept) > 0 {
		t.sweep = time.AfterFunc(t.idleTimeout-now.Sub(kept[0].idleSince), t.sweepIdle)
	}
}

// CloseIdleConnections closes the idle connections (http.Client calls it),
// those of the transport that sends the large requests too.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, dc := range idle {
		dc.conn.Close()
	}
	if c, ok := t.large.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Close closes the idle connections, and from now on closes each
// connection a call gives back instead of keeping it idle: calls in
// flight finish, and so does a call sent after Close (on a connection
// dialed for it alone), but nothing is left open once they have. It is
// for a transport its clients are done with (upstream.CloseTransport).
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.CloseIdleConnections()
}
