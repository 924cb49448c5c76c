package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// Federation: the gateway is the MCP client of each upstream MCP server
// (package upstream/federation: sessions per credential, health pings, a
// stdio child's restarts) and the MCP server of its own callers. The
// catalog lists each upstream through the same client (catalog.Options
// ListMCP), so its session is warm when the first call comes.
//
// What is relayed, and how:
//   - tools/call: arguments checked against the declared input schema
//     first (nothing unchecked is sent), the credential the upstream's
//     auth.mode gives, the caller's progressToken and _meta; the result
//     passes through whole (every content type, structuredContent,
//     isError, _meta).
//   - Progress and log notifications of a call reach its caller's session
//     (progress under the caller's own token). A caller's cancellation, or
//     hang-up, reaches the upstream as notifications/cancelled.
//   - Server-to-client requests (sampling, elicitation, roots) of a call
//     go to the calling client and its answer back, in stateful mode: a
//     stateless POST has no way to ask its client anything, nor has a
//     2026-07-28 caller of a stateful gateway, whose calls therefore go
//     on an upstream session that offers none (relay, and
//     federation.Upstream's bare sessions).
//   - prompts/get, resources/read and completion/complete go to the
//     upstream that offered the prompt or resource; a failure is a
//     JSON-RPC error naming the upstream, never an empty answer.
//   - resources/subscribe and resources/unsubscribe, in stateful mode,
//     go to the upstream that serves the URI, on the session of the
//     caller's credential, subscribed once however many caller sessions
//     hold it and unsubscribed when the last lets go or ends; its
//     notifications/resources/updated reach, under the gateway's URI, the
//     caller sessions subscribed on that upstream session. A stateless
//     gateway, with no session to notify, offers no resources.subscribe
//     and answers -32601 saying why (subscribe.go).

// federatedLogLevel is the level the gateway asks its upstreams' logs at:
// what a caller may want relayed; go-sdk then sends each caller what its
// own logging/setLevel asked for.
const federatedLogLevel mcp.LoggingLevel = "info"

// startFederation makes and starts the client of each MCP upstream.
func (g *Gateway) startFederation() error {
	g.federated = map[string]*federation.Upstream{}
	g.fedShares = map[string]*fedShare{}
	for i := range g.cfg.Upstreams {
		u := &g.cfg.Upstreams[i]
		if u.MCP == nil {
			continue
		}
		if s := g.reuse(g.opts.Previous, u); s != nil {
			// A reload, and this upstream is unchanged: keep its client
			// (fedreuse.go).
			g.federated[u.Name] = s.up
			g.fedShares[u.Name] = s
			continue
		}
		caps := &mcp.ClientCapabilities{}
		if g.cfg.Stateful {
			// A stateless POST cannot ask its client anything: offer the
			// upstream only what a caller's session can answer. A call
			// whose caller has no session goes on a session of the
			// upstream's that offers none (relay).
			caps.Sampling = &mcp.SamplingCapabilities{}
			caps.Elicitation = &mcp.ElicitationCapabilities{}
			caps.RootsV2 = &mcp.RootCapabilities{}
		}
		s := &fedShare{u: *u, users: []*Gateway{g}}
		up, err := federation.New(*u.MCP, &federation.Options{
			Name:              u.Name,
			Tracing:           g.upstreamTracing(),
			Logger:            g.logger,
			Capabilities:      caps,
			LogLevel:          federatedLogLevel,
			OnListChanged:     s.onListChanged(u.Name),
			OnResourceUpdated: s.onResourceUpdated(),
			MaxConcurrent:     u.MaxConcurrent,
			QueueTimeout:      u.QueueTimeout,
			ResponseBudget:    g.budget,
		})
		if err != nil {
			g.closeFederation()
			return fmt.Errorf("upstream %s: %v", u.Name, err)
		}
		s.up = up
		up.Start(context.Background()) // ended by the last gateway's Close
		g.federated[u.Name] = up
		g.fedShares[u.Name] = s
	}
	return nil
}

// listFederated is catalog.Options.ListMCP: the live client's listing,
// within the upstream's timeout, so that one that does not answer holds
// the start-up no longer than that.
func (g *Gateway) listFederated(ctx context.Context, u *config.Upstream) (*federation.Listing, error) {
	up := g.federated[u.Name]
	if up == nil {
		return nil, errors.New("no client")
	}
	ctx, cancel := context.WithTimeout(ctx, u.MCP.Timeout)
	defer cancel()
	return up.List(ctx)
}

