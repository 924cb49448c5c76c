package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stateful sessions follow a reload.
//
// go-sdk keeps a stateful session in the server that made it, so a session
// begun before a reload stays with the retired gateway (Front.owner) until it
// ends. So that its client is served what is configured now, and is told of
// what changed (notifications/tools/list_changed), the retired gateway
// follows the current one (Front.Replace calls followGateway, then mirror
// outside its lock):
//
//   - its go-sdk server's tools become the current gateway's (mirror): the
//     tools added, changed and removed are added, replaced and removed on it,
//     and go-sdk tells each of its sessions once (it debounces); a tool that
//     did not change is left alone, so a reload that changes no tool sends
//     nothing. An MCP upstream's tools changing later on the current gateway
//     (relist) are mirrored the same way;
//   - every tool handler on a stateful gateway's server looks its tool up by
//     name on the gateway it serves for (serving): the current gateway's
//     handler runs the call, on its catalog, upstream clients and runners;
//   - the front door's stages that read the catalog use the current
//     gateway's: the step-up check (authorizeCall), the fast path on a
//     session (sessionFastPath), the task door; so do the tools/list filter
//     of auth.list: callable and the tasks' list annotations;
//   - the calls in flight (callContexts) and the sessions' GET streams
//     (sessionStreams) are one registry for every gateway of the process
//     (New with Options.Previous), so a call the current gateway runs for the
//     session is cancelled, and its task's status reaches the session, as on
//     a session of its own.
//
// Prompts, resources and resource templates follow the same way
// (prompts/list_changed, resources/list_changed), and so does completion.
//
// What stays the retired gateway's: the session itself (what its initialize
// negotiated, its log level, its idle timeout, its GET stream), and its
// resource subscriptions, which go on with the upstream client they were
// made on.
//
// A retired gateway follows only when what its sessions negotiated or were
// checked against cannot change under them (canFollow): the same auth
// section, search mode on neither (its meta-tools and per-session list state
// are the retired gateway's), and tasks on both or neither (a session's
// initialize said whether there are tasks). Otherwise its sessions keep the
// catalog they have (their own, or that of the gateway they followed, which
// is kept open while they do) until they end, and the reload logs why.
//
// The cost when no reload happened: a go-sdk tool call of a stateful gateway
// looks its handler up in a map under a read lock; the fast path, and every
// stateless gateway, pay nothing.

// sdkSet is what a gateway registered with its go-sdk server of one kind
// (tools, prompts, resources, resource templates): each one's definition
// and its own handler, by key (a name, a URI, a URI template).
type sdkSet[D any, H any] struct {
	mu sync.RWMutex
	m  map[string]sdkEntry[D, H]
}

type sdkEntry[D any, H any] struct {
	def D
	h   H
	sum *[sha256.Size]byte // what a client is shown of def, once asked (see sums)
}

func (s *sdkSet[D, H]) put(key string, def D, h H) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]sdkEntry[D, H]{}
	}
	s.m[key] = sdkEntry[D, H]{def: def, h: h}
}

func (s *sdkSet[D, H]) remove(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.m, k)
	}
}

func (s *sdkSet[D, H]) handler(key string) (H, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[key]
	return e.h, ok
}

// sums returns the definitions, by key, and a digest of each one's JSON:
// two definitions a client is shown alike have the same. Each is computed
// once (Kubernetes' 1,123 tools: 60 ms), so a gateway followed across
// several reloads, or by several retired gateways, pays it once.
func (s *sdkSet[D, H]) sums() (map[string]D, map[string][sha256.Size]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defs := make(map[string]D, len(s.m))
	sums := make(map[string][sha256.Size]byte, len(s.m))
	for k, e := range s.m {
		if e.sum == nil {
			data, err := json.Marshal(e.def)
			if err != nil {
				// Never alike: shown again whenever it is followed.
				data = fmt.Appendf(nil, "unmarshalable %p", any(e.def))
			}
			sum := sha256.Sum256(data)
			e.sum = &sum
			s.m[k] = e
		}
		defs[k], sums[k] = e.def, *e.sum
	}
	return defs, sums
}

