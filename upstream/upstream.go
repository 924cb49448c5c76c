// Package upstream turns OpenAPI operations into callable bindings and calls
// them: it loads the API's document, builds each operation's [Binding] (the
// flat input schema and the request builder, made together), sends requests
// through a [Client] — to a remote base URL or to an in-process http.Handler —
// and maps HTTP responses to MCP tool results.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/upstream/internal/direct"
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
	// own, tuned for one upstream: for a plain-http base URL not reached
	// through a proxy, an HTTP/1.1 transport whose calls read and write
	// their connections themselves (direct.Transport, faster than net/http's
	// at the same wire format); else NewTransport's. Set it to
	// NewTransport() to use net/http's in every case.
	Transport http.RoundTripper
	// UserAgent is sent upstream. Empty means "mcpgate".
	UserAgent string

	// Name names the upstream in the messages a model reads ("upstream
	// billing is busy"). Empty means "api": not the base URL's host, which
	// may be an internal address.
	Name string
	// MaxConcurrent bounds the calls in flight to this upstream, from
	// sending the request to reading the whole answer. Zero means
	// DefaultMaxConcurrent. A call over it waits for a slot, up to
	// QueueTimeout, and is then refused without sending anything.
	MaxConcurrent int
	// QueueTimeout bounds how long a call waits for a slot (MaxConcurrent)
	// and for room in the ResponseBudget, all its waits together: a call
	// whose answer grows its buffer several times does not wait several
	// times as long. The wait for a slot comes before Timeout starts, so
	// the upstream gets all of it; a wait for room comes within it. Zero
	// means DefaultQueueTimeout.
	QueueTimeout time.Duration
	// ResponseBudget, shared by every Client of one gateway, bounds the
	// bytes of answers held in memory across all their calls; answers are
	// cut at its size. Nil means no shared bound, only MaxResponseBytes per
	// call.
	ResponseBudget *ResponseBudget
	// Tracing says what goes upstream with each request to follow a call
	// (request id, traceparent) and whether each request gets a span (see
	// trace.go). The zero value makes no span.
	Tracing Tracing
}

// A Client calls one upstream API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	rt        http.RoundTripper
	opts      ClientOptions
	inproc    bool
	slots     slots
	sends     atomic.Int64 // slots held by Send (see SendsInFlight)
	userAgent []string     // opts.UserAgent, as a header value
}

// NewTransport returns the http.Transport the gateway uses for one remote
// upstream: explicit dial and TLS timeouts, and an idle pool sized for many
// concurrent tool calls to the same host. It sets no ResponseHeaderTimeout:
// each call's own deadline (ClientOptions.Timeout, which an operator may set
// above a minute for a slow API) bounds the wait for the answer, and a
// second, shorter bound would cut such calls with a message that names
// neither (and costs a timer per call).
func NewTransport() *http.Transport { return direct.NetHTTP() }

// NewRemote returns a Client for the API at baseURL (http or https). Operation
// paths are appended to baseURL's path.
func NewRemote(baseURL string, opts *ClientOptions) (*Client, error) {
	u, err := parseBase(baseURL)
	if err != nil {
		return nil, err
	}
	c := newClient(u, opts)
	if c.rt == nil {
		c.rt = remoteTransport(u, false)
	}
	return c, nil
}

// parseBase parses a remote client's base URL: absolute http or https,
// without credentials.
func parseBase(baseURL string) (*url.URL, error) {
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
	return u, nil
}

// RemoteTransport returns the transport [NewRemote] makes for a client of
// baseURL given none: direct.Transport when the base URL is plain http not
// reached through a proxy (and netHTTP is false), else [NewTransport]'s. It
// is for a caller that shares one transport, and so its pool of keep-alive
// connections, between the clients of one upstream (ClientOptions.Transport)
// — a gateway and the one a reload builds to replace it — and closes it
// with [CloseTransport] when the last of them is done. What it returns
// depends on baseURL's scheme and host (host:port) only, the proxy
// environment (read once per process by http.ProxyFromEnvironment) and
// netHTTP: clients whose base URLs differ only in path may share it.
func RemoteTransport(baseURL string, netHTTP bool) (http.RoundTripper, error) {
	u, err := parseBase(baseURL)
	if err != nil {
		return nil, err
	}
	return remoteTransport(u, netHTTP), nil
}

