package federation

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions (resources/subscribe), counted.
//
// Each holder (for the gateway: one caller session's subscription to one
// URI) gets a [Subscription]; the upstream session of the holder's
// credential is subscribed to a URI once, when the first holder comes,
// and unsubscribed when the last one goes. An update the upstream sends on
// that session for that URI goes to [Options.OnResourceUpdated] with the
// holders on that session: an update on one credential's session never
// reaches another credential's holders, since in forward mode one URI may
// name a different resource for each.
//
// An upstream subscription lives as long as its session, so a session
// that replaces one (the upstream forgot the old one, a stdio child
// restarted, a credential's session was closed and opened again) is
// subscribed again to every URI still held on it (resubscribe). A session
// that ends with no call to notice it is found by the health ping, which
// also pings each credential's session that holds subscriptions, and
// replaced (keepSubscribed). A session that holds subscriptions is not
// closed as idle (sweep); one evicted from the pool by MaxSessions is
// opened again at the next ping.

// Subscription is one holder's share in the subscription of an upstream
// session to a resource; [Upstream.Subscribe] makes it. Its methods are
// safe for concurrent use.
type Subscription struct {
	u    *Upstream
	e    *subEntry
	done atomic.Bool
}

// URI is the resource's URI, as the upstream knows it.
func (s *Subscription) URI() string { return s.e.key.uri }

// subscriptions is an upstream's subscriptions, by upstream session (its
// slot's key) and URI.
type subscriptions struct {
	mu sync.Mutex
	m  map[subKey]*subEntry
}

type subKey struct{ slot, uri string }

// subEntry is the subscription of one slot's session to one URI.
type subEntry struct {
	key  subKey
	cred Credential    // to find the slot again, or open it anew
	sem  chan struct{} // held while the upstream is (un)subscribed: one at a time

	// Under subscriptions.mu.
	holders map[*Subscription]struct{}
	pending int // Subscribe, Unsubscribe and resubscribe calls at work on it

	// Under sem.
	on     *mcp.ClientSession // the session subscribed; nil: none
	warned bool               // a failed resubscribe was logged at warn
}

func (e *subEntry) lock(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *subEntry) unlock() { <-e.sem }

// slotKey is the key of cred's slot, as slotFor picks it: "" for the
// shared session. Subscriptions are made on slotFor's sessions only,
// never on the per-version ones of Forward (slotOf).
func (u *Upstream) slotKey(cred Credential) string { return u.poolKey(cred, "", false) }

// enter returns the entry of (cred's slot, uri), made if need be, and
// counts the caller at work on it until leave.
func (b *subscriptions) enter(k subKey, cred Credential) *subEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[subKey]*subEntry{}
	}
	e := b.m[k]
	if e == nil {
		e = &subEntry{key: k, cred: cred, sem: make(chan struct{}, 1), holders: map[*Subscription]struct{}{}}
		b.m[k] = e
	}
	e.pending++
	return e
}

// leave ends what enter began; an entry no one holds or works on is
// forgotten.
func (b *subscriptions) leave(e *subEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.pending--
	if e.pending == 0 && len(e.holders) == 0 && b.m[e.key] == e {
		delete(b.m, e.key)
	}
}

func (b *subscriptions) held(e *subEntry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(e.holders) > 0
}

// holds reports whether the slot of key holds a subscription.
func (b *subscriptions) holds(slot string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.m {
		if k.slot == slot && len(e.holders) > 0 {
			return true
		}
	}
	return false
}

// holdersOf returns the holders of (slot, uri).
func (b *subscriptions) holdersOf(k subKey) []*Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[k]
	if e == nil {
		return nil
	}
	out := make([]*Subscription, 0, len(e.holders))
	for s := range e.holders {
		out = append(out, s)
	}
	return out
}

// entered returns the held entries of slot (every slot when all), each
// entered: the caller leaves each.
func (b *subscriptions) entered(slot string, all bool) []*subEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*subEntry
	for k, e := range b.m {
		if (all || k.slot == slot) && len(e.holders) > 0 {
			e.pending++
			out = append(out, e)
		}
	}
	return out
}

// Subscribe subscribes cred's session to the resource uri (as the
// upstream knows it) for one holder, and returns the holder's share: the
// session is subscribed when it is not yet, else the share is counted.
// Updates go to [Options.OnResourceUpdated] until every share of the
// session's subscription is released ([Subscription.Unsubscribe]). A
// failure, the upstream's JSON-RPC error included, names the upstream.
func (u *Upstream) Subscribe(ctx context.Context, cred Credential, uri string) (*Subscription, error) {
	const method = "resources/subscribe"
	e := u.subs.enter(subKey{u.slotKey(cred), uri}, cred)
	defer u.subs.leave(e)
	if err := e.lock(ctx); err != nil {
		return nil, u.callErr(ctx, method, err)
	}
	defer e.unlock()
	if e.on == nil || e.on != u.slotFor(cred).current() {
		err := u.do(ctx, cred, method, true, nil, func(ctx context.Context, cs *mcp.ClientSession) error {
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				return err
			}
			e.on = cs
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	s := &Subscription{u: u, e: e}
	u.subs.mu.Lock()
	e.holders[s] = struct{}{}
	u.subs.mu.Unlock()
	return s, nil
}

// Unsubscribe releases the holder's share: updates stop reaching it at
// once, and the upstream session is unsubscribed when it was the last
// share. A session that is gone took its subscription along: nothing is
// sent then. Calling it again does nothing.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	if s == nil || !s.done.CompareAndSwap(false, true) {
		return nil
	}
	u, e := s.u, s.e
	u.subs.mu.Lock()
	delete(e.holders, s)
	e.pending++
	u.subs.mu.Unlock()
	defer u.subs.leave(e)
	// Not bounded by ctx: the share is released whatever happens, and an
	// upstream subscription that no one holds must not be left behind.
	// The wait is bounded by the call timeout of the one at work.
	_ = e.lock(context.Background())
	defer e.unlock()
	if u.subs.held(e) || e.on == nil {
		return nil
	}
	cs := e.on
	e.on = nil
	if u.sessionOf(e.key.slot) != cs {
		return nil // it ended, and its subscription with it
	}
	const method = "resources/unsubscribe"
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: e.key.uri})
	if final, err := u.outcome(ctx, method, err); final {
		return err
	}
	return nil // the session was lost, and its subscription with it
}

