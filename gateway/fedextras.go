package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// An MCP upstream's prompts, resources and resource templates ("extras")
// are served as its tools are, and followed as its tools are: New serves
// what each upstream offered at start-up (addPromptsAndResources), and
// relist applies what it offers whenever the federation client says it may
// have changed (a list_changed notification, a refresh that found a
// difference, or its first answer after being unreachable at start-up).
// What relist does, under liveTools' lock:
//
//   - an item it offers now and did not before is added; one whose served
//     definition differs is replaced; one it no longer offers is removed.
//     go-sdk tells stateful sessions (prompts/list_changed,
//     resources/list_changed), and a retired gateway following this one
//     mirrors the change (follow.go);
//   - a new item whose served name or URI another source holds (the
//     configuration's prompts, an OpenAPI or playbook resource, another
//     upstream) is not served, with a warning: a served name never changes
//     hands. At start-up the same clash is an error naming both;
//   - with Options.Lock, a prompt not in the lock unchanged is not served,
//     with a warning (resources are not in the lock for MCP upstreams);
//   - completion/complete routes to the upstreams as they are now, and so
//     do resources/subscribe and unsubscribe.
//
// What a session's initialize said stays: a gateway that offered no
// completions or no resource subscriptions at start-up offers none later
// (their capabilities are fixed when the server is made); go-sdk offers
// the prompts and resources capabilities to sessions that begin once there
// are some.

// fedExtras is what the gateway serves of its MCP upstreams' extras, by
// upstream, and who holds every served prompt name, resource URI and
// template (collisions). Written while New builds the gateway, then under
// liveTools' lock (relist).
type fedExtras struct {
	held map[string]string // "prompt N", "resource U", "resource template T": who serves it
	byUp map[string]*servedExtras
	// owners is what completion/complete routes by, rebuilt whole after
	// each change (set before New returns): read without a lock.
	owners atomic.Pointer[completionOwners]
}

// servedExtras are one upstream's extras as served, keyed by their served
// name or URI.
type servedExtras struct {
	prompts   map[string]servedPrompt
	resources map[string]servedResource
	templates map[string]servedTemplate
	completes bool // the upstream offers completion/complete
}

type servedPrompt struct {
	def  *mcp.Prompt
	name string // as the upstream knows it
}

type servedResource struct {
	def *mcp.Resource
	uri string // as the upstream knows it
}

type servedTemplate struct {
	def      *mcp.ResourceTemplate
	template string // as the upstream knows it
}

// extrasOf builds upstream u's extras, as served, from its listing l:
// prompts named with its tool prefix, resources and templates under
// federatedURI, texts cleaned as tools' are (sanitize_text). A resource or
// template whose served URI does not parse is left out (go-sdk's Add
// panics on it), named in a warning.
func (g *Gateway) extrasOf(u *config.Upstream, l *federation.Listing) (*servedExtras, []string) {
	clean := func(s *string) {
		if g.cfg.SanitizesText() {
			*s = annotations.SanitizeText(*s)
		}
	}
	x := &servedExtras{prompts: map[string]servedPrompt{}, resources: map[string]servedResource{}, templates: map[string]servedTemplate{}, completes: l.Completions}
	var warnings []string
	for _, p := range l.Prompts {
		if p == nil {
			continue
		}
		served := *p
		served.Name = u.ToolPrefix + p.Name
		clean(&served.Title)
		clean(&served.Description)
		served.Arguments = make([]*mcp.PromptArgument, 0, len(p.Arguments))
		for _, a := range p.Arguments {
			if a != nil {
				c := *a
				clean(&c.Title)
				clean(&c.Description)
				served.Arguments = append(served.Arguments, &c)
			}
		}
		x.prompts[served.Name] = servedPrompt{&served, p.Name}
	}
	for _, r := range l.Resources {
		if r == nil {
			continue
		}
		served := *r
		served.URI = federatedURI(u, r.URI)
		clean(&served.Title)
		clean(&served.Description)
		if _, err := url.Parse(served.URI); err != nil {
			warnings = append(warnings, fmt.Sprintf("upstream %s: resource left out: its URI does not parse: %v", u.Name, err))
			continue
		}
		x.resources[served.URI] = servedResource{&served, r.URI}
	}
	for _, r := range l.Templates {
		if r == nil {
			continue
		}
		served := *r
		served.URITemplate = federatedURI(u, r.URITemplate)
		clean(&served.Title)
		clean(&served.Description)
		if _, err := uritemplate.New(served.URITemplate); err != nil {
			warnings = append(warnings, fmt.Sprintf("upstream %s: resource template left out: it does not parse: %v", u.Name, err))
			continue
		}
		x.templates[served.URITemplate] = servedTemplate{&served, r.URITemplate}
	}
	return x, warnings
}

