package gateway

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/internal/sdkwire"
	"github.com/mcpgate/mcpgate/upstream"
)

// The gateway's side of authorization; the logic is in package auth.
//
// Seams, for whoever changes the front door:
//   - Inbound: with cfg.Auth, /mcp is wrapped in auth.Verifier.Middleware,
//     so every request (POST, GET, DELETE) is verified before the front door
//     sees it, and the verified auth.TokenInfo reaches go-sdk (and each
//     tool handler's req.Extra.TokenInfo).
//   - Step-up: frontDoor.authorize is called once per POSTed JSON-RPC
//     message, after the body is parsed and before anything is dispatched,
//     with the message's method and, for tools/call, params.name. A fast
//     path that answers tools/call itself must call it too.
//   - Listing: with `auth.list: callable`, tools/list shows a caller only
//     what authorizeCall would let it call: the fast path through its
//     views (fastPath.viewOf), go-sdk through a receiving middleware
//     (listFilter), both deciding with callableBy.
//   - Outbound: every tool call gets its upstream's credential from
//     Gateway.credentials; nothing else of the inbound request goes
//     upstream.

// setUpAuth builds the verifier (when cfg.Auth is set), each tool's step-up
// requirement and each upstream's credential source.
func (g *Gateway) setUpAuth(ctx context.Context) error {
	tokenURL := ""
	if a := g.cfg.Auth; a != nil {
		v, err := auth.NewVerifier(ctx, a, &auth.VerifierOptions{Logger: g.logger})
		if err != nil {
			return err
		}
		g.verifier, tokenURL = v, v.TokenURL()
		require := make(map[string]auth.Requirement, len(g.catalog.Tools))
		for _, t := range g.catalog.Tools {
			require[t.Tool.Name] = a.Policy.Require(g.policyHints(t), t.OAuthScopes)
		}
		g.require.Store(&require)
		g.logger.Info("auth: verifying bearer tokens", "issuer", a.Issuer, "audience", a.Audience)
		if g.cfg.Metrics.On() && g.cfg.Metrics.Listen == "" {
			g.logger.Warn("auth: the metrics endpoint is not verified, and it is served beside /mcp; set metrics.listen to serve it on a listener of its own, or metrics.enabled: false",
				"path", g.cfg.Metrics.Path)
		}
	}
	g.outbound = make(map[string]*auth.Outbound, len(g.cfg.Upstreams))
	for i := range g.cfg.Upstreams {
		u := &g.cfg.Upstreams[i]
		o, err := auth.NewOutbound(ctx, &u.Auth, &auth.OutboundOptions{TokenURL: tokenURL})
		if err != nil {
			return err
		}
		g.outbound[u.Name] = o
	}
	return nil
}

// policyHints are the hints the gateway's own policy (read-only tokens,
// step-up) goes by: a tool's served hints, but for a federated tool whose
// hints come from its server, which the gateway believes only when the
// upstream has trust_hints or the reviewed lockfile holds the tool
// unchanged; otherwise the tool counts as destructive.
func (g *Gateway) policyHints(t *Tool) *mcp.ToolAnnotations {
	f := t.Federated
	if f == nil || f.TrustHints || g.opts.Lock != nil && !g.drift.Drifted(t.Tool.Name) {
		return t.Tool.Annotations
	}
	a := *t.Tool.Annotations
	p := t.Derived.Provenance
	if p.ReadOnly != "config" {
		a.ReadOnlyHint = false
	}
	if p.Destructive != "config" {
		a.DestructiveHint = new(true)
	}
	return &a
}

