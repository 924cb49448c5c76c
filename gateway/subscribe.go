package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// Resource subscriptions: resources/subscribe and resources/unsubscribe
// of a federated resource go to its upstream, and the upstream's
// notifications/resources/updated come back to the callers subscribed.
//
//   - Offered (resources.subscribe) only by a stateful gateway, whose
//     callers have a session to be notified on, and only when an MCP
//     upstream offered subscriptions in the listing the gateway started
//     with: an upstream unreachable at start-up has none of its resources
//     served until a restart (they are read once), so it has nothing to
//     subscribe to. A stateless gateway, or one with no such upstream,
//     answers both methods -32601 with a message that says why
//     (refuseSubscriptions).
//   - A URI goes to the upstream that serves it, as resources/read does:
//     a resource's URI or one a template matches, read back to the
//     upstream's URI (upstreamURI). A URI no upstream serves, an upstream
//     that does not offer subscriptions, or one that fails, is a JSON-RPC
//     error naming the upstream, never a silent success.
//   - The upstream session of the caller's credential (its auth.mode: in
//     forward mode, the caller's own token) is subscribed once per URI
//     while at least one caller session holds a subscription on it, and
//     unsubscribed when the last one unsubscribes or its session ends:
//     go-sdk forgets a closed session's subscriptions without calling the
//     UnsubscribeHandler, so the gateway waits for each subscribing
//     session's end (ServerSession.Wait) and lets go of what it held.
//   - An update is sent, under the gateway's URI, to the caller sessions
//     whose subscription was made on the upstream session it came on: in
//     forward mode, one URI may name another resource for each caller, and
//     one caller's update must not reach another. go-sdk's
//     Server.ResourceUpdated sends it to every session subscribed to the
//     URI; a sending middleware (only) lets it through to those sessions.
//   - A re-initialized upstream session (a restart, a stdio child's
//     restart) is subscribed again by upstream/federation.
type subscriptions struct {
	// routes guards resources and templates: set while New builds the
	// gateway, changed when an upstream's resources change (relist).
	routes    sync.RWMutex
	resources map[string]*resourceOwner // a served resource URI: its upstream
	templates []templateOwner           // the served templates, as go-sdk tries them

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*callerSubs // the sessions watched: each one that subscribed, until it ends
	owner    map[*federation.Subscription]*mcp.ServerSession

	deliverMu sync.Mutex               // one update at a time through go-sdk
	current   atomic.Pointer[delivery] // the update being sent; nil: none
}

// resourceOwner is the upstream that serves a federated resource.
type resourceOwner struct {
	up        *federation.Upstream
	u         *config.Upstream
	subscribe bool // it offers resources/subscribe
}

type templateOwner struct {
	template string // as served
	match    func(string) bool
	*resourceOwner
}

// callerSubs is what one caller session holds, by the gateway's URI.
type callerSubs struct {
	held map[string]*federation.Subscription
}

// delivery is an update go-sdk is sending: its URI, and the sessions that
// may have it.
type delivery struct {
	uri string
	to  map[*mcp.ServerSession]bool
}

func newSubscriptions() *subscriptions {
	return &subscriptions{
		resources: map[string]*resourceOwner{},
		sessions:  map[*mcp.ServerSession]*callerSubs{},
		owner:     map[*federation.Subscription]*mcp.ServerSession{},
	}
}

// addResource records that o serves the resource uri (as served).
func (b *subscriptions) addResource(uri string, o *resourceOwner) {
	b.routes.Lock()
	defer b.routes.Unlock()
	b.resources[uri] = o
}

// addTemplate records that o serves the template (as served).
func (b *subscriptions) addTemplate(template string, o *resourceOwner) {
	b.routes.Lock()
	defer b.routes.Unlock()
	b.addTemplateLocked(template, o)
}

func (b *subscriptions) addTemplateLocked(template string, o *resourceOwner) {
	t, err := uritemplate.New(template)
	if err != nil {
		return // not served either (extrasOf)
	}
	re := t.Regexp()
	b.templates = slices.DeleteFunc(b.templates, func(t templateOwner) bool { return t.template == template })
	b.templates = append(b.templates, templateOwner{template, re.MatchString, o})
	// go-sdk tries templates in the order of their URI templates.
	slices.SortStableFunc(b.templates, func(a, b templateOwner) int { return strings.Compare(a.template, b.template) })
}

