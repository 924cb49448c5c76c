package federation

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Credential is the Authorization header value sent to the upstream on a
// session's requests ("" for none). Sessions are keyed by its hash; it is
// never logged. A stdio child gets none: it has one session.
type Credential string

// LogValue keeps a credential out of logs.
func (Credential) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// String keeps a credential out of error texts and debug prints; convert
// it with string(c) to use it.
func (Credential) String() string { return "REDACTED" }

// key is the pool key of a credential: a hash, so the pool holds no token
// in a form a heap dump or a debug print would show.
func (c Credential) key() string {
	if c == "" {
		return ""
	}
	h := sha256.Sum256([]byte(c))
	return hex.EncodeToString(h[:16])
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// slot holds the session of one credential: at most one live
// *mcp.ClientSession at a time, connected on demand and replaced when the
// upstream forgets it.
type slot struct {
	u       *Upstream
	cred    Credential
	version string // offered first at connect; "": the configured or go-sdk's latest
	// bare: the session is made by the client that offers the upstream no
	// capability (Upstream.bare), for calls whose caller can be asked
	// nothing (see Upstream.bareFor).
	bare bool

	mu         sync.Mutex
	cs         *mcp.ClientSession
	connecting *attempt // the connect under way; nil: none
	calls      []*call  // in flight or just ended (see grace), oldest first
	active     int      // calls in flight
	lastUse    time.Time
	retired    bool // out of the pool: close when the last call ends
	child      *child
	closing    bool
	backoff    time.Duration // a stdio child's next restart delay
	notUntil   time.Time     // a stdio child is not restarted before this
}

func newSlot(u *Upstream, cred Credential) *slot {
	return &slot{u: u, cred: cred, lastUse: time.Now()}
}

func (s *slot) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active > 0
}

func (s *slot) used() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUse
}

// poolKey is the pool key of the slot of cred whose session offers
// version first; "" names the shared slot (no credential and no version,
// or a stdio child, which has one session).
//
// A bare session's key is the same key marked "bare|" (never ""): it is a
// session of its own beside the one that offers the upstream capabilities.
// A stdio child's one session is never bare.
func (u *Upstream) poolKey(cred Credential, version string, bare bool) string {
	switch {
	case u.endpoint == "":
		return ""
	case bare:
		return "bare|" + u.poolKey(cred, version, false)
	case cred == "" && version == "":
		return ""
	case version != "":
		return versionKey(cred, version)
	}
	return cred.key()
}

// slotFor returns the slot of cred, adding it to the pool if need be.
func (u *Upstream) slotFor(cred Credential) *slot {
	return u.slotOf(cred, "", false)
}