// federatedPrompt relays a prompts/get of a prompt upstream u calls name.
func (g *Gateway) federatedPrompt(up *federation.Upstream, u *config.Upstream, name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		cred, err := g.federatedCredential(ctx, u, req.Extra)
		if err != nil {
			return nil, err
		}
		params := *req.Params
		params.Name = name
		return asRPCError(up.GetPrompt(ctx, cred, &params))
	}
}

// lockedOut returns the served names of upstream u's prompts in listing l
// that Options.Lock withholds: added or changed since the lock was
// written, by the facts the lockfile records of them.
func (g *Gateway) lockedOut(u *config.Upstream, l *federation.Listing) map[string]bool {
	if g.opts.Lock == nil {
		return nil
	}
	d := &annotations.Drift{}
	d.ComparePrompts(g.opts.Lock, catalog.UpstreamLockedPrompts(u, l))
	held := map[string]bool{}
	for _, n := range d.HeldPrompts() {
		held[n] = true
	}
	return held
}

// serveExtrasAtStart serves upstream u's extras from the listing it
// started with (addPromptsAndResources): a name or URI another source
// holds is an error naming both.
func (g *Gateway) serveExtrasAtStart(u *config.Upstream, l *federation.Listing, claim func(kind, served, upstream, own string) error) error {
	up := g.federated[u.Name]
	x, warnings := g.extrasOf(u, l)
	for _, w := range warnings {
		g.logger.Warn("federation", "warning", w)
	}
	// In the order go-sdk lists them, so that the first clash reported is
	// the same every start.
	for _, n := range slices.Sorted(maps.Keys(x.prompts)) {
		if err := claim("prompt", n, u.Name, x.prompts[n].name); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(x.resources)) {
		if err := claim("resource", k, u.Name, x.resources[k].uri); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(x.templates)) {
		if err := claim("resource template", k, u.Name, x.templates[k].template); err != nil {
			return err
		}
	}
	owner := &resourceOwner{up: up, u: u, subscribe: l.Subscribe}
	for n, p := range x.prompts {
		if g.heldPrompts[n] {
			g.logger.Warn("lock: not serving a prompt that is not in the lock unchanged", "prompt", n)
			delete(x.prompts, n)
			continue
		}
		g.addSDKPrompt(p.def, g.federatedPrompt(up, u, p.name))
	}
	for k, r := range x.resources {
		g.addSDKResource(r.def, g.federatedRead(up, u))
		g.subs.addResource(k, owner)
	}
	for k, t := range x.templates {
		g.addSDKTemplate(t.def, g.federatedRead(up, u))
		g.subs.addTemplate(k, owner)
	}
	g.extras.byUp[u.Name] = x
	return nil
}

// extrasChange is what one re-read adds (or replaces) and removes of each
// kind, with the handlers of what it adds.
type extrasChange struct {
	prompts          []*mcp.Prompt
	promptHandlers   []mcp.PromptHandler
	gonePrompts      []string
	resources        []*mcp.Resource
	resourceHandlers []mcp.ResourceHandler
	goneResources    []string
	templates        []*mcp.ResourceTemplate
	templateHandlers []mcp.ResourceHandler
	goneTemplates    []string
}

