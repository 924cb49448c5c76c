package federation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relay says where the upstream's notifications and requests for one call
// go: to the gateway's caller. A nil field drops the notification, or
// answers the request with "method not found". Its functions may be called
// concurrently, and only while the call is in flight.
//
// Attribution: progress notifications carry the call's own progress token,
// so they reach exactly their call. Log notifications and server→client
// requests (sampling, elicitation, roots) name no call in protocol versions
// before 2026-07-28: a log message goes to every call in flight on the
// session it arrived on, a request to the most recent call in flight on
// that session whose Relay can answer it. From 2026-07-28 on, go-sdk
// fulfils sampling and elicitation within the call that asked, and they
// reach exactly that call.
type Relay struct {
	// Progress receives the call's progress, with the caller's progress
	// token put back.
	Progress func(ctx context.Context, p *mcp.ProgressNotificationParams)
	// Log receives the upstream's log messages (see [Options.LogLevel]).
	Log func(ctx context.Context, p *mcp.LoggingMessageParams)
	// CreateMessage answers sampling/createMessage.
	CreateMessage func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	// Elicit answers elicitation/create.
	Elicit func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// ListRoots answers roots/list.
	ListRoots func(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
}

// call is one gateway call in flight to the upstream.
type call struct {
	ctx         context.Context // the caller's, with the call timeout
	relay       *Relay          // never nil
	callerToken any             // the caller's progress token; nil: none
	token       string          // ours, sent upstream; "": none
	ended       atomic.Bool     // the result arrived
	returned    atomic.Bool     // its method returned, late notifications awaited
	// forwarded: a call of Upstream.Forward, whose notifications come on
	// its own POST, none through go-sdk's handlers after it ends.
	forwarded bool
}

func (u *Upstream) newCall(r *Relay) *call {
	if r == nil {
		r = &Relay{}
	}
	return &call{relay: r}
}

// prepareMeta returns the _meta to send for a call whose caller sent meta:
// the caller's progress token replaced by one of ours (unique: two callers
// may use the same token, and the upstream sees them all on one session),
// or removed when there is nowhere to relay progress to.
func (u *Upstream) prepareMeta(meta mcp.Meta, c *call) mcp.Meta {
	m := withoutHopMeta(meta)
	delete(m, "progressToken")
	if tok, ok := meta["progressToken"]; ok && tok != nil && c.relay.Progress != nil {
		c.callerToken = tok
		c.token = u.tokenPrefix + strconv.FormatUint(u.seq.Add(1), 10)
		if m == nil {
			m = mcp.Meta{}
		}
		m["progressToken"] = c.token
		u.mu.Lock()
		u.progress[c.token] = c
		u.mu.Unlock()
	}
	if lvl := u.opts.LogLevel; lvl != "" && c.relay.Log != nil {
		if m == nil {
			m = mcp.Meta{}
		}
		if _, ok := m[mcp.MetaKeyLogLevel]; !ok {
			m[mcp.MetaKeyLogLevel] = lvl // read from 2026-07-28 on
		}
	}
	return m
}

// hopMetaPrefix marks the _meta keys the protocol reserves for itself
// (protocol version, client and server info, capabilities, log level,
// subscription id): they describe one hop, the caller's to the gateway or
// the gateway's to the upstream, and are never carried across. A caller's
// 2026-07-28 protocolVersion sent on to an upstream that negotiated
// 2025-11-25 would have the upstream refuse the call.
const hopMetaPrefix = "io.modelcontextprotocol/"

// withoutHopMeta returns a copy of meta without the hop's own keys; nil
// when nothing is left.
func withoutHopMeta(meta mcp.Meta) mcp.Meta {
	var m mcp.Meta
	for k, v := range meta {
		if !strings.HasPrefix(k, hopMetaPrefix) {
			if m == nil {
				m = mcp.Meta{}
			}
			m[k] = v
		}
	}
	return m
}

// release forgets c's progress token after the grace period: go-sdk may
// hand over progress notifications after the result that followed them.
func (u *Upstream) release(c *call) {
	if c.token == "" {
		return
	}
	time.AfterFunc(u.grace, func() {
		u.mu.Lock()
		delete(u.progress, c.token)
		u.mu.Unlock()
	})
}

// do runs send on a session of cred, under the call timeout. A session the
// upstream lost is replaced once; the call is sent again only when it did
// not reach the upstream, or when idempotent.
func (u *Upstream) do(ctx context.Context, cred Credential, method string, idempotent bool, c *call, send func(context.Context, *mcp.ClientSession) error) error {
	return u.doOn(ctx, u.slotFor(cred), method, idempotent, c, send)
}

// doOn is do on the session of slot s. [ErrNotForwarded] from send is
// returned as it is, the session kept.
func (u *Upstream) doOn(ctx context.Context, s *slot, method string, idempotent bool, c *call, send func(context.Context, *mcp.ClientSession) error) error {
	if err := u.downErr(); err != nil {
		return err
	}
	if method != "list" { // a caller's request, not the gateway's own listing
		release, err := u.admit(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	own := c == nil // a call of no caller's (listing, completion): it awaits no notification
	if own {
		c = u.newCall(nil)
	}
	c.ctx = ctx
	for attempt := 0; ; attempt++ {
		cs, err := s.session(ctx)
		if err != nil {
			return u.callErr(ctx, method, fmt.Errorf("connecting: %w", err))
		}
		s.begin(c)
		err = send(ctx, cs)
		if c.forwarded {
			s.endForwarded(c)
		} else {
			s.end(c)
		}
		if own {
			c.returned.Store(true)
		}
		if errors.Is(err, ErrNotForwarded) {
			return err
		}
		if final, err := u.outcome(ctx, method, err); final {
			return err
		}
		s.drop(cs)
		if attempt == 0 && (notSent(err) || idempotent) {
			u.log.Debug("upstream session lost; starting another", "method", method, "error", u.redact(err))
			continue
		}
		if !notSent(err) {
			err = fmt.Errorf("the session was lost, the call may have run: %w", err)
		}
		return u.callErr(ctx, method, err)
	}
}

// ErrBusy is a caller's request refused because Options.MaxConcurrent
// requests were in flight to the upstream for the whole of
// Options.QueueTimeout: nothing was sent.
var ErrBusy = errors.New("federation: upstream busy")

// busyError is ErrBusy with the bound it met, worded as a REST upstream's.
type busyError struct{ msg string }

func (e *busyError) Error() string        { return e.msg }
func (e *busyError) Is(target error) bool { return target == ErrBusy }

// admit takes one of the upstream's MaxConcurrent slots, waiting at most
// QueueTimeout (and no longer than ctx) for one; release gives it back.
func (u *Upstream) admit(ctx context.Context) (release func(), err error) {
	select {
	case u.admitted <- struct{}{}:
	default:
		t := time.NewTimer(u.opts.QueueTimeout)
		defer t.Stop()
		select {
		case u.admitted <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, &busyError{fmt.Sprintf("federation: upstream %s is busy: %d calls in flight, none finished within %s; try again", u.name, cap(u.admitted), u.opts.QueueTimeout)}
		}
	}
	return func() { <-u.admitted }, nil
}

// outcome sorts a request's result: final when it is the answer (nil, or
// the error to return: the upstream's own, or the caller's deadline or
// cancellation), not final when the session was lost on the way — the
// caller then drops the session and may send the request again.
func (u *Upstream) outcome(ctx context.Context, method string, err error) (final bool, _ error) {
	switch {
	case err == nil:
		u.answeredNow()
		return true, nil
	case ctx.Err() != nil:
		return true, u.callErr(ctx, method, err)
	case answered(err):
		u.answeredNow()
		return true, u.callErr(ctx, method, err)
	}
	return false, err
}

func (u *Upstream) callErr(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return fmt.Errorf("federation: upstream %q: %s: no answer within %v: %w", u.name, method, u.cfg.Timeout, context.DeadlineExceeded)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("federation: upstream %q: %s: cancelled by the caller: %w", u.name, method, context.Canceled)
	}
	err = fmt.Errorf("federation: upstream %q: %s: %w", u.name, method, err)
	if msg := u.redact(err); msg != err.Error() {
		// These texts reach callers.
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// redact is err's text without the endpoint's query and user info: a
// transport error quotes the URL whole, and its query may hold a key. For
// error texts callers read, and for logs.
func (u *Upstream) redact(err error) string {
	msg := err.Error()
	if u.endpoint != "" && strings.Contains(msg, u.endpoint) {
		if pu, perr := url.Parse(u.endpoint); perr == nil {
			return strings.ReplaceAll(msg, u.endpoint, redactURL(pu))
		}
	}
	return msg
}

// redactedError is an error whose text has the endpoint's credentials
// taken out; errors.Is and As still see the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// CallTool calls a tool of the upstream on cred's session. p is not
// changed. idempotent allows sending the call again on a new session
// when the old one was lost while the call was in flight. r may be nil.
func (u *Upstream) CallTool(ctx context.Context, cred Credential, p *mcp.CallToolParams, idempotent bool, r *Relay) (*mcp.CallToolResult, error) {
	if p == nil {
		return nil, fmt.Errorf("federation: upstream %q: tools/call: no params", u.name)
	}
	c := u.newCall(r)
	defer c.returned.Store(true)
	q := *p
	q.Meta = u.prepareMeta(p.Meta, c)
	defer u.release(c)
	var res *mcp.CallToolResult
	err := u.doOn(ctx, u.slotOf(cred, "", u.bareFor(r)), "tools/call", idempotent, c, func(ctx context.Context, cs *mcp.ClientSession) error {
		r := q // each attempt starts without the last one's input responses
		return u.rounds(ctx, c, &r.InputResponses, &r.RequestState, func() (mcp.InputRequestMap, string, error) {
			var err error
			if res, err = cs.CallTool(ctx, &r); err != nil || res == nil || !res.NeedsInput() {
				return nil, "", err
			}
			return res.InputRequests, res.RequestState, nil
		})
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("federation: upstream %q: tools/call: no result", u.name)
	}
	// What the caller gets is the result's content, not the upstream hop's
	// protocol: its reserved _meta (the upstream's serverInfo is not the
	// gateway's) and its resultType (2026-07-28's, which an older caller
	// must not be sent; go-sdk sets the caller's own).
	res = &mcp.CallToolResult{Meta: withoutHopMeta(res.Meta), Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError}
	if c.token != "" || c.relay.Log != nil && u.logs.Load() {
		// go-sdk queues a notification for its handler goroutine when it
		// reads it, before the result that followed it on the wire, but
		// the handler may run after the result is returned. A caller's
		// session drops progress, and a stateless caller's POST stream
		// the logs, that come after the result, so give the queue a
		// moment: only calls that asked for progress wait, and those that
		// relay logs from an upstream that has sent any.
		time.Sleep(progressSettle)
	}
	return res, nil
}

// progressSettle is how long a call that asked for progress, or relays
// logs, waits after its result for the notifications read before it to
// be relayed.
const progressSettle = 10 * time.Millisecond

// rounds sends a request until its result is complete: a 2026-07-28
// result may instead ask for input (sampling, elicitation, roots), which
// c's relay answers (fulfil) and send carries in the next round, through
// responses and state, the request's own fields. send returns what the
// result asks for, nil once it is complete (or failed).
func (u *Upstream) rounds(ctx context.Context, c *call, responses *mcp.InputResponseMap, state *string, send func() (mcp.InputRequestMap, string, error)) error {
	for round := 1; ; round++ {
		asked, next, err := send()
		if err != nil || asked == nil {
			return err
		}
		if *responses, err = u.fulfil(ctx, c, round, asked); err != nil {
			return err
		}
		*state = next
	}
}

// ReadResource reads a resource on cred's session. Like every request
// sent on (CallTool, GetPrompt, Complete), it goes without the caller's
// hop _meta (withoutHopMeta): a 2026-07-28 caller's protocolVersion would
// have an upstream that negotiated an older version refuse it (-32022).
func (u *Upstream) ReadResource(ctx context.Context, cred Credential, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	c := u.newCall(nil)
	defer c.returned.Store(true)
	err := u.do(ctx, cred, "resources/read", true, c, func(ctx context.Context, cs *mcp.ClientSession) error {
		r := *p
		r.Meta = withoutHopMeta(p.Meta)
		return u.rounds(ctx, c, &r.InputResponses, &r.RequestState, func() (mcp.InputRequestMap, string, error) {
			var err error
			if res, err = cs.ReadResource(ctx, &r); err != nil || res == nil || !res.NeedsInput() {
				return nil, "", err
			}
			return res.InputRequests, res.RequestState, nil
		})
	})
	if err == nil && res == nil {
		err = fmt.Errorf("federation: upstream %q: resources/read: no result", u.name)
	}
	return res, err
}

// GetPrompt gets a prompt on cred's session.
func (u *Upstream) GetPrompt(ctx context.Context, cred Credential, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	c := u.newCall(nil)
	defer c.returned.Store(true)
	err := u.do(ctx, cred, "prompts/get", true, c, func(ctx context.Context, cs *mcp.ClientSession) error {
		r := *p
		r.Meta = withoutHopMeta(p.Meta)
		return u.rounds(ctx, c, &r.InputResponses, &r.RequestState, func() (mcp.InputRequestMap, string, error) {
			var err error
			if res, err = cs.GetPrompt(ctx, &r); err != nil || res == nil || !res.NeedsInput() {
				return nil, "", err
			}
			return res.InputRequests, res.RequestState, nil
		})
	})
	if err == nil && res == nil {
		err = fmt.Errorf("federation: upstream %q: prompts/get: no result", u.name)
	}
	return res, err
}

// Complete asks for argument completions on cred's session.
func (u *Upstream) Complete(ctx context.Context, cred Credential, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	var res *mcp.CompleteResult
	err := u.do(ctx, cred, "completion/complete", true, nil, func(ctx context.Context, cs *mcp.ClientSession) error {
		r := *p
		r.Meta = withoutHopMeta(p.Meta)
		var err error
		res, err = cs.Complete(ctx, &r)
		return err
	})
	if err == nil && res == nil {
		err = fmt.Errorf("federation: upstream %q: completion/complete: no result", u.name)
	}
	return res, err
}

// relayFor finds the call whose Relay should answer a request the
// upstream sent on cs, which names no call: the most recent call in flight
// on cs that can answer it. rctx ends when either the call or the
// upstream's request ends; call done when finished.
func (u *Upstream) relayFor(ctx context.Context, cs *mcp.ClientSession, can func(*Relay) bool) (c *call, rctx context.Context, done func()) {
	// A request names no call either: it goes to the session's one call in
	// flight, never a guess among several (another caller's could be
	// asked). A call that ended cannot be asked anything.
	for _, x := range u.inFlight(cs) {
		if x.ended.Load() {
			continue
		}
		if c != nil {
			return nil, nil, nil // two in flight
		}
		c = x
	}
	if c == nil || !can(c.relay) {
		return nil, nil, nil
	}
	rctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return c, rctx, func() { stop(); cancel() }
}

// maxInputRounds bounds the multi-round-trip exchanges of one call, as
// go-sdk's own loop does.
const maxInputRounds = 10

// fulfil answers the input requests of a 2026-07-28 input-required result
// (SEP-2322) with c's Relay: they belong to exactly this call.
func (u *Upstream) fulfil(ctx context.Context, c *call, round int, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if round >= maxInputRounds {
		return nil, hostile("the upstream asked for input %d times", round)
	}
	if len(reqs) == 0 {
		return nil, hostile("the upstream is busy (input required, nothing asked)")
	}
	out := make(mcp.InputResponseMap, len(reqs))
	for id, ir := range reqs {
		var (
			resp   mcp.InputResponse
			err    error
			method string
		)
		switch p := ir.(type) {
		case *mcp.ElicitParams:
			method = "elicitation/create"
			if c.relay.Elicit != nil && u.can(func(k *mcp.ClientCapabilities) bool { return k.Elicitation != nil }) {
				resp, err = c.relay.Elicit(ctx, p)
			}
		case *mcp.CreateMessageParams:
			method = "sampling/createMessage"
			if c.relay.CreateMessage != nil && u.can(func(k *mcp.ClientCapabilities) bool { return k.Sampling != nil }) {
				resp, err = c.relay.CreateMessage(ctx, p)
			}
		case *mcp.CreateMessageWithToolsParams:
			// go-sdk decodes every sampling input request as this type.
			method = "sampling/createMessage"
			if c.relay.CreateMessage != nil && u.can(func(k *mcp.ClientCapabilities) bool { return k.Sampling != nil }) {
				var base *mcp.CreateMessageParams
				if base, err = samplingBase(p); err == nil {
					resp, err = c.relay.CreateMessage(ctx, base)
				}
			}
		case *mcp.ListRootsParams:
			method = "roots/list"
			if c.relay.ListRoots != nil && u.can(func(k *mcp.ClientCapabilities) bool { return k.RootsV2 != nil }) {
				resp, err = c.relay.ListRoots(ctx, p)
			}
		default:
			return nil, hostile("input request %q: %T cannot be relayed", id, ir)
		}
		if err != nil {
			return nil, fmt.Errorf("input request %q (%s): %w", id, method, err)
		}
		if resp == nil || isNilResponse(resp) {
			return nil, hostile("input request %q (%s): no call in flight can answer it", id, method)
		}
		out[id] = resp
	}
	return out, nil
}

// samplingBase is p as the sampling request of 2025-06-18, which is what
// a Relay answers: tools and multi-block messages are refused.
func samplingBase(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	if len(p.Tools) > 0 || p.ToolChoice != nil {
		return nil, hostile("sampling with tools cannot be relayed")
	}
	msgs := make([]*mcp.SamplingMessage, 0, len(p.Messages))
	for i, m := range p.Messages {
		if m == nil || len(m.Content) != 1 {
			return nil, hostile("sampling message %d: one content block is needed", i)
		}
		msgs = append(msgs, &mcp.SamplingMessage{Content: m.Content[0], Role: m.Role})
	}
	return &mcp.CreateMessageParams{
		Meta:             p.Meta,
		IncludeContext:   p.IncludeContext,
		MaxTokens:        p.MaxTokens,
		Messages:         msgs,
		Metadata:         p.Metadata,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     p.SystemPrompt,
		Temperature:      p.Temperature,
	}, nil
}

func isNilResponse(r mcp.InputResponse) bool {
	switch r := r.(type) {
	case *mcp.ElicitResult:
		return r == nil
	case *mcp.CreateMessageResult:
		return r == nil
	case *mcp.ListRootsResult:
		return r == nil
	}
	return false
}

func (u *Upstream) can(has func(*mcp.ClientCapabilities) bool) bool {
	return u.opts.Capabilities != nil && has(u.opts.Capabilities)
}

func (u *Upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	u.mu.Lock()
	c := u.progress[tok]
	u.mu.Unlock()
	if c == nil || c.relay.Progress == nil {
		return // a call that ended, or a token that is not ours
	}
	q := *p
	q.Meta = maps.Clone(p.Meta)
	q.ProgressToken = c.callerToken
	c.relay.Progress(c.ctx, &q)
}

func (u *Upstream) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	if req.Params == nil {
		return
	}
	u.logs.Store(true)
	if c := soleCall(u.inFlight(req.Session)); c != nil && c.relay.Log != nil {
		c.relay.Log(c.ctx, req.Params)
		return
	}
	u.log.Debug("upstream log message not relayed: no single call on its session to relay it to", "level", req.Params.Level, "logger", req.Params.Logger)
}

// soleCall is the call a log message on a session belongs to. A log names
// no call, so it is relayed only where one call can have sent it, never a
// guess that could tell another caller: the one call in flight, when no
// other has ended without having returned yet (go-sdk hands notifications
// over after the result that followed them, and a call waits for them
// before it returns); or, with none in flight, the one that has ended.
func soleCall(calls []*call) *call {
	var open, settling []*call
	for _, c := range calls {
		switch {
		case !c.ended.Load():
			open = append(open, c)
		case !c.returned.Load():
			settling = append(settling, c)
		}
	}
	switch {
	case len(open) == 1 && len(settling) == 0:
		return open[0]
	case len(open) == 0 && len(settling) == 1:
		return settling[0]
	case len(open) == 0 && len(settling) == 0 && len(calls) == 1:
		return calls[0]
	}
	return nil
}

func (u *Upstream) onCreateMessage(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	c, rctx, done := u.relayFor(ctx, req.Session, func(r *Relay) bool { return r.CreateMessage != nil })
	if c == nil {
		return nil, noRelay("sampling/createMessage")
	}
	defer done()
	return c.relay.CreateMessage(rctx, req.Params)
}

func (u *Upstream) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	c, rctx, done := u.relayFor(ctx, req.Session, func(r *Relay) bool { return r.Elicit != nil })
	if c == nil {
		return nil, noRelay("elicitation/create")
	}
	defer done()
	return c.relay.Elicit(rctx, req.Params)
}