// closeFederation closes every upstream MCP client: sessions, and stdio
// children with their process groups.
func (g *Gateway) closeFederation() {
	for _, s := range g.fedShares {
		s.leave(g) // the client closes with the last gateway that uses it
	}
}

// Close ends what the gateway runs beside serving: its upstream MCP
// servers' sessions and stdio children, its REST upstreams' keep-alive
// connections (those of transports no later gateway shares: restreuse.go),
// and its shared state's leases and connections (state: redis). Serving
// requests after it fails.
func (g *Gateway) Close() error {
	g.unfollow()
	g.life.close()
	g.closeFederation()
	g.closeTransports()
	g.closeShared()
	// The spans still batched are sent, within a bound: an unreachable
	// collector must not hold the process's exit.
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	return g.stopTracing(ctx)
}

// liveTools is what relist keeps of the tools served: every tool, by name,
// and the lock that serializes re-reads. Set once New has built the
// server; until then a change is left to the next one.
type liveTools struct {
	mu    sync.Mutex
	ready bool
	tools map[string]*Tool
	// byName is a copy of tools, replaced whole when tools changes: the
	// fast path's lookups take no lock.
	byName atomic.Pointer[map[string]*Tool]
}

// publish makes the tools the ones lookup sees. l.mu is held, or New is
// still building.
func (l *liveTools) publish() {
	m := maps.Clone(l.tools)
	l.byName.Store(&m)
}

// lookup returns the tool served under name now.
func (l *liveTools) lookup(name string) (*Tool, bool) {
	m := l.byName.Load()
	if m == nil {
		return nil, false
	}
	t, ok := (*m)[name]
	return t, ok
}

// relist applies what upstream name now offers to the tools served: it
// lists the upstream again, builds its tools as the catalog would, and
// adds, replaces and removes them on the go-sdk server (which tells
// stateful clients: notifications/tools/list_changed). A new tool whose
// name another upstream's tool holds is not served (a warning says so: a
// served name never changes hands), nor, with Options.Lock, one that is
// not in the lock unchanged. Its prompts and resources are re-read from
// the same listing (relistExtras).
func (g *Gateway) relist(name string) {
	g.live.mu.Lock()
	defer g.live.mu.Unlock()
	if !g.live.ready {
		return
	}
	u := g.cfg.UpstreamNamed(name)
	l, err := g.listFederated(context.Background(), u)
	if err != nil {
		g.logger.Warn("federation: re-reading an upstream's tools failed; serving what it offered before", "upstream", name, "error", err)
		return
	}
	// Its prompts and resources (fedextras.go), once its tools are
	// served: a client told of new prompts finds the tools as new.
	defer g.relistExtras(u, l)
	tools, warnings := g.catalog.Relist(u, l, g.cfg.NameStyle, func(n string) bool {
		t := g.live.tools[n]
		return t != nil && t.Upstream != name || g.search != nil && g.search.meta[n] != nil
	})
	for _, w := range warnings {
		g.logger.Warn("federation", "warning", w)
	}
	facts := (&Catalog{Tools: tools}).Facts()
	if g.opts.Lock != nil {
		d := annotations.Compare(g.opts.Lock, facts)
		kept, keptFacts := tools[:0], facts[:0]
		for i, t := range tools {
			if d.Drifted(t.Tool.Name) {
				g.logger.Warn("federation: not serving a tool that is not in the lock unchanged", "upstream", name, "tool", t.Tool.Name)
				continue
			}
			kept, keptFacts = append(kept, t), append(keptFacts, facts[i])
		}
		tools, facts = kept, keptFacts
	}
	// What differs from what is served is what the lockfile's own
	// comparison finds between the two: hints, operation, schemas, texts.
	var served []*Tool
	fresh := make(map[string]bool, len(tools))
	for _, t := range tools {
		fresh[t.Tool.Name] = true
	}
	var gone []string
	for n, t := range g.live.tools {
		switch {
		case t.Upstream != name:
		case fresh[n]:
			served = append(served, t)
		default:
			gone = append(gone, n)
			delete(g.live.tools, n)
		}
	}
	differs := map[string]bool{}
	for _, c := range annotations.Compare(annotations.NewLock((&Catalog{Tools: served}).Facts()), facts).Changed {
		differs[c.Tool] = true
	}
	added, changed := 0, 0
	var put []*Tool // added or changed
	for _, t := range tools {
		switch {
		case g.live.tools[t.Tool.Name] == nil:
			added++
		case !differs[t.Tool.Name]:
			continue
		default:
			changed++
		}
		g.live.tools[t.Tool.Name] = t
		put = append(put, t)
	}
	if len(put)+len(gone) == 0 {
		return
	}
	// What a call and a list must see before go-sdk sends list_changed
	// (shortly after AddTool): the step-up requirements of the tools it
	// adds, and search mode's index, the change being every session's to
	// be told of (searchMode.notifyMiddleware).
	a := g.cfg.Auth
	if a != nil && len(put) > 0 {
		require := maps.Clone(g.requirements())
		for _, t := range put {
			require[t.Tool.Name] = a.Policy.Require(g.policyHints(t), t.OAuthScopes)
		}
		g.require.Store(&require)
	}
	if g.search != nil {
		g.search.rebuild(slices.Collect(maps.Values(g.live.tools)))
		g.search.changes.Add(1)
	}
	g.changeSDKTools(put, g.federatedHandler, gone)
	if len(gone) > 0 {
		if a != nil {
			require := maps.Clone(g.requirements())
			for _, n := range gone {
				delete(require, n)
			}
			g.require.Store(&require)
		}
	}
	g.live.publish()
	g.logger.Info("federation: an upstream's tools changed", "upstream", name, "added", added, "changed", changed, "removed", len(gone))
}