// change routes resources and templates to o (an upstream's, as it is
// listed now) and no longer routes gone and goneTemplates (relist). A
// subscription already made stays with the upstream session it was made
// on until it is unsubscribed or its session ends.
func (b *subscriptions) change(o *resourceOwner, resources, gone, templates, goneTemplates []string) {
	b.routes.Lock()
	defer b.routes.Unlock()
	for _, uri := range gone {
		delete(b.resources, uri)
	}
	b.templates = slices.DeleteFunc(b.templates, func(t templateOwner) bool { return slices.Contains(goneTemplates, t.template) })
	for _, uri := range resources {
		b.resources[uri] = o
	}
	for _, t := range templates {
		b.addTemplateLocked(t, o)
	}
}

// subscribable reports whether an upstream the gateway started with
// offers resources/subscribe: the resources.subscribe capability depends
// on it, and the server's options are set before its resources are added.
func (g *Gateway) subscribable() bool {
	for _, s := range g.catalog.MCP {
		if s.Listing.Subscribe && (len(s.Listing.Resources) > 0 || len(s.Listing.Templates) > 0) {
			return true
		}
	}
	return false
}

// route finds the upstream that serves uri, as go-sdk's resources/read
// does: a resource first, then the first template that matches.
func (b *subscriptions) route(method, uri string) (*resourceOwner, error) {
	b.routes.RLock()
	defer b.routes.RUnlock()
	if o := b.resources[uri]; o != nil {
		return o, nil
	}
	for _, t := range b.templates {
		if t.match(uri) {
			return t.resourceOwner, nil
		}
	}
	return nil, &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Message: fmt.Sprintf("%s: no upstream serves the resource %q", method, uri)}
}

// subscribe is the server's SubscribeHandler.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	const method = "resources/subscribe"
	b, ss, uri := g.subs, req.Session, req.Params.URI
	o, err := b.route(method, uri)
	if err != nil {
		return err
	}
	if !o.subscribe {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: upstream %s, which serves %q, does not offer resource subscriptions", method, o.u.Name, uri)}
	}
	if ss == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: method + ": no session to send updates on"}
	}
	c := b.watch(ss)
	if b.holds(ss, c, uri) {
		return nil // subscribed already: go-sdk keeps one subscription per session and URI
	}
	cred, err := g.federatedCredential(ctx, o.u, req.Extra)
	if err != nil {
		return err
	}
	sub, err := o.up.Subscribe(ctx, cred, upstreamURI(o.u, uri))
	if err != nil {
		err = upstreamRPCError(err)
		g.logger.Warn("federation: subscribing to an upstream resource failed", "upstream", o.u.Name, "error", err)
		return err
	}
	if !b.hold(ss, c, uri, sub) {
		// The session ended meanwhile, or subscribed to uri on another
		// request at the same time: let go of this share.
		if err := sub.Unsubscribe(context.WithoutCancel(ctx)); err != nil {
			g.logger.Debug("federation: unsubscribing from an upstream resource failed", "upstream", o.u.Name, "error", err)
		}
		if b.holds(ss, c, uri) {
			return nil
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: method + ": the session ended"}
	}
	return nil
}

// unsubscribe is the server's UnsubscribeHandler. A URI the session did
// not subscribe to is a success (go-sdk's own rule); one no upstream
// serves is not.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	const method = "resources/unsubscribe"
	b, uri := g.subs, req.Params.URI
	o, err := b.route(method, uri)
	if err != nil {
		return err
	}
	sub := b.release(req.Session, uri)
	if sub == nil {
		return nil
	}
	if err := sub.Unsubscribe(ctx); err != nil {
		err = upstreamRPCError(err)
		g.logger.Warn("federation: unsubscribing from an upstream resource failed", "upstream", o.u.Name, "error", err)
		return err
	}
	return nil
}