// slotOf returns the slot of cred whose session offers version first ("":
// the negotiated one of slotFor), of a bare session when bare (and the
// upstream has a bare client: Upstream.bare), adding it to the pool if need
// be. A stdio child has one session, whatever the version.
func (u *Upstream) slotOf(cred Credential, version string, bare bool) *slot {
	bare = bare && u.bare != nil
	k := u.poolKey(cred, version, bare)
	if k == "" {
		return u.shared
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if v, ok := u.versions[version]; ok {
		version = v // the upstream answers that offer with v: share v's session
		k = u.poolKey(cred, version, bare)
	}
	if s, ok := u.pool.Get(k); ok {
		return s
	}
	s := newSlot(u, cred)
	s.version = version
	s.bare = bare
	if u.closed {
		s.retired = true
		return s
	}
	u.pool.Add(k, s)
	return s
}

// attempt is one connect under way; its fields are set before done
// closes.
type attempt struct {
	done chan struct{}
	cs   *mcp.ClientSession
	err  error
}

// session returns the slot's live session, connecting one if there is
// none. Concurrent callers share one connect; each waits at most until its
// ctx ends. The connect itself runs under the call timeout but not under
// any one caller's cancellation, so a caller that gives up does not break
// the handshake for the others.
func (s *slot) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	if s.cs != nil {
		cs := s.cs
		s.mu.Unlock()
		return cs, nil
	}
	if s.closing {
		s.mu.Unlock()
		return nil, errors.New("upstream closed")
	}
	a := s.connecting
	if a == nil {
		a = &attempt{done: make(chan struct{})}
		s.connecting = a
		go s.connect(a)
	}
	s.mu.Unlock()
	select {
	case <-a.done:
		return a.cs, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// connect makes a session and publishes it, or the error, in a.
func (s *slot) connect(a *attempt) {
	u := s.u
	var (
		cs      *mcp.ClientSession
		ch      *child
		release = func() {}
	)
	err := func() error {
		if wait := time.Until(s.restartAt()); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-u.ctx.Done():
				return errors.New("upstream closed")
			}
		}
		ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
		defer cancel()
		var (
			t   mcp.Transport
			err error
		)
		if u.endpoint == "" {
			t, ch, err = u.command()
			if err != nil {
				return err
			}
		} else {
			t, release = u.httpTransport(s.cred)
		}
		client := u.client
		if s.bare {
			client = u.bare
		}
		cs, err = client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: cmp.Or(s.version, u.cfg.ProtocolVersion)})
		if err != nil {
			release()
			if ch != nil {
				ch.kill()
			}
			return err
		}
		if ch != nil {
			ch.started()
		}
		res := cs.InitializeResult()
		u.log.Debug("upstream session started", "protocol", res.ProtocolVersion)
		if s.version != "" && res.ProtocolVersion != s.version {
			// Offered s.version, the upstream speaks another: later
			// callers of s.version go on that version's session.
			u.mu.Lock()
			u.versions[s.version] = res.ProtocolVersion
			u.mu.Unlock()
		}
		if lvl := u.opts.LogLevel; lvl != "" && res.Capabilities != nil && res.Capabilities.Logging != nil && res.ProtocolVersion < "2026-07-28" {
			// From 2026-07-28 on the level travels in each request's _meta.
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: lvl}); err != nil {
				u.log.Debug("upstream refused logging/setLevel", "error", err)
			}
		}
		return nil
	}()

	u.mu.Lock()
	s.mu.Lock()
	closing := s.closing
	if err == nil && !closing {
		s.cs, s.child = cs, ch
		u.bySession[cs] = s
	}
	if closing && err == nil {
		err = errors.New("upstream closed")
	}
	a.err = err
	if err == nil {
		a.cs = cs
	}
	s.connecting = nil
	s.mu.Unlock()
	u.mu.Unlock()
	close(a.done)
	if err != nil {
		u.log.Debug("upstream connect failed", "error", err)
		if cs != nil {
			s.closeSession(cs)
			release()
			if ch != nil {
				ch.kill()
			}
		}
		return
	}
	go func() {
		s.watch(cs, ch)
		release()
	}()
	go u.resubscribe(s, cs) // a new session has none of the old one's subscriptions
}

// watch waits for cs to end and forgets it; a stdio child (ch) that ended,
// or was killed because its session failed, is started again after a
// backoff.
func (s *slot) watch(cs *mcp.ClientSession, ch *child) {
	_ = cs.Wait()
	u := s.u
	s.mu.Lock()
	if s.cs == cs {
		s.cs = nil
		s.child = nil
	}
	closing := s.closing || s.retired
	s.mu.Unlock()
	u.mu.Lock()
	delete(u.bySession, cs)
	u.mu.Unlock()
	if ch == nil {
		return
	}
	ch.kill()
	if closing || u.ctx.Err() != nil {
		return
	}
	delay := s.nextBackoff(ch.ran())
	u.log.Warn("upstream child exited; restarting", "ran", ch.ran().Round(time.Millisecond), "after", delay)
	go func() {
		ctx, cancel := context.WithTimeout(u.ctx, delay+u.cfg.Timeout)
		defer cancel()
		_, _ = s.session(ctx)
	}()
}