// federatedHandler relays a tools/call to t's upstream MCP server, for
// go-sdk's session: the call ends with the client's POST (see frontDoor).
func (g *Gateway) federatedHandler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		return g.callFederated(ctx, t, req)
	}
}

// callFederated runs one federated tool call for go-sdk's tool handler:
// the request checked (checkFederated), the upstream called with the
// caller's session as relay, one log line. ctx ends the call when the
// client goes away. The front door's fast path forwards stateless calls
// itself (fastPath.serveFederated). The error is one the caller gets as
// a JSON-RPC error (missingCapability), else nil.
func (g *Gateway) callFederated(ctx context.Context, t *Tool, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cred, failed := g.checkFederated(ctx, t, req)
	if failed != nil {
		return failed, nil
	}
	return g.sendFederated(ctx, t, req, cred, g.relay(req.Session))
}

// checkFederated decodes a federated call's arguments, checks them
// against the declared schema (nothing unchecked is sent) and picks the
// credential of the upstream's auth.mode. A call that fails here is
// answered with the result it returns, already logged.
func (g *Gateway) checkFederated(ctx context.Context, t *Tool, req *mcp.CallToolRequest) (federation.Credential, *mcp.CallToolResult) {
	args, err := upstream.DecodeArguments(req.Params.Arguments)
	if err == nil {
		err = t.Federated.Arguments.Validate(args)
	}
	if err != nil {
		return "", g.failFederated(ctx, t, req, upstream.OutcomeInvalidArguments, err, err.Error())
	}
	cred, err := g.credentials(ctx, t, req)
	if err == nil && cred.Header != "" && !strings.EqualFold(cred.Header, "Authorization") {
		err = fmt.Errorf("auth.header %s: an MCP upstream takes its credential in Authorization", cred.Header)
	}
	if err != nil {
		return "", g.failFederated(ctx, t, req, upstream.OutcomeUnreachable, err, fmt.Sprintf("the gateway could not obtain a credential for upstream %s", t.Upstream))
	}
	return federation.Credential(cred.Value), nil
}

// sendFederated calls the upstream through its go-sdk session. The error
// is one the caller gets as a JSON-RPC error (missingCapability), else
// nil: every other failure is a tool error.
func (g *Gateway) sendFederated(ctx context.Context, t *Tool, req *mcp.CallToolRequest, cred federation.Credential, r *federation.Relay) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Meta: req.Params.Meta, Name: t.Federated.Name, Arguments: req.Params.Arguments}
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	ctx = g.callTrace(ctx, t, h)
	start := time.Now()
	res, err := g.federated[t.Upstream].CallTool(ctx, cred, params, federatedIdempotent(t), r)
	if err != nil {
		failed := g.federatedError(ctx, t, req, err)
		if perr := missingCapability(h, err); perr != nil {
			return nil, perr
		}
		return failed, nil
	}
	g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeOK, Status: http.StatusOK, Elapsed: time.Since(start)})
	return res, nil
}

// missingCapability is the upstream's -32021 (MissingRequiredClientCapabilities:
// the tool needs a client capability the caller did not declare) in err,
// as the JSON-RPC error a caller of 2026-07-28 or later is to get, with
// the upstream's message and data (the capabilities it needs); go-sdk
// answers it with HTTP 400. nil for any other error, and for an older
// caller, whose version has no such code: they get the error's text as a
// tool error. Only go-sdk's path serves a 2026-07-28 caller's federated
// call (Upstream.Forward does not), so the fast path never meets it.
func missingCapability(h http.Header, err error) error {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != mcp.CodeMissingRequiredClientCapabilities || h.Get("Mcp-Protocol-Version") < "2026-07-28" {
		return nil
	}
	return &jsonrpc.Error{Code: jerr.Code, Message: jerr.Message, Data: jerr.Data}
}

