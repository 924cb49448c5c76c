package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// notifications/cancelled for a stateless gateway.
//
// In stateful mode go-sdk (v1.8.0) cancels a handler's context when the
// session's client sends notifications/cancelled naming the call's request
// id. In stateless mode every POST is a session of its own, so a
// cancellation, which always comes in a POST of its own, reaches a session
// that has no such call, and nothing happens. The front door fills the gap:
//
//   - Every tools/call request of a stateless POST — served by the fast path
//     (REST and playbook tools) or by go-sdk (calls with a progressToken,
//     a fast path turned off) — is registered while its POST is served,
//     under its caller (package caller: the verified subject, else the
//     POST's Authorization header; held only while the POST is served) and
//     its request id as go-sdk reads it. The call runs under a context the registry can
//     cancel; it is the context the front door keeps for the POST (see
//     callContexts), so the tool handler's joined context ends with it.
//   - A POST carrying notifications/cancelled goes to go-sdk, which answers
//     it (202 Accepted, empty body: the spec's answer to a notification);
//     when it has answered 202, every call of the same caller registered
//     under params.requestId is cancelled, with cause errCancelNotified.
//     Another caller's cancellation matches nothing: it gets the same 202
//     and learns nothing.
//   - A playbook run left this way is cancelled upstream at once (the cause
//     wraps playbook.ErrCallCancelled), not after the linger a client that
//     merely hung up gets: this client said it wants the run stopped.
//
// Request ids are compared as go-sdk compares them (jsonrpc2.MakeID): a
// string as itself, a number as int64(v), so 1 and 1.0 name one call and "1"
// another.
//
// Two calls of one caller in flight under one id (two clients sharing a
// token, each counting from 1) are both cancelled: a stateless POST carries
// nothing else that tells them apart, and leaving a run going for minutes is
// the worse mistake. The registry holds only calls in flight, at most
// maxInflight; past that a call is served but cannot be cancelled this way.

// maxInflight bounds the registry. Each entry is a call whose POST is still
// open, which costs the gateway a connection and a goroutine already: the
// bound is a backstop, far above what the upstreams' max_concurrent slots
// let through at once, not the place where load is shed.
const maxInflight = 1 << 16

// errCancelNotified is the cause of a call's context cancelled by the
// client's notifications/cancelled.
var errCancelNotified = fmt.Errorf("gateway: the client sent notifications/cancelled for the call: %w", playbook.ErrCallCancelled)

// inflight is the registry of the tools/call requests of the POSTs being
// served (and, for a while, of the playbook calls whose clients went away:
// see left). Safe for concurrent use.
type inflight struct {
	mu    sync.Mutex
	calls map[inflightKey][]*inflightCall
	n     int

	// left holds, oldest first, the playbook calls whose client went away
	// within leftFor, and leftBy indexes them: a client that drops its
	// connection and then sends notifications/cancelled (go-sdk's client
	// does both when a call's context ends) still reaches the run its call
	// left to the runner's linger, which is then cut short
	// (playbook.Request.Cancelled). At most maxInflight. They are keyed by
	// the caller's digest: the caller itself (an Authorization header,
	// when unverified) is held only while its POST is served.
	left   []*inflightCall
	leftBy map[leftKey][]*inflightCall

	// digests keys the callers' digests: the gateway's key (shareInflight;
	// newInflight's default, the process key, serves a registry alone).
	digests *caller.Key

	// publish, with shared state, tells the other replicas of a
	// cancellation that matched no call here (see shared.go); nil: alone.
	publish func(caller [sha256.Size]byte, id string)
}

// inflightKey names a call: who sent it and its request id (see sdkwire.IDKey).
type inflightKey struct {
	caller caller.Caller // who sent the POST
	id     string
}

// leftKey names a call in inflight.left: its caller's digest and its id.
type leftKey struct {
	who [sha256.Size]byte
	id  string
}

type inflightCall struct {
	key    inflightKey // until it is left
	left   leftKey     // once it is left
	cancel context.CancelCauseFunc
	// notified is closed by the client's notifications/cancelled naming
	// the call, even after its POST ended (see inflight.left).
	notified chan struct{}
	once     sync.Once
	watched  atomic.Bool // a playbook call reads notified (cancelledOf)
	leftAt   time.Time   // when it joined inflight.left
}