// nextBackoff returns the delay before the next restart of a child that
// ran for ran: backoffMin, doubling up to backoffMax, back to backoffMin
// after a child stayed up healthyReset.
func (s *slot) nextBackoff(ran time.Duration) time.Duration {
	u := s.u
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ran >= u.healthyReset || s.backoff == 0:
		s.backoff = u.backoffMin
	default:
		s.backoff = min(2*s.backoff, u.backoffMax)
	}
	s.notUntil = time.Now().Add(s.backoff)
	return s.backoff
}

func (s *slot) restartAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notUntil
}

// drop forgets cs if it is the slot's session and closes it: the next
// call connects anew.
func (s *slot) drop(cs *mcp.ClientSession) {
	s.mu.Lock()
	if s.cs != cs {
		s.mu.Unlock()
		return
	}
	s.cs = nil
	ch := s.child
	s.child = nil
	s.mu.Unlock()
	s.u.mu.Lock()
	delete(s.u.bySession, cs)
	s.u.mu.Unlock()
	go func() {
		s.closeSession(cs)
		if ch != nil {
			ch.kill()
		}
	}()
}

func (s *slot) closeSession(cs *mcp.ClientSession) {
	if err := cs.Close(); err != nil {
		s.u.log.Debug("closing upstream session", "error", err)
	}
}

// retire takes the slot out of service (evicted from the pool): its
// session closes now if idle, else when its last call ends.
func (s *slot) retire() {
	s.mu.Lock()
	s.retired = true
	idle := s.active == 0
	s.mu.Unlock()
	if idle {
		go s.close()
	}
}

// close ends the slot for good: closes its session, kills its child.
func (s *slot) close() {
	s.mu.Lock()
	s.closing = true
	cs, ch := s.cs, s.child
	s.cs, s.child = nil, nil
	a := s.connecting
	s.mu.Unlock()
	if a != nil {
		<-a.done // a connect under way closes what it made, seeing closing
	}
	if cs != nil {
		s.u.mu.Lock()
		delete(s.u.bySession, cs)
		s.u.mu.Unlock()
		s.closeSession(cs)
	}
	if ch != nil {
		ch.kill()
	}
}

// begin registers c as in flight.
func (s *slot) begin(c *call) {
	s.mu.Lock()
	c.ended.Store(false)
	c.returned.Store(false)
	s.calls = append(s.calls, c)
	s.active++
	s.lastUse = time.Now()
	s.mu.Unlock()
}

// end notes that c ended. It stays listed for the grace period, for the
// notifications that go-sdk hands over after the call's result: it queues
// them for a handler goroutine but delivers results at once.
func (s *slot) end(c *call) {
	s.mu.Lock()
	s.active--
	s.lastUse = time.Now()
	last := s.retired && s.active == 0
	s.mu.Unlock()
	c.ended.Store(true)
	time.AfterFunc(s.u.grace, func() {
		s.mu.Lock()
		if c.ended.Load() { // not sent again meanwhile
			s.calls = slices.DeleteFunc(s.calls, func(x *call) bool { return x == c })
		}
		s.mu.Unlock()
	})
	if last {
		go s.close()
	}
}

// endForwarded notes that a forwarded call ended (see Upstream.Forward):
// it leaves the list at once, as nothing of it comes through go-sdk's
// handlers afterwards (its notifications came on its own POST).
func (s *slot) endForwarded(c *call) {
	s.mu.Lock()
	s.active--
	s.lastUse = time.Now()
	last := s.retired && s.active == 0
	s.calls = slices.DeleteFunc(s.calls, func(x *call) bool { return x == c })
	s.mu.Unlock()
	c.ended.Store(true)
	c.returned.Store(true)
	if last {
		go s.close()
	}
}