// upstreamRPCError is the JSON-RPC error a caller gets for an upstream's
// failure to (un)subscribe: its message names the upstream and the method
// (federation's error text), and the upstream's own JSON-RPC error, if
// that is what it was, keeps its code and data.
func upstreamRPCError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "federation: ")
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return &jsonrpc.Error{Code: je.Code, Message: msg, Data: je.Data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// watch returns what ss holds, and on its first subscription starts
// waiting for its end, to let go of what it holds then: go-sdk does not
// call the UnsubscribeHandler for a session that ends.
func (b *subscriptions) watch(ss *mcp.ServerSession) *callerSubs {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.sessions[ss]; c != nil {
		return c
	}
	c := &callerSubs{held: map[string]*federation.Subscription{}}
	b.sessions[ss] = c
	go func() {
		_ = ss.Wait()
		b.ended(ss, c)
	}()
	return c
}

// holds reports whether ss, still watched as c, holds uri.
func (b *subscriptions) holds(ss *mcp.ServerSession, c *callerSubs, uri string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[ss] == c && c.held[uri] != nil
}

// hold records that ss holds uri by sub; false when ss ended (it is not
// watched as c any more) or holds uri already.
func (b *subscriptions) hold(ss *mcp.ServerSession, c *callerSubs, uri string, sub *federation.Subscription) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions[ss] != c || c.held[uri] != nil {
		return false
	}
	c.held[uri] = sub
	b.owner[sub] = ss
	return true
}

// release forgets that ss holds uri, and returns its share; nil: it did
// not hold it.
func (b *subscriptions) release(ss *mcp.ServerSession, uri string) *federation.Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.sessions[ss]
	if c == nil {
		return nil
	}
	sub := c.held[uri]
	if sub != nil {
		delete(c.held, uri)
		delete(b.owner, sub)
	}
	return sub
}

// ended lets go of everything ss held, when it ended.
func (b *subscriptions) ended(ss *mcp.ServerSession, c *callerSubs) {
	b.mu.Lock()
	if b.sessions[ss] == c {
		delete(b.sessions, ss)
	}
	subs := make([]*federation.Subscription, 0, len(c.held))
	for uri, sub := range c.held {
		subs = append(subs, sub)
		delete(c.held, uri)
		delete(b.owner, sub)
	}
	b.mu.Unlock()
	for _, sub := range subs {
		// Each is bounded by the upstream's timeout. A failure leaves
		// nothing to undo: the share is released, and the upstream
		// session is unsubscribed or gone.
		_ = sub.Unsubscribe(context.Background())
	}
}

// resourceUpdated is federation.Options.OnResourceUpdated for upstream u:
// the update goes, under the gateway's URI, to the sessions that hold
// the subscriptions it came for.
func (g *Gateway) resourceUpdated(u *config.Upstream) func(context.Context, *mcp.ResourceUpdatedNotificationParams, []*federation.Subscription) {
	return func(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams, to []*federation.Subscription) {
		b := g.subs
		uri := federatedURI(u, p.URI)
		d := &delivery{uri: uri, to: map[*mcp.ServerSession]bool{}}
		b.mu.Lock()
		for _, sub := range to {
			if ss := b.owner[sub]; ss != nil {
				d.to[ss] = true
			}
		}
		b.mu.Unlock()
		if len(d.to) == 0 {
			return
		}
		b.deliverMu.Lock()
		defer b.deliverMu.Unlock()
		b.current.Store(d)
		defer b.current.Store(nil)
		_ = g.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{Meta: p.Meta, URI: uri})
	}
}

// only is a sending middleware: it lets a notifications/resources/updated
// through only to the sessions of the update being sent (see
// resourceUpdated). go-sdk sends it to every session subscribed to the
// URI, whichever upstream session their subscription was made on.
func (b *subscriptions) only(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "notifications/resources/updated" {
			return next(ctx, method, req)
		}
		d := b.current.Load()
		p, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if d == nil || p == nil || p.URI != d.uri || !d.to[ss] {
			return nil, nil
		}
		return next(ctx, method, req)
	}
}

// refuseSubscriptions is a receiving middleware that answers
// resources/subscribe and resources/unsubscribe, when the gateway does
// not serve them, with -32601 and why.
func refuseSubscriptions(why string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/subscribe" || method == "resources/unsubscribe" {
				return nil, &methodNotServed{method + ": " + why}
			}
			return next(ctx, method, req)
		}
	}
}

// methodNotServed is a -32601 answer with a message of its own. go-sdk
// (v1.8.0, jsonrpc2's processResult) replaces the message of any error
// that is errors.Is -32601 with `method not found: "<method>"`, which
// would drop the why; this error is not, but it reads as a -32601
// *jsonrpc.Error through errors.As, which is how go-sdk finds the code.
type methodNotServed struct{ msg string }

func (e *methodNotServed) Error() string { return e.msg }

func (e *methodNotServed) As(target any) bool {
	if t, ok := target.(**jsonrpc.Error); ok {
		*t = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: e.msg}
		return true
	}
	return false
}
