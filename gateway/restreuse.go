package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/mcpgate/mcpgate/upstream"
)

// A REST upstream's transport kept across a reload. A reload builds a new
// Gateway beside the old one (Front.Replace) with new upstream.Clients; each
// would make a transport of its own, so every reload would dial every
// upstream again (and redo each TLS handshake), while the old gateway's
// keep-alive connections stayed open until their idle timeout. With
// Options.Previous, the client of a REST upstream — the one a playbook
// engine's runner sends through as well — whose transport would be made
// alike is given the previous gateway's transport, and with it its pool of
// idle connections. Only the transport is shared: the Client (timeout,
// max_concurrent, queue_timeout, the response budget, tracing) is the new
// configuration's. A playbook http resource's origin keeps its transport
// the same way.
//
// Alike means (transportKey): the base URL's scheme and host (host:port as
// written: "api:80" and "api" are two), and whether the upstream uses
// net/http's transport (direct_transport: false) or may use the direct one.
// Nothing else of the configuration reaches a transport: the base URL's
// path is the Client's, credentials are set per request, and the proxy
// environment (HTTP_PROXY, NO_PROXY) and the system's CA roots are read
// once per process. An in-process upstream (Handler) has no transport.
// An upstream is matched by name first, then — renamed — to one of the
// previous gateway's upstreams that the new configuration no longer has,
// with the same transport, that no upstream of the new gateway holds yet:
// two upstreams never share one (each keeps its own pool, as without a
// reload).
//
// A transport is closed (upstream.CloseTransport: its idle connections,
// and, the direct transport, those calls in flight give back afterwards)
// when the last gateway that uses it is closed — or a New that failed lets
// go of it —, so a transport the new gateway did not keep is closed with
// the old gateway, which Front closes once it serves nothing and its
// playbook runs have ended. Nothing of this is on a call's path: the
// transports are chosen while New builds the clients.
type transportShare struct {
	key transportKey
	rt  http.RoundTripper

	mu    sync.Mutex
	users []*Gateway // the gateways that send on rt; none: rt is closed
}

// transportUse is a gateway's use of a transport: by the client of an
// upstream (kind "upstream", name its name) or of a playbook resource
// origin (kind "playbook resource", name the origin).
type transportUse struct {
	kind, name string
	share      *transportShare
}

// transportKey is what shapes a remote client's transport (see
// upstream.RemoteTransport).
type transportKey struct {
	scheme, host string
	netHTTP      bool
}

// join adds g to the gateways that use s, unless s is closed (its last
// user has left) or g uses it already (for another upstream): it reports
// whether it did.
func (s *transportShare) join(g *Gateway) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.users) == 0 || slices.Contains(s.users, g) {
		return false
	}
	s.users = append(s.users, g)
	return true
}

// leave removes g, and closes the transport when no gateway uses it any
// more. A second leave of the same gateway does nothing.
func (s *transportShare) leave(g *Gateway) {
	s.mu.Lock()
	n := len(s.users)
	s.users = slices.DeleteFunc(s.users, func(x *Gateway) bool { return x == g })
	last := len(s.users) == 0 && n > 0
	s.mu.Unlock()
	if last {
		upstream.CloseTransport(s.rt)
	}
}

// remoteTransport returns the transport for a remote client of base — an
// upstream's (kind "upstream", name its name) or a playbook resource
// origin's — kept from Options.Previous when it has one alike (see
// transportShare), else a new one that g closes. It returns nil when base
// does not parse: upstream.NewRemote then says why.
func (g *Gateway) remoteTransport(kind, name, base string, netHTTP bool) http.RoundTripper {
	u, err := url.Parse(base)
	if err != nil {
		return nil
	}
	key := transportKey{scheme: u.Scheme, host: u.Host, netHTTP: netHTTP}
	s := g.keptTransport(kind, name, key)
	if s == nil {
		rt, err := upstream.RemoteTransport(base, netHTTP)
		if err != nil {
			return nil
		}
		s = &transportShare{key: key, rt: rt, users: []*Gateway{g}}
	}
	g.transports = append(g.transports, transportUse{kind: kind, name: name, share: s})
	return s.rt
}

// keptTransport returns Options.Previous's transport share for key, joined
// by g: the one of the same kind and name, else — an upstream renamed —
// the one of an upstream g's configuration no longer has, that no upstream
// of g holds yet. Nil when there is none.
func (g *Gateway) keptTransport(kind, name string, key transportKey) *transportShare {
	prev := g.opts.Previous
	if prev == nil || prev == g {
		return nil
	}
	for _, sameName := range []bool{true, false} {
		for _, use := range prev.transports {
			if use.kind != kind || use.share.key != key || (use.name == name) != sameName {
				continue
			}
			if !sameName && (kind != "upstream" || g.hasUpstream(use.name)) {
				continue // that upstream's own, when g makes its client
			}
			if use.share.join(g) {
				return use.share
			}
		}
	}
	return nil
}

// hasUpstream reports whether g's configuration has an upstream named name.
func (g *Gateway) hasUpstream(name string) bool {
	return slices.ContainsFunc(g.cfg.Upstreams, func(u Upstream) bool { return u.Name == name })
}

// closeTransports lets go of g's transports: each is closed when g was
// the last gateway using it.
func (g *Gateway) closeTransports() {
	for _, use := range g.transports {
		use.share.leave(g)
	}
}