// federatedIdempotent reports whether a call of t lost with its session
// may be sent again: only when the tool is idempotent by a hint the
// gateway believes.
func federatedIdempotent(t *Tool) bool {
	return t.Tool.Annotations.IdempotentHint && (t.Federated.TrustHints || t.Derived.Provenance.Idempotent == "config")
}

// federatedError is the result, logged, of a call the upstream did not
// answer with a result: the error's text, without the package's prefix.
func (g *Gateway) federatedError(ctx context.Context, t *Tool, req *mcp.CallToolRequest, err error) *mcp.CallToolResult {
	outcome := upstream.OutcomeUnreachable
	switch {
	case errors.Is(err, federation.ErrBusy):
		outcome = upstream.OutcomeBusy
	case ctx.Err() != nil:
		outcome = upstream.OutcomeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		outcome = upstream.OutcomeTimeout
	}
	return g.failFederated(ctx, t, req, outcome, err, strings.TrimPrefix(err.Error(), "federation: "))
}

func (g *Gateway) failFederated(ctx context.Context, t *Tool, req *mcp.CallToolRequest, outcome upstream.Outcome, err error, text string) *mcp.CallToolResult {
	g.logCall(ctx, t, req, upstream.Report{Outcome: outcome, Cause: err})
	res := &mcp.CallToolResult{}
	res.SetError(errors.New(text))
	return res
}

// relay sends what an upstream asks of a call to the caller's session:
// progress (its token is the call's own), logs, and in stateful mode,
// where the session has a client to ask, server-to-client requests
// (sampling, elicitation, roots). Logs and requests name no call, so the
// federation client hands them over only when one call is on the upstream
// session: on a session callers share, another caller's call is never
// asked or told.
func (g *Gateway) relay(ss *mcp.ServerSession) *federation.Relay {
	if ss == nil {
		return nil
	}
	r := &federation.Relay{
		Progress: func(ctx context.Context, p *mcp.ProgressNotificationParams) { _ = ss.NotifyProgress(ctx, p) },
		Log:      func(ctx context.Context, p *mcp.LoggingMessageParams) { _ = ss.Log(ctx, p) },
	}
	if g.cfg.Stateful && ss.ID() != "" {
		// A 2026-07-28 request on a stateful gateway is served sessionless
		// (routeVersion): nothing can be asked of its caller, so the call
		// goes on an upstream session that offers nothing
		// (federation.Upstream.bareFor) and an upstream that needs a
		// capability refuses it with -32021 (missingCapability).
		r.CreateMessage = ss.CreateMessage
		r.Elicit = ss.Elicit
		r.ListRoots = ss.ListRoots
	}
	return r
}

// addPromptsAndResources serves the configuration's prompts, the OpenAPI
// upstreams' resources (resources.go), and every upstream MCP server's
// prompts, under the upstream's tool prefix, and its resources and
// templates, under federatedURI; none that Options.Lock withholds.
//
// Their texts are cleaned as tools' are (sanitize_text), and two that end
// up with one name or URI are a start-up error naming both upstreams, as
// for tools: go-sdk would let the later one replace the earlier silently.
func (g *Gateway) addPromptsAndResources() error {
	held := map[string]string{} // a served prompt name, resource URI or template: who serves it
	withheld := func(name string) bool {
		if g.heldPrompts[name] {
			g.logger.Warn("lock: not serving a prompt that is not in the lock unchanged", "prompt", name)
			return true
		}
		return false
	}
	for _, p := range g.catalog.Prompts {
		held["prompt "+p.Prompt.Name] = "the configuration (prompts:)"
		if path, ok := strings.CutPrefix(p.Source, "playbook:"); ok {
			held["prompt "+p.Prompt.Name] = "playbook " + path + " (mcp.prompts)"
		}
		if !withheld(p.Prompt.Name) {
			g.addSDKPrompt(p.Prompt, configPrompt(p))
		}
	}
	g.addOpenAPIResources(held)
	if err := g.addPlaybookResources(held); err != nil {
		return err
	}
	claim := func(kind, served, upstream, own string) error {
		if by, ok := held[kind+" "+served]; ok {
			return fmt.Errorf("%s %q is served by %s and by upstream %s (%s): set a tool_prefix on the upstream, or rename", kind, served, by, upstream, own)
		}
		held[kind+" "+served] = "upstream " + upstream
		return nil
	}
	g.extras.held, g.extras.byUp = held, map[string]*servedExtras{}
	for _, s := range g.catalog.MCP {
		if err := g.serveExtrasAtStart(g.cfg.UpstreamNamed(s.Upstream), s.Listing, claim); err != nil {
			return err
		}
	}
	g.extras.owners.Store(g.completionOwners())
	return nil
}

