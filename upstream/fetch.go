package upstream

import (
	"context"
	"errors"
)

// A Param is one argument of a [Binding] that a request parameter carries:
// what a caller other than a tool call (a resource read) needs to know to
// fill it in.
type Param struct {
	Arg      string // the argument's name in the input schema
	Name     string // the parameter's name in the request
	In       string // path, query, header or cookie
	Required bool   // path parameters always are
}

// Params returns the binding's request parameters, in the order the
// operation declares them (the path item's first). Header parameters no
// argument may set (RefusedHeaders) are not among them.
func (b *Binding) Params() []Param {
	out := make([]Param, len(b.params))
	for i, p := range b.params {
		out[i] = Param{Arg: p.arg, Name: p.name, In: p.in, Required: p.required}
	}
	return out
}

// HasBody reports whether the operation takes a request body, and whether
// that body is required.
func (b *Binding) HasBody() (has, required bool) {
	if b.body == nil {
		return false, false
	}
	return true, b.body.required
}

// Fetch validates args against b's input schema and sends b's request as
// [Client.Call] does — the same path builder (escaped segments, no '.' or
// '..' segment even through an encoded '/'), concurrency slot, Timeout,
// response cap and budget, credential and no redirects — but returns the
// answer as it came instead of a tool result: for a reader that maps it
// itself (a resource read). Invalid arguments are an *ArgumentError, and
// nothing is sent; an exchange that got no answer is a *SendError; any
// answer, 2xx or not, is an Answer, whose Truncated says the body went on
// past the cap (the binding's own, if tighter, else the client's).
func (c *Client) Fetch(ctx context.Context, b *Binding, args map[string]any, cred Credentials) (*Answer, error) {
	if err := b.Validate(args); err != nil {
		return nil, err
	}
	req, err := b.Request(ctx, c.base, args)
	if err != nil {
		var ae *ArgumentError
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, &SendError{Outcome: OutcomeBadAnswer, Msg: "the gateway could not build the upstream request", Cause: err}
	}
	res := &reservation{budget: c.opts.ResponseBudget, wait: c.opts.QueueTimeout, limit: c.responseCap(b)}
	defer res.release()
	a, failed, rep := c.exchange(ctx, req, acceptCall, cred, res)
	if a == nil {
		return nil, &SendError{Outcome: rep.Outcome, Msg: failed, Cause: rep.Cause}
	}
	return &Answer{Status: a.resp.StatusCode, Header: a.resp.Header, Body: a.body, Truncated: a.truncated, Elapsed: a.elapsed}, nil
}
