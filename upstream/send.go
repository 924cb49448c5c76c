package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// An Answer is what [Client.Send] read of one response.
type Answer struct {
	Status    int
	Header    http.Header
	Body      []byte // at most the client's MaxResponseBytes
	Truncated bool   // the body went on past Body
	Elapsed   time.Duration
}

// A SendError says why [Client.Send] got no answer. Its message is worded
// for a model ("the upstream could not be reached (502 Bad Gateway)"); the
// detail, which may name internal addresses, is in Cause.
type SendError struct {
	Outcome Outcome
	Msg     string
	Cause   error
}

func (e *SendError) Error() string { return e.Msg }
func (e *SendError) Unwrap() error { return e.Cause }

// Send sends one request the caller speaks the protocol of — the playbook
// runner's execute, status and cancel calls — under the same bounds as
// [Client.Call]: a concurrency slot, Timeout, MaxResponseBytes and the
// response budget, with the same credentials and no redirects. path is
// already escaped (build it with [PathTemplate]) and is appended to the base
// URL's path, so a caller's token goes to the configured origin and nowhere
// else; a path with a segment that reads as '.' or '..' is refused, as
// [PathTemplate] refuses to build one. body, if not nil,
// is sent as application/json. A failure to get an answer is a *SendError;
// any answer, 2xx or not, is an Answer.
func (c *Client) Send(ctx context.Context, method, path string, body []byte, cred Credentials) (*Answer, error) {
	return c.SendQuery(ctx, method, path, "", body, cred)
}

// SendQuery is Send with a query: rawQuery, already escaped, is sent as it
// is (a '#' in it is refused).
func (c *Client) SendQuery(ctx context.Context, method, path, rawQuery string, body []byte, cred Credentials) (*Answer, error) {
	if c.opts.Tracing.Tracer == nil {
		return c.sendQuery(ctx, method, path, rawQuery, body, cred)
	}
	ctx, span := c.startSpan(ctx, method)
	a, err := c.sendQuery(ctx, method, path, rawQuery, body, cred)
	rep := Report{Outcome: OutcomeOK}
	var se *SendError
	switch {
	case errors.As(err, &se):
		rep.Outcome = se.Outcome
	case a != nil:
		rep.Status = a.Status
		if a.Status < 200 || a.Status > 299 {
			rep.Outcome = OutcomeHTTPError
		}
	}
	endSpan(span, rep)
	return a, err
}

// sendQuery is SendQuery, without its span.
func (c *Client) sendQuery(ctx context.Context, method, path, rawQuery string, body []byte, cred Credentials) (*Answer, error) {
	if !strings.HasPrefix(path, "/") || hasDotSegment(path) || strings.Contains(rawQuery, "#") {
		return nil, &SendError{Outcome: OutcomeInvalidArguments, Msg: "the gateway built an invalid upstream path", Cause: fmt.Errorf("upstream: path %q, query %q", path, rawQuery)}
	}
	u, err := joinURL(c.base, path, rawQuery)
	if err != nil {
		return nil, &SendError{Outcome: OutcomeInvalidArguments, Msg: "the gateway built an invalid upstream path", Cause: err}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := newRequest(ctx, method, u, rd)
	if err != nil {
		return nil, &SendError{Outcome: OutcomeInvalidArguments, Msg: "the gateway built an invalid upstream request", Cause: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res := &reservation{budget: c.opts.ResponseBudget, wait: c.opts.QueueTimeout, limit: c.opts.MaxResponseBytes, send: true}
	defer res.release()
	a, failed, rep := c.exchange(ctx, req, acceptJSON, cred, res)
	if a == nil {
		return nil, &SendError{Outcome: rep.Outcome, Msg: failed, Cause: rep.Cause}
	}
	return &Answer{Status: a.resp.StatusCode, Header: a.resp.Header, Body: a.body, Truncated: a.truncated, Elapsed: a.elapsed}, nil
}