func remoteTransport(u *url.URL, netHTTP bool) http.RoundTripper {
	if !netHTTP && direct.Usable(u, http.ProxyFromEnvironment) {
		return direct.New(u, NewTransport())
	}
	return NewTransport()
}

// CloseTransport closes a transport of [RemoteTransport]'s once no client
// will send on it again: its idle connections now, and — direct.Transport
// — each connection a call still in flight holds when that call ends,
// rather than keeping it idle. (net/http's Transport has no such state: a
// connection a call in flight gives back after this stays idle until its
// IdleConnTimeout, 90 s.) Calls in flight finish; a call sent after it is
// served on a connection closed when it ends. Any other RoundTripper has
// its idle connections closed, when it can.
func CloseTransport(rt http.RoundTripper) {
	switch t := rt.(type) {
	case *direct.Transport:
		t.Close()
	case interface{ CloseIdleConnections() }:
		t.CloseIdleConnections()
	}
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
	if c.opts.Name == "" {
		c.opts.Name = "api"
	}
	if c.opts.MaxConcurrent <= 0 {
		c.opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.opts.QueueTimeout <= 0 {
		c.opts.QueueTimeout = DefaultQueueTimeout
	}
	if b := c.opts.ResponseBudget; b != nil && c.opts.MaxResponseBytes > b.size {
		// An answer larger than the whole budget could never be held.
		c.opts.MaxResponseBytes = b.size
	}
	c.slots = make(slots, c.opts.MaxConcurrent)
	c.rt = c.opts.Transport
	c.userAgent = []string{c.opts.UserAgent}
	return c
}

// BaseURL returns the upstream's base URL (for in-process clients, a
// placeholder host that is never dialed).
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// InFlight is the number of calls holding one of the MaxConcurrent slots:
// sent to the upstream, or about to be, and not yet answered. Calls waiting
// for a slot are not counted. Safe for concurrent use; it takes no lock.
func (c *Client) InFlight() int { return len(c.slots) }

// SendsInFlight is the number of InFlight's slots held by [Client.Send]
// (a playbook engine's execute, status and cancel requests) rather than by
// tool calls. A gauge of tool calls in flight counts InFlight less these,
// plus the calls waiting on a run (playbook.Runner.Waiting): a playbook
// call holds a slot only while one of its run's requests is out, a few
// milliseconds of each poll interval. Safe for concurrent use.
func (c *Client) SendsInFlight() int { return int(c.sends.Load()) }

// Credentials are what a call presents to the upstream.
type Credentials struct {
	// BearerToken, if set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// Header, if set, is sent with the value Value (auth's static mode, e.g.
	// X-Api-Key); it is set after BearerToken, so it wins over it.
	Header string
	Value  string
}

// apply sets c on an upstream request's header. Every request a Client sends
// (REST calls and playbook routes alike) takes its credential here, so a
// credential mode cannot apply to one and not the other.
func (c Credentials) apply(h http.Header) {
	if c.BearerToken != "" {
		h.Set("Authorization", "Bearer "+c.BearerToken)
	}
	if c.Header != "" {
		h.Set(c.Header, c.Value)
	}
}

// Outcome says how a call ended, in a word fit for a log attribute or a
// metric label.
type Outcome string

// The outcomes of [Client.Call].
const (
	OutcomeOK               Outcome = "ok"                // a 2xx answer, mapped
	OutcomeInvalidArguments Outcome = "invalid_arguments" // refused before anything was sent
	OutcomeHTTPError        Outcome = "http_error"        // the API answered non-2xx
	OutcomeBadAnswer        Outcome = "bad_answer"        // a 2xx answer that is not what the operation declares
	OutcomeBusy             Outcome = "busy"              // refused by the gateway's own bounds (concurrency, memory)
	OutcomeTimeout          Outcome = "timeout"           // no answer within the upstream's timeout
	OutcomeCancelled        Outcome = "cancelled"         // the caller went away first
	OutcomeUnreachable      Outcome = "unreachable"       // no answer: connection refused, reset, cut short
)

// A Report says what became of one call, for the gateway's log line and
// metrics. Cause holds the detail of a failure (a dial error, with the
// address it dialed) that the model is not shown.
type Report struct {
	Outcome Outcome
	Status  int           // the upstream's HTTP status; 0 when there was no answer
	Elapsed time.Duration // from sending the request to reading the answer
	Cause   error
}

// Failed reports whether the call failed on the upstream's side or the
// gateway's (not the caller's arguments, not a 4xx the API chose).
func (r Report) Failed() bool {
	switch r.Outcome {
	case OutcomeBadAnswer, OutcomeBusy, OutcomeTimeout, OutcomeUnreachable:
		return true
	case OutcomeHTTPError:
		return r.Status >= 500
	}
	return false
}

// responseCap is the most of an answer to b's request the client reads:
// the binding's own cap (agent-large tools), if tighter, else the
// client's MaxResponseBytes.
func (c *Client) responseCap(b *Binding) int64 {
	if b.maxResponse > 0 && b.maxResponse < c.opts.MaxResponseBytes {
		return b.maxResponse
	}
	return c.opts.MaxResponseBytes
}

// Call validates args against b's input schema, sends the request and maps the
// response to a tool result. Invalid arguments, upstream failures and non-2xx
// answers all come back as a result with IsError set, worded for the model;
// the Report says what happened, with the detail for logs.
func (c *Client) Call(ctx context.Context, b *Binding, args map[string]any, cred Credentials) (*mcp.CallToolResult, Report) {
	if c.opts.Tracing.Tracer == nil {
		return c.call(ctx, b, args, cred)
	}
	ctx, span := c.startSpan(ctx, b.Method)
	res, rep := c.call(ctx, b, args, cred)
	endSpan(span, rep)
	return res, rep
}

// call is Call, without its span.
func (c *Client) call(ctx context.Context, b *Binding, args map[string]any, cred Credentials) (*mcp.CallToolResult, Report) {
	if err := b.Validate(args); err != nil {
		return errorResult(err.Error()), Report{Outcome: OutcomeInvalidArguments, Cause: err}
	}
	limit := c.responseCap(b)
	hold := AnswerHoldFrom(ctx)
	cost := hold.cost()
	weight := int64(1)
	if budget := c.opts.ResponseBudget; cost != nil && budget != nil {
		// The answer is counted with what its writer will hold: it must
		// fit the budget with that.
		weight += max(cost.PerByte, 0)
		limit = min(limit, budget.size/weight)
	}
	req, err := b.Request(ctx, c.base, args)
	if err != nil {
		var ae *ArgumentError
		if errors.As(err, &ae) {
			return errorResult(ae.Error()), Report{Outcome: OutcomeInvalidArguments, Cause: err}
		}
		// Request checks the path it built; this is the gateway's fault.
		return errorResult("the gateway could not build the upstream request"), Report{Outcome: OutcomeBadAnswer, Cause: err}
	}
	// The call's share of the response budget: taken as the answer is read,
	// given back when the result is made, or when ctx's AnswerHold is
	// released (the answer written to the client). A call that got no
	// answer, or could not keep it, answers with a few words and gives its
	// share back at once: nothing of the answer is held.
	res := &reservation{budget: c.opts.ResponseBudget, weight: weight, wait: c.opts.QueueTimeout, limit: limit}
	if b.OutputSchema != nil && !b.objectOnly() {
		res.claimWeight = 1 + decodeClaim // it will decode its answer: see room
	}
	kept := false
	defer func() {
		if !kept || !hold.keep(res) {
			res.release()
		}
	}()
	a, failed, rep := c.exchange(ctx, req, acceptCall, cred, res)
	if a == nil {
		return errorResult(failed), rep
	}
	rep = Report{Outcome: OutcomeOK, Status: a.resp.StatusCode, Elapsed: a.elapsed}
	// Decoding a large answer (to check it against the output schema) is
	// counted while it is done: see decodedSize.
	decoded := false
	room := func(body []byte) error {
		if len(body) < countDecodeFrom || res.budget == nil {
			return nil
		}
		decoded = true
		return res.ensure(ctx, min(decodedSize(body), res.budget.size-res.read))
	}
	result, bad := b.result(a.resp, a.body, a.truncated, room)
	if result == nil {
		// No room to decode the answer.
		msg, rep := c.failure(ctx, bad, a.elapsed)
		rep.Status = a.resp.StatusCode
		return errorResult(msg), rep
	}
	if hold != nil {
		// Held until written: count what the writer will hold, now that it
		// can be known, and give back the room to decode the answer.
		// (Nothing to do when nothing was counted but the answer and the
		// writer holds nothing more, as on the fast path.)
		var extra int64
		if cost != nil && cost.Of != nil {
			extra = cost.Of(result)
		}
		if extra != 0 || weight > 1 || decoded {
			if err := res.settle(ctx, extra); err != nil {
				msg, rep := c.failure(ctx, err, a.elapsed)
				rep.Status = a.resp.StatusCode
				return errorResult(msg), rep
			}
		}
	}
	switch {
	case a.resp.StatusCode < 200 || a.resp.StatusCode > 299:
		rep.Outcome = OutcomeHTTPError
	case bad != nil:
		rep.Outcome, rep.Cause = OutcomeBadAnswer, bad
	}
	kept = true
	return result, rep
}

// The Accept headers of a tool call (JSON preferred, anything taken: the
// result mapping words what is not JSON) and of a JSON-RPC exchange ([Client.Send]).
var (
	acceptCall = []string{"application/json, */*;q=0.5"}
	acceptJSON = []string{"application/json"}
)

// exchanged is what one bounded exchange with the upstream got back. resp's
// body is read (into body) and closed.
type exchanged struct {
	resp      *http.Response
	body      []byte // at most res.limit bytes
	truncated bool   // the body went on past body
	elapsed   time.Duration
}

// exchange sends req to the upstream under the client's bounds, for Call
// and Send alike: a concurrency slot, waited for before the timeout starts
// (the upstream gets its whole Timeout, and a refused call has sent
// nothing); Timeout; the response budget, claimed through res as the answer
// is read (by the in-process writer, which buffers it, or by readBody), at
// most res.limit bytes of it kept. It sets the gateway's User-Agent, accept
// and cred. The slot is free again when it returns. When no answer came, it
// returns nil, the words for the caller and the Report of the failure
// (see failure).
//
// The request URL is always the configured base plus a path built from
// escaped parts, so the token goes to the upstream's origin and nowhere
// else. Redirects are not followed, for the same reason.
func (c *Client) exchange(ctx context.Context, req *http.Request, accept []string, cred Credentials, res *reservation) (*exchanged, string, Report) {
	if c.inproc {
		ctx = withReservation(ctx, res)
	}
	releaseSlot, err := c.slots.acquire(ctx, c.opts.Name, res)
	if err != nil {
		msg, rep := c.failure(ctx, err, 0)
		return nil, msg, rep
	}
	defer releaseSlot()
	if res.send {
		c.sends.Add(1)
		defer c.sends.Add(-1)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req = req.WithContext(ctx)
	req.Header["User-Agent"] = c.userAgent // shared slices: net/http only reads them
	req.Header["Accept"] = accept
	cred.apply(req.Header)
	c.propagate(ctx, req.Header)
	start := time.Now()
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		msg, rep := c.failure(ctx, err, time.Since(start))
		return nil, msg, rep
	}
	defer resp.Body.Close()
	a := &exchanged{resp: resp}
	if held, ok := resp.Body.(*heldBody); ok {
		// In-process: the writer kept at most limit bytes, counted already.
		a.body, a.truncated = held.data, held.cut
	} else if a.body, a.truncated, err = readBody(ctx, resp.Body, res.limit, resp.ContentLength, res); err != nil {
		msg, rep := c.failure(ctx, err, time.Since(start))
		rep.Status = resp.StatusCode
		return nil, msg, rep
	}
	a.elapsed = time.Since(start)
	return a, "", Report{}
}

// failure maps a call that got no answer — refused by a bound of the
// gateway's own, or a failed round trip — to clean words for the model
// and a Report that keeps the detail. The words are a reverse proxy's (cf.
// caddy's 502/504 mapping); what was dialed, and why it failed, stays in
// Cause: a model has no use for internal addresses.
func (c *Client) failure(ctx context.Context, err error, elapsed time.Duration) (string, Report) {
	rep := Report{Elapsed: elapsed, Cause: err}
	var msg string
	var ne net.Error
	switch {
	case limitMessage(err) != "":
		rep.Outcome, msg = OutcomeBusy, limitMessage(err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout():
		rep.Outcome, msg = OutcomeTimeout, fmt.Sprintf("the upstream did not answer within %s (504 Gateway Timeout)", c.opts.Timeout)
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		rep.Outcome, msg = OutcomeCancelled, "call cancelled before the upstream answered (499)"
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The connection closed before the declared length or the last chunk.
		rep.Outcome, msg = OutcomeUnreachable, "the upstream's answer ended early (502 Bad Gateway)"
	default:
		rep.Outcome, msg = OutcomeUnreachable, "the upstream could not be reached (502 Bad Gateway)"
	}
	return msg, rep
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: msg}},
	}
}