func (c *extrasChange) empty() bool {
	return len(c.prompts)+len(c.gonePrompts)+len(c.resources)+len(c.goneResources)+len(c.templates)+len(c.goneTemplates) == 0
}

// relistExtras applies upstream u's extras in listing l to what is served
// (see the top of this file). g.live.mu is held.
func (g *Gateway) relistExtras(u *config.Upstream, l *federation.Listing) {
	up := g.federated[u.Name]
	now, warnings := g.extrasOf(u, l)
	for _, w := range warnings {
		g.logger.Warn("federation", "warning", w)
	}
	was := g.extras.byUp[u.Name]
	if was == nil {
		was = &servedExtras{}
	}
	mine := "upstream " + u.Name
	// taken reports whether another source serves key; a new item it
	// names is not served.
	taken := func(kind, key string) bool {
		by, ok := g.extras.held[kind+" "+key]
		if ok && by != mine {
			g.logger.Warn("federation: not serving an upstream's "+kind+" whose name another source serves", "upstream", u.Name, "name", key, "served_by", by)
			return true
		}
		return false
	}
	locked := g.lockedOut(u, l)
	var lockedNames []string // this upstream's, though not served
	var c extrasChange
	for n, p := range now.prompts {
		switch {
		case taken("prompt", n):
			delete(now.prompts, n)
		case locked[n]:
			g.logger.Warn("lock: not serving a prompt that is not in the lock unchanged", "upstream", u.Name, "prompt", n)
			delete(now.prompts, n)
			lockedNames = append(lockedNames, n)
		case was.prompts[n].def != nil && reflect.DeepEqual(was.prompts[n], p):
		default:
			c.prompts = append(c.prompts, p.def)
			c.promptHandlers = append(c.promptHandlers, g.federatedPrompt(up, u, p.name))
		}
	}
	for k, r := range now.resources {
		switch {
		case taken("resource", k):
			delete(now.resources, k)
		case was.resources[k].def != nil && reflect.DeepEqual(was.resources[k], r):
		default:
			c.resources = append(c.resources, r.def)
			c.resourceHandlers = append(c.resourceHandlers, g.federatedRead(up, u))
		}
	}
	for k, t := range now.templates {
		switch {
		case taken("resource template", k):
			delete(now.templates, k)
		case was.templates[k].def != nil && reflect.DeepEqual(was.templates[k], t):
		default:
			c.templates = append(c.templates, t.def)
			c.templateHandlers = append(c.templateHandlers, g.federatedRead(up, u))
		}
	}
	c.gonePrompts = goneKeys(was.prompts, now.prompts)
	c.goneResources = goneKeys(was.resources, now.resources)
	c.goneTemplates = goneKeys(was.templates, now.templates)
	// The names this upstream holds are those it offers now.
	maps.DeleteFunc(g.extras.held, func(_, by string) bool { return by == mine })
	for _, n := range lockedNames {
		g.extras.held["prompt "+n] = mine
	}
	for n := range now.prompts {
		g.extras.held["prompt "+n] = mine
	}
	for k := range now.resources {
		g.extras.held["resource "+k] = mine
	}
	for k := range now.templates {
		g.extras.held["resource template "+k] = mine
	}
	completes := was.completes != now.completes
	g.extras.byUp[u.Name] = now
	if c.empty() {
		if completes {
			g.extras.owners.Store(g.completionOwners())
		}
		return
	}
	// Routes first, then the server: a client told of a new resource
	// finds its subscription routed.
	owner := &resourceOwner{up: up, u: u, subscribe: l.Subscribe}
	g.subs.change(owner, slices.Collect(maps.Keys(now.resources)), c.goneResources, slices.Collect(maps.Keys(now.templates)), c.goneTemplates)
	g.extras.owners.Store(g.completionOwners())
	g.changeSDKExtras(&c)
	g.logger.Info("federation: an upstream's prompts or resources changed", "upstream", u.Name,
		"prompts_put", len(c.prompts), "prompts_removed", len(c.gonePrompts),
		"resources_put", len(c.resources)+len(c.templates), "resources_removed", len(c.goneResources)+len(c.goneTemplates))
}