// inFlight returns the calls in flight on cs, oldest first.
func (u *Upstream) inFlight(cs *mcp.ClientSession) []*call {
	u.mu.Lock()
	s := u.bySession[cs]
	u.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// httpTransport is the go-sdk transport of a session with credential
// cred; release frees it once the session ended.
func (u *Upstream) httpTransport(cred Credential) (t mcp.Transport, release func()) {
	hc := u.http
	if cred != "" {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c := *hc
		c.Transport = &credTransport{base: base, origin: origin(u.endpoint), value: string(cred)}
		hc = &c
	}
	if u.cfg.Transport == TransportSSE {
		ctx, cancel := context.WithCancel(u.ctx)
		return &sseTransport{SSEClientTransport: mcp.SSEClientTransport{Endpoint: u.endpoint, HTTPClient: hc}, life: ctx}, cancel
	}
	return &mcp.StreamableClientTransport{Endpoint: u.endpoint, HTTPClient: hc}, func() {}
}

// sseTransport outlives the context it is connected with: go-sdk's SSE
// client holds its event stream with the Connect context, so a connect
// timeout would end the session (the Streamable client detaches it).
type sseTransport struct {
	mcp.SSEClientTransport
	life context.Context
}

func (t *sseTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(t.life)
	stop := context.AfterFunc(ctx, cancel) // bounded while connecting
	c, err := t.SSEClientTransport.Connect(life)
	if !stop() {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("connecting: %w", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	_ = cancel // ends with t.life, released when the session ended
	return c, nil
}

// credTransport sets Authorization on the requests to the session's
// endpoint origin only: a redirect, or an SSE endpoint event naming
// another host, does not carry the caller's credential away.
type credTransport struct {
	base   http.RoundTripper
	origin string
	value  string
}

func (t *credTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL.String()) != t.origin {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change the request
	r.Header.Set("Authorization", t.value)
	return t.base.RoundTrip(r)
}

func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + host + ":" + port
}

// answered reports whether err is the upstream's own JSON-RPC answer, as
// opposed to a failure to reach it. go-sdk reports transport failures as
// JSON-RPC errors of its own with codes -32003…-32005 ("client is
// closing", "server is closing", "rejected by transport").
func answered(err error) bool {
	var (
		he *hostileError
		ue *upstreamError
		be *busyError // the answer came, and the gateway had no room to keep it
	)
	if errors.As(err, &he) || errors.As(err, &ue) || errors.As(err, &be) {
		return true
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return false
	}
	switch je.Code {
	case -32003, -32004, -32005:
		return false
	}
	return true
}

// notSent reports whether err says the request never reached the upstream
// (or was refused before it ran): retrying it cannot run it twice.
func notSent(err error) bool {
	if errors.Is(err, mcp.ErrSessionMissing) {
		return true // the upstream answered 404 to this very request
	}
	var ns *notSentError
	if errors.As(err, &ns) {
		return true
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && (je.Code == -32005 || je.Code == -32003) {
		return true
	}
	return false
}

// boundedLine reads lines of at most max bytes from r, cutting longer
// ones, and passes each to f.
func boundedLines(r io.Reader, max int, f func(line string, cut bool)) {
	buf := make([]byte, 0, max)
	chunk := make([]byte, 4096)
	cut := false
	for {
		n, err := r.Read(chunk)
		for _, b := range chunk[:n] {
			if b == '\n' {
				f(string(buf), cut)
				buf, cut = buf[:0], false
				continue
			}
			if len(buf) < max {
				buf = append(buf, b)
			} else {
				cut = true
			}
		}
		if err != nil {
			if len(buf) > 0 {
				f(string(buf), cut)
			}
			return
		}
	}
}

// newClient is a go-sdk client of the upstream that offers it offer's
// sampling, elicitation and roots (nil: none): its handlers route what the
// upstream sends to the call it belongs to. An upstream has one that
// offers [Options.Capabilities] and, when that offers any, a bare one that
// offers none (see [Upstream.bareFor]).
func (u *Upstream) newClient(offer *mcp.ClientCapabilities) *mcp.Client {
	caps := &mcp.ClientCapabilities{} // nothing unless the gateway can relay it
	var roots bool
	if c := offer; c != nil {
		caps.Sampling = c.Sampling
		caps.Elicitation = c.Elicitation
		if c.RootsV2 != nil {
			caps.RootsV2 = c.RootsV2
			roots = true
		}
	}
	opts := &mcp.ClientOptions{
		Logger:       u.log,
		Capabilities: caps,
		// The multi-round-trip requests of 2026-07-28 are fulfilled by
		// the call that received them (see fulfil): go-sdk's own loop
		// answers roots/list from the client's root list, not the
		// caller's.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			u.listChanged(u.debounce)
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			u.listChanged(u.debounce)
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			u.listChanged(u.debounce)
		},
		ProgressNotificationHandler: u.onProgress,
		LoggingMessageHandler:       u.onLog,
		ResourceUpdatedHandler:      u.onResourceUpdated,
	}
	if caps.Sampling != nil {
		opts.CreateMessageHandler = u.onCreateMessage
	}
	if caps.Elicitation != nil {
		opts.ElicitationHandler = u.onElicit
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpgate", Version: "federation"}, opts)
	// go-sdk answers roots/list from the client's own root list; the
	// gateway's roots are its caller's, so intercept the method.
	//
	// elicitation/create is intercepted too: go-sdk's client checks a
	// form's requestedSchema before its handler runs, by a reading of the
	// enum forms stricter than the spec's (v1.8.0 refuses SEP-1330's
	// titled multi-select when its items also say type: string), which
	// would stop the request at the gateway where the caller's own client
	// might take it. The gateway relays; the schema is the calling
	// client's to judge, and the answer is still checked against it by
	// the gateway's server session (ServerSession.Elicit) on its way back.
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "elicitation/create" && caps.Elicitation != nil {
				p, _ := req.GetParams().(*mcp.ElicitParams)
				cs, _ := req.GetSession().(*mcp.ClientSession)
				if p == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create: no params"}
				}
				return u.onElicit(ctx, &mcp.ElicitRequest{Session: cs, Params: p})
			}
			if method != "roots/list" {
				return next(ctx, method, req)
			}
			if !roots {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "roots/list is not supported"}
			}
			p, _ := req.GetParams().(*mcp.ListRootsParams)
			cs, _ := req.GetSession().(*mcp.ClientSession)
			c, rctx, done := u.relayFor(ctx, cs, func(r *Relay) bool { return r.ListRoots != nil })
			if c == nil {
				return nil, noRelay("roots/list")
			}
			defer done()
			if p == nil {
				p = &mcp.ListRootsParams{}
			}
			return c.relay.ListRoots(rctx, p)
		}
	})
	return c
}