// HandlerTransport returns a RoundTripper that serves every request with h, in
// this process. It keeps at most one byte more than MaxDocumentBytes of an
// answer, so a reader can tell an oversized document.
func HandlerTransport(h http.Handler) http.RoundTripper {
	return handlerTransport{h: h, max: MaxDocumentBytes + 1}
}

// handlerTransport serves requests with an http.Handler in this process.
type handlerTransport struct {
	h   http.Handler
	max int64 // bytes of an answer kept
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
	w := &bufferedResponse{header: http.Header{}, max: t.max, ctx: req.Context()}
	if res := reservationFrom(req.Context()); res != nil {
		// A Client call: keep no more than the call reads, and count it.
		w.res = res
		w.max = min(w.max, res.limit)
	}
	// The handler runs on its own goroutine, as it would behind a server, so
	// that the call ends at its deadline even when the handler does not: the
	// answer is then abandoned (never read again) and the handler's further
	// writes fail, which is how a streaming handler learns its client is gone.
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					done <- errors.New("handler aborted the response")
					return
				}
				done <- fmt.Errorf("in-process handler panicked: %v", p)
			}
		}()
		t.h.ServeHTTP(w, r)
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	if w.err != nil && w.err != errAnswerCut {
		return nil, w.err
	}
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
		Body:          &heldBody{Reader: bytes.NewReader(w.buf), data: w.buf, cut: w.cut},
		ContentLength: int64(len(w.buf)),
		Request:       req,
	}, nil
}