// changeSDKExtras is changeSDKTools for prompts, resources and templates:
// on g's server unless g follows another gateway, in g's own sets
// (stateful), and on the servers of the gateways following g.
func (g *Gateway) changeSDKExtras(c *extrasChange) {
	g.follow.mu.Lock()
	if g.succ.Load() != nil {
		// As changeSDKTools: what the server shows before mirror first
		// runs is g's own sets as they are before this change.
		if g.follow.prompts == nil {
			_, g.follow.prompts = g.sdk.prompts.sums()
		}
		if g.follow.resources == nil {
			_, g.follow.resources = g.sdk.resources.sums()
		}
		if g.follow.templates == nil {
			_, g.follow.templates = g.sdk.templates.sums()
		}
	}
	stateful, own := g.cfg.Stateful, g.succ.Load() == nil
	for i, p := range c.prompts {
		h := c.promptHandlers[i]
		if stateful {
			g.sdk.prompts.put(p.Name, p, h)
			h = g.followPrompt(p.Name)
		}
		if own {
			g.server.AddPrompt(p, h)
		}
	}
	for i, r := range c.resources {
		h := c.resourceHandlers[i]
		if stateful {
			g.sdk.resources.put(r.URI, r, h)
			h = followRead(g, resourcesOf, r.URI)
		}
		if own {
			g.server.AddResource(r, h)
		}
	}
	for i, t := range c.templates {
		h := c.templateHandlers[i]
		if stateful {
			g.sdk.templates.put(t.URITemplate, t, h)
			h = followRead(g, templatesOf, t.URITemplate)
		}
		if own {
			g.server.AddResourceTemplate(t, h)
		}
	}
	g.sdk.prompts.remove(c.gonePrompts)
	g.sdk.resources.remove(c.goneResources)
	g.sdk.templates.remove(c.goneTemplates)
	if own {
		if len(c.gonePrompts) > 0 {
			g.server.RemovePrompts(c.gonePrompts...)
		}
		if len(c.goneResources) > 0 {
			g.server.RemoveResources(c.goneResources...)
		}
		if len(c.goneTemplates) > 0 {
			g.server.RemoveResourceTemplates(c.goneTemplates...)
		}
	}
	g.unlockAndMirror()
}

// completionOwner is the upstream a completion/complete goes to, and the
// prompt's name or the URI as it knows them.
type completionOwner struct {
	up   *federation.Upstream
	u    *config.Upstream
	name string
}

// completionOwners routes completion/complete: the served prompts,
// resources and templates of the upstreams that offer completions.
type completionOwners struct {
	prompts, resources map[string]completionOwner
}

// completionOwners builds the routes of completion/complete from what is
// served now (a prompt the lock withholds is not served in any way).
func (g *Gateway) completionOwners() *completionOwners {
	o := &completionOwners{prompts: map[string]completionOwner{}, resources: map[string]completionOwner{}}
	for name, x := range g.extras.byUp {
		if !x.completes {
			continue
		}
		up, u := g.federated[name], g.cfg.UpstreamNamed(name)
		for n, p := range x.prompts {
			o.prompts[n] = completionOwner{up, u, p.name}
		}
		for k, r := range x.resources {
			o.resources[k] = completionOwner{up, u, r.uri}
		}
		for k, t := range x.templates {
			o.resources[k] = completionOwner{up, u, t.template}
		}
	}
	return o
}

// goneKeys are the keys of was that now lacks.
func goneKeys[V any](was, now map[string]V) []string {
	var gone []string
	for k := range was {
		if _, ok := now[k]; !ok {
			gone = append(gone, k)
		}
	}
	return gone
}