// warnUnverified says, once, what an HTTP gateway without an auth section
// lets anyone who reaches its listener do: have whatever bearer token they
// send forwarded to the forward-mode upstreams, and call the upstreams that
// get the gateway's own credential (static, client_credentials) with it. It
// is said by Handler, not New: over stdio there is no inbound token, and the
// client is the one process at the other end of the pipe.
func (g *Gateway) warnUnverified() {
	g.unverifiedOnce.Do(func() {
		if g.verifier != nil {
			return
		}
		var forward, lent []string
		for _, u := range g.cfg.Upstreams {
			switch u.Auth.Mode {
			case auth.ModeForward:
				forward = append(forward, u.Name)
			case auth.ModeStatic, auth.ModeClientCredentials, auth.ModeExchange:
				lent = append(lent, u.Name)
			}
		}
		if len(forward) > 0 {
			g.logger.Warn("auth: no auth section: bearer tokens are NOT verified, and whatever token a caller sends is forwarded to forward-mode upstreams",
				"upstreams", strings.Join(forward, ","))
		}
		if len(lent) > 0 {
			g.logger.Warn("auth: no auth section: callers are NOT verified, and anyone who reaches this listener calls these upstreams with the gateway's own credential",
				"upstreams", strings.Join(lent, ","))
		}
	})
}

// requirements are the step-up requirements of the tools served, by name
// (nil without auth): replaced whole when an upstream MCP server's tools
// are re-read (relist), never changed in place.
func (g *Gateway) requirements() map[string]auth.Requirement {
	if p := g.require.Load(); p != nil {
		return *p
	}
	return nil
}

// authorizeCall is the front door's step-up check (frontDoor.authorize).
// Only tools/call of a known tool is decided here; go-sdk answers an
// unknown tool itself.
//
// A retired gateway's session is checked against the gateway serving it
// (follow.go): one step, not that gateway's own successor, which its auth
// section may not match (canFollow).
func (g *Gateway) authorizeCall(r *http.Request, method, tool string) (status int, challenge string, ok bool) {
	return g.serving().authorizeOwn(r, method, tool)
}

// authorizeOwn is authorizeCall against g's own requirements.
func (g *Gateway) authorizeOwn(r *http.Request, method, tool string) (status int, challenge string, ok bool) {
	if method != "tools/call" {
		return 0, "", true
	}
	req, found := g.requirements()[tool]
	if !found {
		return 0, "", true
	}
	return g.verifier.Authorize(r, req)
}

// listCallable reports whether tools/list shows each caller only the tools
// it may call (auth.list: callable).
func (g *Gateway) listCallable() bool {
	return g.verifier != nil && g.cfg.Auth.List == auth.ListCallable
}

// listKey returns the function that names a caller's tools/list view: the
// policy-relevant scopes its verified token holds (auth.ScopeSet.Held).
func (g *Gateway) listKey() func(*mcpauth.TokenInfo) string {
	return auth.ScopesNamed(g.requirements()).Held
}

// mayList returns whether tools/list shows a caller holding the verified
// token ti a tool, by name, under auth.list: callable: the tools it may
// call (mayCall on the policy-relevant scopes it holds).
func (g *Gateway) mayList(ti *mcpauth.TokenInfo) func(tool string) bool {
	return g.mayCall(g.listKey()(ti))
}

// callableBy returns the tools of served that a caller holding exactly the
// policy-relevant scopes of key may call: the tools authorizeCall lets
// through for it. A tool without a requirement (none is unknown to
// g.require today) is listed, as authorizeCall lets its calls through.
func (g *Gateway) callableBy(key string, served []*Tool) []*Tool {
	may := g.mayCall(key)
	out := make([]*Tool, 0, len(served))
	for _, t := range served {
		if may(t.Tool.Name) {
			out = append(out, t)
		}
	}
	return out
}

// mayCall returns whether a caller holding exactly the policy-relevant
// scopes of key may call a tool, by name, as authorizeCall decides: a tool
// without a requirement is let through. The requirements are read once.
func (g *Gateway) mayCall(key string) func(tool string) bool {
	holder := auth.Holder(key)
	require := g.requirements()
	return func(tool string) bool {
		req, ok := require[tool]
		return !ok || req.Allows(holder)
	}
}