// sdkRegistry is every kind a gateway registers with go-sdk.
type sdkRegistry struct {
	tools     sdkSet[*mcp.Tool, mcp.ToolHandler]
	prompts   sdkSet[*mcp.Prompt, mcp.PromptHandler]
	resources sdkSet[*mcp.Resource, mcp.ResourceHandler]
	templates sdkSet[*mcp.ResourceTemplate, mcp.ResourceHandler]
	// complete is the completion handler (nil: none).
	complete func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
}

// follower is a gateway's side of following (the gateway it follows is
// Gateway.succ): the gateways that follow it, and what its server shows
// while it follows.
type follower struct {
	mu        sync.Mutex // serializes changes to the server's tools (mirror, changeSDKTools)
	followers map[*Gateway]bool
	// What the server shows while following, each kind's digests
	// (sdkSet.sums); nil: its own.
	shown     map[string][sha256.Size]byte
	prompts   map[string][sha256.Size]byte
	resources map[string][sha256.Size]byte
	templates map[string][sha256.Size]byte
}

// serving is the gateway that serves g's sessions' calls: the one g follows,
// or g.
func (g *Gateway) serving() *Gateway {
	if s := g.succ.Load(); s != nil {
		return s
	}
	return g
}

// sdkToolHandler is the handler g registers with go-sdk for the tool named
// name, whose own handler is h. A stateful gateway's looks the tool up on
// the gateway serving its sessions when called (see the top of this file);
// a stateless one has no session that could outlive a reload.
func (g *Gateway) sdkToolHandler(name string, h mcp.ToolHandler) mcp.ToolHandler {
	if !g.cfg.Stateful {
		return h
	}
	return g.followHandler(name)
}

// followHandler runs the tool named name of the gateway serving g's
// sessions now.
func (g *Gateway) followHandler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s, done := g.lend()
		defer done()
		h, ok := s.sdk.tools.handler(name)
		if !ok {
			// Removed between go-sdk's lookup and this one: go-sdk's own
			// answer to a tool it does not have.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
		}
		return h(ctx, req)
	}
}

// lend returns the gateway serving g's sessions, counted as running a call
// for them until done is called: a gateway that g no longer follows (a
// later reload re-pointed g) is not closed under a call it runs
// (Front.reapLocked keeps it while its lent count is not zero, and marks
// it closedMark when it closes it; a call that finds the mark asks again,
// and finds the gateway g follows now).
func (g *Gateway) lend() (s *Gateway, done func()) {
	for {
		s = g.serving()
		if s == g {
			return g, func() {}
		}
		if s.lent.Add(1) > 0 {
			return s, func() { s.lent.Add(-1) }
		}
		s.lent.Add(-1)
		if g.serving() == s {
			// Closed, and g still points at it: g is closing too (only
			// its Close unfollows without re-pointing), and has no
			// session left to answer.
			return s, func() {}
		}
	}
}

// addSDKTool registers t with go-sdk's server while New builds g (addTools:
// on every core, so without g.follow's lock: nothing follows or is followed
// before New returns, and mirror waits for sdkTools).
func (g *Gateway) addSDKTool(t *mcp.Tool, h mcp.ToolHandler) {
	if g.cfg.Stateful { // a stateless gateway is never followed: nothing to record
		g.sdk.tools.put(t.Name, t, h)
	}
	g.server.AddTool(t, g.sdkToolHandler(t.Name, h))
}

// addSDKPrompt registers p with go-sdk's server while New builds g; a
// stateful gateway's handler looks it up on the gateway serving its sessions
// (see the top of this file), as do the three below.
func (g *Gateway) addSDKPrompt(p *mcp.Prompt, h mcp.PromptHandler) {
	if g.cfg.Stateful {
		g.sdk.prompts.put(p.Name, p, h)
		h = g.followPrompt(p.Name)
	}
	g.server.AddPrompt(p, h)
}

func (g *Gateway) addSDKResource(r *mcp.Resource, h mcp.ResourceHandler) {
	if g.cfg.Stateful {
		g.sdk.resources.put(r.URI, r, h)
		h = followRead(g, resourcesOf, r.URI)
	}
	g.server.AddResource(r, h)
}

func (g *Gateway) addSDKTemplate(t *mcp.ResourceTemplate, h mcp.ResourceHandler) {
	if g.cfg.Stateful {
		g.sdk.templates.put(t.URITemplate, t, h)
		h = followRead(g, templatesOf, t.URITemplate)
	}
	g.server.AddResourceTemplate(t, h)
}

