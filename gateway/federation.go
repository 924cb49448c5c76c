package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
//     stateless POST has no way to ask its client anything.
//   - prompts/get, resources/read and completion/complete go to the
//     upstream that offered the prompt or resource; a failure is a
//     JSON-RPC error naming the upstream, never an empty answer.
//     resources/subscribe is not served yet (the gateway offers no
//     resources.subscribe): upstream/federation can subscribe, but the
//     gateway would need to count its callers' subscriptions per upstream
//     session and relay notifications/resources/updated.

// federatedLogLevel is the level the gateway asks its upstreams' logs at:
// what a caller may want relayed; go-sdk then sends each caller what its
// own logging/setLevel asked for.
const federatedLogLevel mcp.LoggingLevel = "info"

// startFederation makes and starts the client of each MCP upstream.
func (g *Gateway) startFederation() error {
	g.federated = map[string]*federation.Upstream{}
	for i := range g.cfg.Upstreams {
		u := &g.cfg.Upstreams[i]
		if u.MCP == nil {
			continue
		}
		caps := &mcp.ClientCapabilities{}
		if g.cfg.Stateful {
			// A stateless POST cannot ask its client anything: offer the
			// upstream only what a caller's session can answer.
			caps.Sampling = &mcp.SamplingCapabilities{}
			caps.Elicitation = &mcp.ElicitationCapabilities{}
			caps.RootsV2 = &mcp.RootCapabilities{}
		}
		up, err := federation.New(*u.MCP, &federation.Options{
			Name:         u.Name,
			Logger:       g.logger,
			Capabilities: caps,
			LogLevel:     federatedLogLevel,
		})
		if err != nil {
			g.closeFederation()
			return fmt.Errorf("upstream %s: %v", u.Name, err)
		}
		up.Start(context.Background()) // ended by Close
		g.federated[u.Name] = up
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
	for _, up := range g.federated {
		up.Close()
	}
}

// Close ends what the gateway runs beside serving: its upstream MCP
// servers' sessions and stdio children. Serving requests after it fails.
func (g *Gateway) Close() error {
	g.closeFederation()
	return nil
}

// federatedHandler relays a tools/call to t's upstream MCP server.
func (g *Gateway) federatedHandler(t *Tool) mcp.ToolHandler {
	up := g.federated[t.Upstream]
	f := t.Federated
	a := t.Tool.Annotations
	// A call lost with its session is sent again only when the tool is
	// idempotent by a hint the gateway believes.
	idempotent := a.IdempotentHint && (f.TrustHints || t.Derived.Provenance.Idempotent == "config")
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		fail := func(outcome upstream.Outcome, err error, text string) *mcp.CallToolResult {
			g.logCall(ctx, t, req, upstream.Report{Outcome: outcome, Cause: err})
			res := &mcp.CallToolResult{}
			res.SetError(errors.New(text))
			return res
		}
		args, err := upstream.DecodeArguments(req.Params.Arguments)
		if err == nil {
			err = f.Arguments.Validate(args)
		}
		if err != nil {
			return fail(upstream.OutcomeInvalidArguments, err, err.Error()), nil
		}
		cred, err := g.credentials(ctx, t, req)
		if err == nil && cred.Header != "" && !strings.EqualFold(cred.Header, "Authorization") {
			err = fmt.Errorf("auth.header %s: an MCP upstream takes its credential in Authorization", cred.Header)
		}
		if err != nil {
			return fail(upstream.OutcomeUnreachable, err, fmt.Sprintf("the gateway could not obtain a credential for upstream %s", t.Upstream)), nil
		}
		params := &mcp.CallToolParams{Meta: req.Params.Meta, Name: f.Name, Arguments: req.Params.Arguments}
		start := time.Now()
		res, err := up.CallTool(ctx, federation.Credential(cred.Value), params, idempotent, g.relay(req.Session))
		if err != nil {
			outcome := upstream.OutcomeUnreachable
			switch {
			case ctx.Err() != nil:
				outcome = upstream.OutcomeCancelled
			case errors.Is(err, context.DeadlineExceeded):
				outcome = upstream.OutcomeTimeout
			}
			return fail(outcome, err, strings.TrimPrefix(err.Error(), "federation: ")), nil
		}
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeOK, Status: http.StatusOK, Elapsed: time.Since(start)})
		return res, nil
	}
}