// current is the slot's live session; nil: none.
func (s *slot) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// sessionOf is the live session of the slot of key, without making a
// slot or a session; nil: none.
func (u *Upstream) sessionOf(key string) *mcp.ClientSession {
	s := u.shared
	if key != "" {
		u.mu.Lock()
		s, _ = u.pool.Peek(key)
		u.mu.Unlock()
		if s == nil {
			return nil
		}
	}
	return s.current()
}

// resubscribe subscribes cs, the new session of slot s, to every URI held
// on s's credential that it is not subscribed to yet. It runs for every
// session connected, most often with nothing to do.
func (u *Upstream) resubscribe(s *slot, cs *mcp.ClientSession) {
	if s.version != "" {
		return // a session of the fast path's (Forward): it holds no subscription
	}
	for _, e := range u.subs.entered(u.slotKey(s.cred), false) {
		u.resubscribeEntry(s, cs, e)
		u.subs.leave(e)
	}
}

func (u *Upstream) resubscribeEntry(s *slot, cs *mcp.ClientSession, e *subEntry) {
	if e.lock(u.ctx) != nil {
		return
	}
	defer e.unlock()
	if e.on == cs || !u.subs.held(e) || s.current() != cs {
		return // done, no longer wanted, or cs is already replaced (its successor does it)
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
	defer cancel()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: e.key.uri}); err != nil {
		e.on = nil // tried again at the next health ping (keepSubscribed)
		level := u.log.Debug
		if !e.warned {
			e.warned, level = true, u.log.Warn
		}
		level("upstream resource subscription not made again on a new session; its updates are lost until it is", "error", err)
		return
	}
	e.on, e.warned = cs, false
	u.log.Debug("upstream resource subscription made again on a new session")
}

// keepSubscribed looks, at each health ping, after the sessions that hold
// subscriptions: one that is gone, or that the upstream forgot (its ping
// fails), is replaced, and a session subscribed again to what it lost.
// The shared session is pinged by probe already. A few credentials'
// sessions are looked at at once, each within the call timeout.
func (u *Upstream) keepSubscribed(ctx context.Context) {
	if u.downErr() != nil {
		return // the ping that finds it up again reconnects the shared session
	}
	entries := u.subs.entered("", true)
	defer func() {
		for _, e := range entries {
			u.subs.leave(e)
		}
	}()
	var (
		wg   sync.WaitGroup
		seen = map[string]bool{}
		sem  = make(chan struct{}, keepSubscribedAtOnce)
	)
	for _, e := range entries {
		if seen[e.key.slot] {
			continue
		}
		seen[e.key.slot] = true
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
			defer cancel()
			s := u.slotFor(e.cred) // made again if the pool evicted it
			cs, err := s.session(ctx)
			if err != nil {
				return
			}
			if e.key.slot != "" {
				if err := cs.Ping(ctx, nil); err != nil && !answered(err) {
					s.drop(cs)
					if cs, err = s.session(ctx); err != nil {
						return
					}
				}
			}
			u.resubscribe(s, cs)
		})
	}
	wg.Wait()
}

// keepSubscribedAtOnce bounds the sessions keepSubscribed looks at at
// once.
const keepSubscribedAtOnce = 8

// onResourceUpdated relays an update to the holders of its URI on the
// session it arrived on.
func (u *Upstream) onResourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if req.Params == nil || u.opts.OnResourceUpdated == nil {
		return
	}
	u.mu.Lock()
	s := u.bySession[req.Session]
	u.mu.Unlock()
	if s == nil || s.version != "" {
		return // a session already closed, or one that subscribed to nothing (Forward's)
	}
	to := u.subs.holdersOf(subKey{u.slotKey(s.cred), req.Params.URI})
	if len(to) == 0 {
		// Nothing holds that URI on this session: an update for a URI
		// subscribed no more, or a sub-resource's (the specification allows
		// it), which the gateway cannot tell apart from another resource.
		u.log.Debug("upstream resource update not relayed: its URI is not subscribed on its session")
		return
	}
	u.opts.OnResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{Meta: withoutHopMeta(req.Params.Meta), URI: req.Params.URI}, to)
}