// notify is the client's cancellation of the call.
func (c *inflightCall) notify() {
	c.once.Do(func() { close(c.notified) })
	c.cancel(errCancelNotified)
}

// leftFor is how long a playbook call whose client went away can still be
// cancelled: longer than the runner's linger (playbook.DefaultLinger), after
// which the run is cancelled anyway.
const leftFor = playbook.DefaultLinger + 3*time.Second

func newInflight() *inflight {
	return &inflight{calls: map[inflightKey][]*inflightCall{}, leftBy: map[leftKey][]*inflightCall{}, digests: caller.ProcessKey()}
}

// notifiedKey is the context key of a call's inflightCall.
type notifiedKey struct{}

// cancelledOf returns the channel the client's notifications/cancelled
// closes for the call ctx serves (playbook.Request.Cancelled), or nil when
// the call is not registered (stdio; past maxInflight).
func cancelledOf(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(notifiedKey{}).(*inflightCall)
	if c == nil {
		return nil
	}
	c.watched.Store(true)
	return c.notified
}

// rpcPeek is what the registry reads of a POSTed message, decoded as go-sdk
// decodes it (sdkwire.Parse): ids are strings or float64s.
type rpcPeek struct {
	ID     any    `json:"id"`
	Method string `json:"method"`
	Params struct {
		RequestID any `json:"requestId"` // notifications/cancelled
	} `json:"params"`
}

// peek reads method, id and (for notifications/cancelled) requestId from m;
// the zero rpcPeek when m does not decode (go-sdk answers that itself).
func (m *message) peek() rpcPeek {
	var p rpcPeek
	if !m.ok || m.badMethod {
		return p
	}
	p.Method = m.method
	if len(m.ID) > 0 {
		if n, ok := sdkwire.ExactID(m.ID); ok {
			p.ID = float64(n) // what sdkwire.Parse makes of an integer id, exact within ±2^53
		} else if !sdkwire.Parse(m.ID, &p.ID) {
			return rpcPeek{}
		}
	}
	if p.Method == "notifications/cancelled" && len(m.Params) > 0 && !sdkwire.Parse(m.Params, &p.Params) {
		return rpcPeek{}
	}
	return p
}

// track registers the call in a stateless POST's body, if it holds a
// tools/call request, under a context derived from ctx. It returns the
// context to serve the POST with (ctx itself when nothing was registered)
// and the function that removes the entry when the POST has been served.
func (in *inflight) track(ctx context.Context, r *http.Request, m rpcPeek) (context.Context, func()) {
	if m.Method != "tools/call" {
		return ctx, func() {}
	}
	id, ok := sdkwire.IDKey(m.ID)
	if !ok {
		return ctx, func() {}
	}
	return in.trackKey(ctx, inflightKey{caller: caller.FromRequest(r), id: sessionScoped(r, id)})
}

// sessionScoped is a request id as the registry keys it: within the POST's
// session, when it names one (stateful mode: two sessions of one caller
// each count their ids from 1).
func sessionScoped(r *http.Request, id string) string {
	if sid := r.Header.Get(sessionIDHeader); sid != "" {
		return sid + "\x00" + id
	}
	return id
}

// trackKey registers a call under key; see track.
func (in *inflight) trackKey(ctx context.Context, key inflightKey) (context.Context, func()) {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	c := &inflightCall{key: key, cancel: cancel, notified: make(chan struct{})}
	in.mu.Lock()
	if in.n >= maxInflight {
		in.mu.Unlock()
		return ctx, func() { cancel(nil) }
	}
	in.calls[key] = append(in.calls[key], c)
	in.n++
	in.mu.Unlock()
	return context.WithValue(ctx, notifiedKey{}, c), func() {
		in.remove(key, c)
		if c.watched.Load() && parent.Err() != nil {
			in.leave(c) // the client went away: it may still cancel the run
		}
		cancel(nil)
	}
}