// relay sends what an upstream asks of a call to the caller's session:
// progress and logs always, requests (sampling, elicitation, roots) only
// in stateful mode, where the session has a client to ask.
func (g *Gateway) relay(ss *mcp.ServerSession) *federation.Relay {
	if ss == nil {
		return nil
	}
	r := &federation.Relay{
		Progress: func(ctx context.Context, p *mcp.ProgressNotificationParams) { _ = ss.NotifyProgress(ctx, p) },
		Log:      func(ctx context.Context, p *mcp.LoggingMessageParams) { _ = ss.Log(ctx, p) },
	}
	if g.cfg.Stateful {
		r.CreateMessage = ss.CreateMessage
		r.Elicit = ss.Elicit
		r.ListRoots = ss.ListRoots
	}
	return r
}

// addFederatedPrompts serves every upstream MCP server's prompts, under
// the upstream's tool prefix, and its resources and templates, under
// federatedURI.
func (g *Gateway) addFederatedPrompts() {
	for _, s := range g.catalog.MCP {
		up := g.federated[s.Upstream]
		u := g.cfg.UpstreamNamed(s.Upstream)
		for _, p := range s.Listing.Prompts {
			if p == nil {
				continue
			}
			served := *p
			served.Name = u.ToolPrefix + p.Name
			name := p.Name
			g.server.AddPrompt(&served, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				cred, err := g.federatedCredential(ctx, u, req.Extra)
				if err != nil {
					return nil, err
				}
				params := *req.Params
				params.Name = name
				return asRPCError(up.GetPrompt(ctx, cred, &params))
			})
		}
		for _, r := range s.Listing.Resources {
			if r == nil {
				continue
			}
			served := *r
			served.URI = federatedURI(u, r.URI)
			g.server.AddResource(&served, g.federatedRead(up, u))
		}
		for _, r := range s.Listing.Templates {
			if r == nil {
				continue
			}
			served := *r
			served.URITemplate = federatedURI(u, r.URITemplate)
			g.server.AddResourceTemplate(&served, g.federatedRead(up, u))
		}
	}
}

// federatedCompletion is the server's completion/complete handler: it
// sends a ref/prompt or ref/resource to the upstream that offered that
// prompt or resource (template), with the name or URI the upstream knows.
// nil when no MCP upstream offers completions, so that the gateway does
// not advertise them.
func (g *Gateway) federatedCompletion() func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	type owner struct {
		up   *federation.Upstream
		u    *config.Upstream
		name string // the prompt's or URI's, as the upstream knows it
	}
	prompts, resources := map[string]owner{}, map[string]owner{}
	for _, s := range g.catalog.MCP {
		if !s.Listing.Completions {
			continue
		}
		up, u := g.federated[s.Upstream], g.cfg.UpstreamNamed(s.Upstream)
		for _, p := range s.Listing.Prompts {
			if p != nil {
				prompts[u.ToolPrefix+p.Name] = owner{up, u, p.Name}
			}
		}
		for _, r := range s.Listing.Resources {
			if r != nil {
				resources[federatedURI(u, r.URI)] = owner{up, u, r.URI}
			}
		}
		for _, r := range s.Listing.Templates {
			if r != nil {
				resources[federatedURI(u, r.URITemplate)] = owner{up, u, r.URITemplate}
			}
		}
	}
	if len(prompts) == 0 && len(resources) == 0 {
		return nil
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		ref := req.Params.Ref
		var (
			o     owner
			found bool
		)
		switch {
		case ref == nil:
		case ref.Type == "ref/prompt":
			o, found = prompts[ref.Name]
		case ref.Type == "ref/resource":
			o, found = resources[ref.URI]
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
// gets: the upstream's own error as it is, else an internal error whose
// message names the upstream and what failed.
func asRPCError[T any](res T, err error) (T, error) {
	if err == nil {
		return res, nil
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return res, je
	}
	return res, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: strings.TrimPrefix(err.Error(), "federation: ")}
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
	return schemeName(u.Name) + "+" + uri
}

// upstreamURI reverses federatedURI.
func upstreamURI(u *config.Upstream, uri string) string {
	if u.ToolPrefix == "" {
		return uri
	}
	return strings.TrimPrefix(uri, schemeName(u.Name)+"+")
}

// schemeName writes an upstream name with only the characters a URI
// scheme allows (RFC 3986: letters, digits, "+", "-", "."), "+" excepted,
// since it separates the name from the URI.
func schemeName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) == 0 || !('a' <= b[0] && b[0] <= 'z' || 'A' <= b[0] && b[0] <= 'Z') {
		b = append([]byte("u"), b...)
	}
	return string(b)
}
