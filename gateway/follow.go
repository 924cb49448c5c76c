package gateway

import (
	"context"
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
// follows the current one (Front.Replace calls follow):
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
// What stays the retired gateway's: the session itself (what its initialize
// negotiated, its log level, its idle timeout, its GET stream), and its
// prompts and resources, which keep what the session began with.
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

// sdkToolSet is what a gateway registered with its go-sdk server: each
// tool's definition and its own handler, by name.
type sdkToolSet struct {
	mu sync.RWMutex
	m  map[string]sdkTool
}

type sdkTool struct {
	tool *mcp.Tool
	h    mcp.ToolHandler
}

func (s *sdkToolSet) put(t *mcp.Tool, h mcp.ToolHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]sdkTool{}
	}
	s.m[t.Name] = sdkTool{t, h}
}

func (s *sdkToolSet) remove(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		delete(s.m, n)
	}
}

func (s *sdkToolSet) handler(name string) (mcp.ToolHandler, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.m[name]
	return t.h, ok
}

// defs returns a copy of the definitions, by name.
func (s *sdkToolSet) defs() map[string]*mcp.Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]*mcp.Tool, len(s.m))
	for n, t := range s.m {
		out[n] = t.tool
	}
	return out
}

// follower is a gateway's side of following: the gateway it follows, the
// gateways that follow it, and what its server shows while it follows.
type follower struct {
	mu        sync.Mutex // serializes changes to the server's tools (mirror, putSDKTools)
	followers map[*Gateway]bool
	shown     map[string]*mcp.Tool // the server's tools while following (nil: its own)
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
		h, ok := s.sdk.handler(name)
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
	g.sdk.put(t, h)
	g.server.AddTool(t, g.sdkToolHandler(t.Name, h))
}

// changeSDKTools adds (or replaces) put and removes gone, as relist does
// for an MCP upstream's changes once New has returned: on g's server unless
// g follows another gateway (its server shows that one's tools), and on
// the servers of the gateways following g.
func (g *Gateway) changeSDKTools(put []*Tool, h func(*Tool) mcp.ToolHandler, gone []string) {
	g.follow.mu.Lock()
	hs := make([]mcp.ToolHandler, len(put))
	for i, t := range put {
		hs[i] = h(t)
		g.sdk.put(t.Tool, hs[i])
	}
	g.sdk.remove(gone)
	if g.succ.Load() == nil {
		for i, t := range put {
			g.server.AddTool(t.Tool, g.sdkToolHandler(t.Tool.Name, hs[i]))
		}
		if len(gone) > 0 {
			g.server.RemoveTools(gone...)
		}
	}
	followers := make([]*Gateway, 0, len(g.follow.followers))
	for f := range g.follow.followers {
		followers = append(followers, f)
	}
	g.follow.mu.Unlock()
	for _, f := range followers {
		f.mirror()
	}
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

// followGateway has g's sessions served by next from now on, and g's
// server show next's tools (mirror). It returns what mirror changed.
func (g *Gateway) followGateway(next *Gateway) (added, changed, removed int) {
	g.follow1(next)
	return g.mirror()
}

// follow1 is followGateway but for the mirror: Front.Replace does it under
// its lock, and mirrors once it has let go of it (a mirror encodes every
// tool twice to compare, and the Front's lock is taken by every request
// that carries a session id while a retired gateway is kept).
func (g *Gateway) follow1(next *Gateway) {
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
	if g.follow.shown == nil {
		// What its server shows, fixed as it starts to follow: from now on
		// its own relists change g.sdk only (changeSDKTools), and mirror,
		// which runs once the lock is let go, must not take those for
		// what the server shows.
		g.follow.shown = g.sdk.defs()
	}
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

// mirror makes g's server show the tools of the gateway g follows: it adds
// what that one has and g's server does not show, replaces what differs,
// and removes what it no longer has. go-sdk sends each session
// notifications/tools/list_changed once for the lot. It returns how many
// tools it added, replaced and removed.
func (g *Gateway) mirror() (added, changed, removed int) {
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
	want := s.sdk.defs() // under g's lock: of two mirrors, the later reads the later set
	shown := g.follow.shown
	if shown == nil {
		shown = g.sdk.defs()
	}
	var gone []string
	for n := range shown {
		if want[n] == nil {
			gone = append(gone, n)
		}
	}
	if removed = len(gone); removed > 0 {
		g.server.RemoveTools(gone...)
	}
	for n, t := range want {
		switch old := shown[n]; {
		case old == nil:
			added++
		case sameTool(old, t):
			continue
		default:
			changed++
		}
		g.server.AddTool(t, g.followHandler(n))
	}
	g.follow.shown = want
	return added, changed, removed
}

// sameTool reports whether a and b would be listed alike.
func sameTool(a, b *mcp.Tool) bool {
	if a == b {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