// leave keeps c in left for leftFor, dropping what has been there longer.
func (in *inflight) leave(c *inflightCall) {
	now := time.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.left) > 0 && (now.Sub(in.left[0].leftAt) > leftFor || len(in.left) >= maxInflight) {
		old := in.left[0]
		in.left[0] = nil
		in.left = in.left[1:]
		list := slices.DeleteFunc(in.leftBy[old.left], func(x *inflightCall) bool { return x == old })
		if len(list) == 0 {
			delete(in.leftBy, old.left)
		} else {
			in.leftBy[old.left] = list
		}
	}
	c.leftAt = now
	c.left = leftKey{who: in.digests.Digest(c.key.caller), id: c.key.id}
	c.key = inflightKey{}
	in.left = append(in.left, c)
	in.leftBy[c.left] = append(in.leftBy[c.left], c)
}

func (in *inflight) remove(key inflightKey, c *inflightCall) {
	in.mu.Lock()
	defer in.mu.Unlock()
	list := in.calls[key]
	for i, x := range list {
		if x == c {
			list = append(list[:i], list[i+1:]...)
			in.n--
			break
		}
	}
	if len(list) == 0 {
		delete(in.calls, key)
	} else {
		in.calls[key] = list
	}
}

// cancel cancels the calls of r's caller registered under requestID, and
// reports how many there were.
func (in *inflight) cancel(r *http.Request, requestID any) int {
	id, ok := sdkwire.IDKey(requestID)
	if !ok {
		return 0
	}
	return in.cancelKey(inflightKey{caller: caller.FromRequest(r), id: sessionScoped(r, id)})
}

// cancelKey cancels the calls registered under key, and those its client
// left within leftFor; see cancel.
func (in *inflight) cancelKey(key inflightKey) int {
	lk := leftKey{who: in.digests.Digest(key.caller), id: key.id}
	in.mu.Lock()
	list := append(append([]*inflightCall(nil), in.calls[key]...), in.leftBy[lk]...)
	in.mu.Unlock()
	for _, c := range list {
		c.notify()
	}
	if len(list) == 0 && in.publish != nil && len(key.id) <= maxSharedRequestID {
		// Not here: the call may be on another replica. Only a caller's
		// digest and the request id leave the process, and only an id of
		// a usual length (see maxSharedRequestID).
		go in.publish(lk.who, key.id)
	}
	return len(list)
}

// cancelDigest cancels the calls registered under id whose caller's digest
// is who: a cancellation another replica received (see inflight.publish).
// Only the entries with that id are hashed.
func (in *inflight) cancelDigest(who [sha256.Size]byte, id string) int {
	var list []*inflightCall
	in.mu.Lock()
	for key, calls := range in.calls {
		if key.id == id && in.digests.Digest(key.caller) == who {
			list = append(list, calls...)
		}
	}
	list = append(list, in.leftBy[leftKey{who: who, id: id}]...)
	in.mu.Unlock()
	for _, c := range list {
		c.notify()
	}
	return len(list)
}

// size is the number of calls registered.
func (in *inflight) size() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n
}

// onCancelled returns w, or, when m is notifications/cancelled, a writer
// that cancels the named call once go-sdk has accepted the notification
// (202): a notification go-sdk refuses (a bad header, a protocol version it
// does not speak) cancels nothing, as it would not in stateful mode.
func (in *inflight) onCancelled(w http.ResponseWriter, r *http.Request, m rpcPeek) (http.ResponseWriter, func()) {
	if m.Method != "notifications/cancelled" || m.ID != nil {
		return w, func() {}
	}
	sw := &sessionWriter{ResponseWriter: w, onHeader: func(status int, _ http.Header) {
		if status == http.StatusAccepted {
			in.cancel(r, m.Params.RequestID)
		}
	}}
	return sw, sw.finish
}

// postEndCause is the cause a tool handler's context gets when the POST's
// context (post) ends: the client's cancellation when it was one, else
// errClientGone.
func postEndCause(post context.Context) error {
	if c := context.Cause(post); errors.Is(c, playbook.ErrCallCancelled) {
		return c
	}
	return errClientGone
}