// sdkCompletion is the completion handler g gives go-sdk's server: c, or,
// stateful, the completion of the gateway serving its sessions (nil stays
// nil: no completions capability).
func (g *Gateway) sdkCompletion(c func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	g.sdk.complete = c
	if c == nil || !g.cfg.Stateful {
		return c
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		s, done := g.lend()
		defer done()
		if s.sdk.complete == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion is not served since the reload: no prompt or resource completes"}
		}
		return s.sdk.complete(ctx, req)
	}
}

func (g *Gateway) followPrompt(name string) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		s, done := g.lend()
		defer done()
		h, ok := s.sdk.prompts.handler(name)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
		}
		return h(ctx, req)
	}
}

// followRead reads the resource (or resource template) key of the set of
// the gateway serving g's sessions that kind picks.
func followRead[D any](g *Gateway, kind func(*sdkRegistry) *sdkSet[D, mcp.ResourceHandler], key string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		s, done := g.lend()
		defer done()
		h, ok := kind(&s.sdk).handler(key)
		if !ok {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return h(ctx, req)
	}
}

func resourcesOf(r *sdkRegistry) *sdkSet[*mcp.Resource, mcp.ResourceHandler] { return &r.resources }

func templatesOf(r *sdkRegistry) *sdkSet[*mcp.ResourceTemplate, mcp.ResourceHandler] {
	return &r.templates
}

// changeSDKTools adds (or replaces) put and removes gone, as relist does
// for an MCP upstream's changes once New has returned: on g's server unless
// g follows another gateway (its server shows that one's tools), and on
// the servers of the gateways following g.
func (g *Gateway) changeSDKTools(put []*Tool, h func(*Tool) mcp.ToolHandler, gone []string) {
	g.follow.mu.Lock()
	if g.succ.Load() != nil && g.follow.shown == nil {
		// It follows, and mirror has not run yet: what its server shows is
		// its own tools as they are before this change, which from now on
		// reaches its set only (a mirror must not take it for shown, and
		// leave a tool the successor has off the server).
		_, g.follow.shown = g.sdk.tools.sums()
	}
	hs := make([]mcp.ToolHandler, len(put))
	for i, t := range put {
		if hs[i] = h(t); g.cfg.Stateful {
			g.sdk.tools.put(t.Tool.Name, t.Tool, hs[i])
		}
	}
	g.sdk.tools.remove(gone)
	if g.succ.Load() == nil {
		for i, t := range put {
			g.server.AddTool(t.Tool, g.sdkToolHandler(t.Tool.Name, hs[i]))
		}
		if len(gone) > 0 {
			g.server.RemoveTools(gone...)
		}
	}
	g.unlockAndMirror()
}

// canFollow reports whether g's sessions may be served by next from now on
// (see the top of this file), or why not.
func (g *Gateway) canFollow(next *Gateway) (bool, string) {
	switch {
	case !g.cfg.Stateful || !next.cfg.Stateful:
		return false, "stateless"
	case g.search != nil || next.search != nil:
		return false, "catalog.mode is search: a session's meta-tools and what it described stay with the gateway it began on"
	case (g.tasks == nil) != (next.tasks == nil):
		return false, "playbook tools (and with them MCP tasks) were added or removed: a session's initialize said whether there are tasks"
	case !reflect.DeepEqual(g.cfg.Auth, next.cfg.Auth):
		return false, "the auth section changed: a session's token was checked against the one it began with"
	}
	return true, ""
}

// followGateway has g's sessions served by next from now on, and records g
// as following next, which then tells g of its changes. g's server shows
// next's tools once mirror has run (Front.Replace runs it).
func (g *Gateway) followGateway(next *Gateway) {
	prev := g.pointAt(next)
	if prev != nil && prev != next {
		prev.follow.mu.Lock()
		delete(prev.follow.followers, g)
		prev.follow.mu.Unlock()
	}
	next.follow.mu.Lock()
	if next.follow.followers == nil {
		next.follow.followers = map[*Gateway]bool{}
	}
	next.follow.followers[g] = true
	next.follow.mu.Unlock()
}