// federatedCompletion is the server's completion/complete handler: it
// sends a ref/prompt or ref/resource to the upstream that serves that
// prompt or resource (template) now (fedExtras.owners), with the name or
// URI the upstream knows. nil when no MCP upstream offered completions at
// start-up and every one was listed, so that the gateway does not
// advertise them; an upstream that had not answered may offer them when
// it does.
func (g *Gateway) federatedCompletion() func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	offers := map[string]bool{} // of each upstream listed at start-up: it offers completions
	for _, s := range g.catalog.MCP {
		offers[s.Upstream] = s.Listing.Completions
	}
	offered := false
	for _, u := range g.cfg.Upstreams {
		if o, listed := offers[u.Name]; u.MCP != nil && (o || !listed) {
			offered = true
		}
	}
	if !offered {
		return nil
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		ref := req.Params.Ref
		owners := g.extras.owners.Load() // set before New returns
		var (
			o     completionOwner
			found bool
		)
		switch {
		case ref == nil:
		case ref.Type == "ref/prompt":
			o, found = owners.prompts[ref.Name]
		case ref.Type == "ref/resource":
			o, found = owners.resources[ref.URI]
		}
		if !found {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: no prompt or resource of an upstream that offers completions is named by ref"}
		}
		cred, err := g.federatedCredential(ctx, o.u, req.Extra)
		if err != nil {
			return nil, err
		}
		params := *req.Params
		r := *ref
		if r.Type == "ref/prompt" {
			r.Name = o.name
		} else {
			r.URI = o.name
		}
		params.Ref = &r
		return asRPCError(o.up.Complete(ctx, cred, &params))
	}
}

// federatedRead relays a resources/read, with the URI as the upstream
// knows it.
func (g *Gateway) federatedRead(up *federation.Upstream, u *config.Upstream) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		cred, err := g.federatedCredential(ctx, u, req.Extra)
		if err != nil {
			return nil, err
		}
		params := *req.Params
		params.URI = upstreamURI(u, req.Params.URI)
		res, err := asRPCError(up.ReadResource(ctx, cred, &params))
		if err == nil {
			for _, c := range res.Contents {
				if c != nil && c.URI != "" {
					c.URI = federatedURI(u, c.URI)
				}
			}
		}
		return res, err
	}
}

// federatedCredential is the credential u's auth.mode gives the caller of
// a prompt or resource request.
func (g *Gateway) federatedCredential(ctx context.Context, u *config.Upstream, extra *mcp.RequestExtra) (federation.Credential, error) {
	req := &mcp.CallToolRequest{Extra: extra}
	cred, err := g.credentials(ctx, &Tool{Upstream: u.Name}, req)
	if err != nil {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the gateway could not obtain a credential for upstream " + u.Name}
	}
	return federation.Credential(cred.Value), nil
}

// asRPCError turns an upstream failure into the JSON-RPC error the caller
// gets: the upstream's own error as it is, else upstreamRPCError's
// internal error naming the upstream and what failed.
func asRPCError[T any](res T, err error) (T, error) {
	if err == nil {
		return res, nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return res, je
	}
	return res, upstreamRPCError(err)
}

// federatedURI is how the gateway serves an upstream's resource URI (or
// template): as it is when the upstream's tool_prefix is empty, otherwise
// "<upstream>+<uri>" ("fs+file:///data/a.txt"): the upstream's name
// becomes part of the URI's scheme, which keeps two upstreams' URIs apart
// and reads back by cutting the name off (upstreamURI). An upstream name
// with characters a URI scheme cannot hold has them written as "-".
func federatedURI(u *config.Upstream, uri string) string {
	if u.ToolPrefix == "" {
		return uri
	}
	return catalog.SchemeName(u.Name) + "+" + uri
}

// upstreamURI reverses federatedURI.
func upstreamURI(u *config.Upstream, uri string) string {
	if u.ToolPrefix == "" {
		return uri
	}
	return strings.TrimPrefix(uri, catalog.SchemeName(u.Name)+"+")
}