// addListFilter makes go-sdk's tools/list show each caller only what it
// may call, under auth.list: callable: go-sdk answers every tools/list the
// fast path does not (stateful sessions, protocol 2026-07-28, a cursor of
// its own), and in stateful mode req.Extra.TokenInfo is still the POST's
// own token, not the session's first.
//
// It filters go-sdk's page after go-sdk paginated the whole catalog, so a
// page may hold fewer tools than the page size (or none, with a
// nextCursor), where the fast path paginates the filtered list: the tools a
// caller sees across all pages are the same, and with at most
// mcp.DefaultPageSize (1000) tools, so are the pages.
//
// Over stdio (no HTTP request: Extra.Header is nil) nothing is verified and
// nothing is filtered, as authorizeCall decides nothing there.
func (g *Gateway) addListFilter() {
	if !g.listCallable() {
		return
	}
	g.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/list" || err != nil {
				return res, err
			}
			list, ok := res.(*mcp.ListToolsResult)
			extra := req.GetExtra()
			if !ok || extra == nil || extra.Header == nil {
				return res, err
			}
			s := g.serving() // a retired gateway's session: the current one's tools (follow.go)
			may := s.mayList(extra.TokenInfo)
			out := *list
			out.Tools = make([]*mcp.Tool, 0, len(list.Tools))
			for _, t := range list.Tools {
				if may(t.Name) {
					out.Tools = append(out.Tools, t)
				}
			}
			out.CacheScope = cacheScopeOf(true)
			return &out, nil
		}
	})
}

// cacheScopeOf is the cacheScope of a tools/list: "public" (go-sdk's
// default) for the one list every caller sees, "private" for a list made for
// the caller's scopes, which a shared cache must not hand to another caller.
func cacheScopeOf(perCaller bool) string {
	if perCaller {
		return "private"
	}
	return "public"
}

// credentials returns what the upstream of t is shown for this call, by its
// auth mode. Over HTTP the caller's token is the POST's own Authorization
// (verified by the middleware when the gateway verifies); over stdio it is
// Options.StaticToken (MCPGATE_UPSTREAM_TOKEN), the local user's own.
func (g *Gateway) credentials(ctx context.Context, t *Tool, req *mcp.CallToolRequest) (upstream.Credentials, error) {
	var caller auth.Caller
	if req.Extra != nil && req.Extra.Header != nil {
		if tok, ok := auth.BearerToken(req.Extra.Header); ok {
			caller = auth.Caller{Token: tok, Verified: g.verifier != nil && req.Extra.TokenInfo != nil}
		}
		if g.verifier != nil && !caller.Verified {
			caller = auth.Caller{} // never reached: the middleware refused it
		}
	} else {
		caller = auth.Caller{Token: g.opts.StaticToken}
	}
	o := g.outbound[t.Upstream]
	if o == nil {
		return upstream.Credentials{}, nil
	}
	c, err := o.Credential(ctx, caller)
	if err != nil {
		return upstream.Credentials{}, err
	}
	return upstream.Credentials{Header: c.Header, Value: c.Value}, nil
}

// peekCall reads a JSON-RPC message's method and, for tools/call, the tool's
// name, with the decoder and the struct go-sdk itself reads the message with
// (sdkwire.Parse, sdkwire.Message: case-sensitive keys, as the dispatcher sees them),
// so that the step-up check decides on the very method and tool that will
// run. ok is false when the message cannot be read that way (a method or
// params of the wrong type): the front door then refuses it, rather than let
// it past a check it could not make.
func peekCall(msg *message) (method, tool string, ok bool) {
	if !msg.ok || msg.badMethod {
		return "", "", false
	}
	if method = msg.method; method != "tools/call" {
		return method, "", true
	}
	var p struct {
		Name string `json:"name"`
	}
	if len(msg.Params) > 0 && !bytes.Equal(msg.Params, []byte("null")) && !sdkwire.Parse(msg.Params, &p) {
		return "", "", false
	}
	return method, p.Name, true
}

// refuseCall answers a call the step-up policy refused.
func refuseCall(w http.ResponseWriter, status int, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	msg := "the bearer token is not valid (invalid_token)"
	if status == http.StatusForbidden {
		msg = "this tool needs more scope than the token grants (insufficient_scope); see WWW-Authenticate"
	}
	writeRPCError(w, status, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg})
}