// pointAt is followGateway's first step: g's sessions are served by next
// from now on. It returns the gateway they were served by before (nil: g).
func (g *Gateway) pointAt(next *Gateway) (prev *Gateway) {
	g.follow.mu.Lock()
	defer g.follow.mu.Unlock()
	return g.succ.Swap(next)
}

// followed reports whether a gateway follows g: g serves its sessions, and
// is not closed while it does (Front.reapLocked).
func (g *Gateway) followed() bool {
	g.follow.mu.Lock()
	defer g.follow.mu.Unlock()
	return len(g.follow.followers) > 0
}

// unfollow ends g's following as g closes: the gateway it followed no
// longer tells it of changes.
func (g *Gateway) unfollow() {
	if s := g.succ.Load(); s != nil {
		s.follow.mu.Lock()
		delete(s.follow.followers, g)
		s.follow.mu.Unlock()
	}
}

// mirror makes g's server show the tools, prompts, resources and resource
// templates of the gateway g follows: it adds what that one has and g's
// server does not show, replaces what differs, and removes what it no
// longer has. go-sdk sends each session one notifications/*/list_changed
// per kind for the lot. It returns how many tools it added, replaced and
// removed, and how many prompts, resources and templates it changed.
func (g *Gateway) mirror() (added, changed, removed, others int) {
	s := g.succ.Load()
	if s == nil {
		return
	}
	<-g.sdkTools // its own tools are all on its server (from a snapshot, in the background)
	<-s.sdkTools
	g.follow.mu.Lock()
	defer g.follow.mu.Unlock()
	if g.succ.Load() != s {
		return // re-pointed meanwhile: the new one's mirror does it
	}
	fl := &g.follow
	// The wanted sets are read under g's lock: of two mirrors, the later
	// reads the later set.
	added, changed, removed = mirrorSet(&fl.shown, &g.sdk.tools, &s.sdk.tools, g.server.RemoveTools,
		func(n string, t *mcp.Tool) { g.server.AddTool(t, g.followHandler(n)) })
	a, c, r := mirrorSet(&fl.prompts, &g.sdk.prompts, &s.sdk.prompts, g.server.RemovePrompts,
		func(n string, p *mcp.Prompt) { g.server.AddPrompt(p, g.followPrompt(n)) })
	others += a + c + r
	a, c, r = mirrorSet(&fl.resources, &g.sdk.resources, &s.sdk.resources, g.server.RemoveResources,
		func(u string, res *mcp.Resource) { g.server.AddResource(res, followRead(g, resourcesOf, u)) })
	others += a + c + r
	a, c, r = mirrorSet(&fl.templates, &g.sdk.templates, &s.sdk.templates, g.server.RemoveResourceTemplates,
		func(u string, t *mcp.ResourceTemplate) {
			g.server.AddResourceTemplate(t, followRead(g, templatesOf, u))
		})
	others += a + c + r
	return added, changed, removed, others
}

// mirrorSet makes a server's set of one kind, *shown (nil: own's), into
// want's, with add and remove, and records want's as shown.
func mirrorSet[D any, H any](shown *map[string][sha256.Size]byte, own, want *sdkSet[D, H], remove func(...string), add func(string, D)) (added, changed, removed int) {
	cur := *shown
	if cur == nil {
		_, cur = own.sums()
	}
	defs, sums := want.sums()
	var gone []string
	for k := range cur {
		if _, ok := sums[k]; !ok {
			gone = append(gone, k)
		}
	}
	if removed = len(gone); removed > 0 {
		remove(gone...)
	}
	for k, sum := range sums {
		old, ok := cur[k]
		switch {
		case !ok:
			added++
		case old == sum:
			continue
		default:
			changed++
		}
		add(k, defs[k])
	}
	*shown = sums
	return added, changed, removed
}

// unlockAndMirror releases g.follow.mu, held by the caller that changed
// g's server, then has each gateway following g mirror the change (outside
// the lock: mirror takes the follower's own).
func (g *Gateway) unlockAndMirror() {
	followers := make([]*Gateway, 0, len(g.follow.followers))
	for f := range g.follow.followers {
		followers = append(followers, f)
	}
	g.follow.mu.Unlock()
	for _, f := range followers {
		f.mirror()
	}
}