// minBuffer is the least an in-process answer's buffer starts at.
const minBuffer = 512

// heldBody is the body of an in-process answer, already in memory; Client.Call
// uses data as is rather than copying it.
type heldBody struct {
	*bytes.Reader
	data []byte
	cut  bool // the handler wrote more than was kept
}

func (*heldBody) Close() error { return nil }

// bufferedResponse is the http.ResponseWriter of an in-process call. It keeps at
// most max bytes, so a runaway handler cannot exhaust memory; the caller sees
// the body as truncated. For a Client call, its buffer grows only with room
// reserved from the call's ResponseBudget share first, so in-process answers
// count against the same bound as remote ones; when there is no room, Write
// fails and the call is refused with the budget's message. (What the handler
// allocates to make its answer is its own, and not counted.)
type bufferedResponse struct {
	header http.Header
	code   int
	buf    []byte
	max    int64
	cut    bool

	ctx context.Context // the request's, for waiting on the budget
	res *reservation    // nil: not a Client call
	err error           // why the buffer could not grow; Write fails from then on
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
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return 0, err
	}
	n := len(p)
	if room := w.max - int64(len(w.buf)); int64(len(p)) > room {
		// Keep what fits and fail the write, as a closed connection would:
		// the answer is cut here whatever comes next, and a handler that
		// streams until its client goes away stops now.
		w.cut = true
		w.err = errAnswerCut
		n, p = int(room), p[:room]
	}
	if need := len(w.buf) + len(p); need > cap(w.buf) {
		size := min(max(2*int64(cap(w.buf)), int64(need), firstChunk), w.max)
		if err := w.res.grow(w.ctx, size, w.max); err != nil {
			w.err = err
			return 0, err
		}
		// Room is reserved in chunks, but the buffer grows only as the
		// answer does: most answers are a few hundred bytes, and a 64 KiB
		// buffer per call would be most of a call's allocation.
		nb := make([]byte, len(w.buf), min(max(2*int64(cap(w.buf)), int64(need), minBuffer), size))
		copy(nb, w.buf)
		w.buf = nb
	}
	w.buf = append(w.buf, p...)
	return n, w.errIfCut()
}

// errAnswerCut fails an in-process handler's writes past the kept maximum.
var errAnswerCut = errors.New("the answer is longer than the gateway keeps; it was cut")

func (w *bufferedResponse) errIfCut() error {
	if w.cut {
		return errAnswerCut
	}
	return nil
}
