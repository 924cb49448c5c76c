package gateway

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// An upstream MCP client kept across a reload. A reload builds a new
// Gateway beside the old one (Front.Replace), and the old one is closed once
// nothing is served on it; without this, every reload would start a new
// client for every MCP upstream — a new stdio child, losing whatever state
// the server kept (the memory server's knowledge graph), and new sessions
// with their handshakes. With Options.Previous, an MCP upstream whose
// configuration and client settings are unchanged keeps its client: the new
// gateway shares it with the old, both react to its notifications (each
// relists its own tools, each tells its own sessions of a resource update),
// and it is closed when the last gateway that uses it is.
//
// Unchanged means: the upstream's whole configuration entry (command, url,
// env, timeout, auth, prefix, filters, hints…), the gateway's mode
// (--stateful decides the capabilities the client declares), its logger,
// and its tracing (a client keeps the tracer it was made with, and a
// gateway's OTLP provider ends with it, so a client is kept only where both
// gateways trace alike without a provider of their own: tracing off, or
// Options.TracerProvider the same).
type fedShare struct {
	up *federation.Upstream
	u  config.Upstream // the configuration it was made from

	mu    sync.Mutex
	users []*Gateway // the gateways that use it, oldest first
}

// gateways returns the gateways that use s now.
func (s *fedShare) gateways() []*Gateway {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.users)
}

// onListChanged is the client's OnListChanged: each gateway using it
// re-reads the upstream's tools for its own catalog.
func (s *fedShare) onListChanged(name string) func() {
	return func() {
		for _, g := range s.gateways() {
			g.relist(name)
		}
	}
}

// onResourceUpdated is the client's OnResourceUpdated: each gateway tells
// the sessions it holds that subscribed (the others' are not its own).
func (s *fedShare) onResourceUpdated() func(context.Context, *mcp.ResourceUpdatedNotificationParams, []*federation.Subscription) {
	return func(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams, to []*federation.Subscription) {
		for _, g := range s.gateways() {
			g.resourceUpdated(&s.u)(ctx, p, to)
		}
	}
}

// join adds g to the gateways that use s, unless the last one has left
// (the client is closed or closing): it reports whether it did.
func (s *fedShare) join(g *Gateway) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.users) == 0 {
		return false
	}
	s.users = append(s.users, g)
	return true
}

// leave removes g, and closes the client when no gateway uses it any more.
func (s *fedShare) leave(g *Gateway) {
	s.mu.Lock()
	n := len(s.users)
	s.users = slices.DeleteFunc(s.users, func(x *Gateway) bool { return x == g })
	last := len(s.users) == 0 && n > 0 // g was the last (a second Close finds it gone)
	s.mu.Unlock()
	if last && s.up != nil {
		s.up.Close()
	}
}

// reuse returns the client prev made for u, joined by g, when g may keep it
// (see fedShare); nil otherwise.
func (g *Gateway) reuse(prev *Gateway, u *config.Upstream) *fedShare {
	if prev == nil || prev == g {
		return nil
	}
	s := prev.fedShares[u.Name]
	if s == nil || !reflect.DeepEqual(s.u, *u) {
		return nil
	}
	sameTracing := prev.tracer == nil && g.tracer == nil ||
		g.opts.TracerProvider != nil && prev.opts.TracerProvider == g.opts.TracerProvider && reflect.DeepEqual(prev.cfg.Tracing, g.cfg.Tracing)
	if prev.cfg.Stateful != g.cfg.Stateful || prev.opts.Logger != g.opts.Logger || !sameTracing ||
		!reflect.DeepEqual(prev.upstreamTracing(), g.upstreamTracing()) || !s.join(g) {
		return nil
	}
	return s
}