func noRelay(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s: no call in flight can answer it", method)}
}

// offers reports whether caps offers the upstream a capability a caller
// must answer: sampling, elicitation or roots.
func offers(caps *mcp.ClientCapabilities) bool {
	return caps != nil && (caps.Sampling != nil || caps.Elicitation != nil || caps.RootsV2 != nil)
}

// bareFor reports whether a call relayed by r goes on a bare session, one
// whose client offers the upstream no capability: when r cannot answer
// every request that [Options.Capabilities] lets the upstream send. An
// upstream decides from the capabilities a session declared whether a
// tool may ask its client (2025-11-25 and before), or reads them from
// each request's _meta, which go-sdk's client fills from the same offer
// (2026-07-28): a caller that cannot be asked (a 2026-07-28 caller of a
// stateful gateway has no session) must not be passed off as one that
// can, or a tool that needs sampling runs, asks, and fails instead of
// being refused with -32021 naming what it needs (docs/federation.md,
// "Capabilities"). Two clients, not one per combination: a relay that
// answers some of the offer but not all gets none of it.
func (u *Upstream) bareFor(r *Relay) bool {
	c := u.opts.Capabilities
	if u.bare == nil || c == nil {
		return false
	}
	return r == nil || c.Sampling != nil && r.CreateMessage == nil || c.Elicitation != nil && r.Elicit == nil || c.RootsV2 != nil && r.ListRoots == nil
}
