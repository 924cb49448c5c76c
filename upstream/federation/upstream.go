package federation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/internal/direct"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures an [Upstream]. The zero value is usable; [New]
// copies it.
type Options struct {
	// Name is the upstream's name, in logs and error texts.
	Name string
	// Tracing is what each call's POST carries to follow it (request id,
	// trace context) and whether it gets a span: see
	// upstream.TraceTransport. The zero value passes a caller's
	// traceparent on, nothing more.
	Tracing upstream.Tracing
	// Logger receives the upstream's logs; nil: discard. Tokens,
	// Authorization values and claims are never logged.
	Logger *slog.Logger
	// HTTPClient sends the HTTP requests of url and server upstreams; nil:
	// a client with one tuned transport for this upstream. Its Transport
	// is wrapped to add each session's credential; its Timeout should be
	// zero, since a session holds a long-lived SSE stream.
	HTTPClient *http.Client
	// Getenv reads the gateway's environment (a Server slug's endpoint, a
	// stdio child's PATH and HOME); nil: os.Getenv.
	Getenv func(string) string
	// OnListChanged is called when the upstream's tools, prompts or
	// resources may have changed: a list_changed notification (debounced),
	// a refresh that found a difference, or the upstream answering a ping
	// after it was down or had never answered. It runs on its own goroutine,
	// never two at once.
	OnListChanged func()
	// MaxSessions bounds the sessions kept, one per credential, least
	// recently used closed first; default 256.
	MaxSessions int
	// IdleTimeout closes a session unused for that long; default 5m.
	IdleTimeout time.Duration
	// MaxConcurrent bounds the callers' requests in flight to the
	// upstream (tools/call, resources/read, prompts/get,
	// completion/complete, resources/subscribe); default
	// upstream.DefaultMaxConcurrent. One over it waits for a slot, up to
	// QueueTimeout (default upstream.DefaultQueueTimeout), and is then
	// refused with ErrBusy, nothing sent. The gateway's own listing and
	// pings take no slot: a busy upstream is not taken for a down one.
	MaxConcurrent int
	QueueTimeout  time.Duration
	// ResponseBudget, when set, counts each tools/call answer the lean hop
	// (Forward) reads, with what decoding it takes, before it is decoded,
	// and keeps it counted under the call's upstream.AnswerHold until the
	// answer is written (upstream.ResponseBudget.HoldAnswer): the gateway's
	// max_response_memory. No room within QueueTimeout: ErrBusy.
	ResponseBudget *upstream.ResponseBudget
	// Capabilities are the client capabilities offered to the upstream:
	// what the gateway's callers can answer through a [Relay] (sampling,
	// elicitation, roots). nil: none, so the upstream does not ask.
	Capabilities *mcp.ClientCapabilities
	// LogLevel, if set, asks the upstream for log notifications at that
	// level or above, relayed to [Relay.Log]; "": none are asked for.
	LogLevel mcp.LoggingLevel
	// OnResourceUpdated receives the upstream's
	// notifications/resources/updated for a URI that a [Subscription]
	// holds on the session it arrived on, with those subscriptions (never
	// another credential's), and p's URI as the upstream knows it. It runs
	// on go-sdk's goroutine for the notification, possibly several at
	// once. nil: updates are dropped.
	OnResourceUpdated func(ctx context.Context, p *mcp.ResourceUpdatedNotificationParams, to []*Subscription)
}

// Health is an upstream's state, as health pings see it.
type Health struct {
	// Up: the upstream answered a ping or a call, and fewer than three
	// pings in a row have failed since.
	Up bool
	// LastAnswered is when the upstream last answered; zero: never.
	LastAnswered time.Time
	// LastError is the last ping's failure; "" after a success.
	LastError string
}

// ErrDown is wrapped by the errors of calls made while the upstream is
// down (its last three pings failed): such calls fail at once and send
// nothing.
var ErrDown = errors.New("upstream is down")

type downError struct {
	name     string
	failures int
	last     time.Time
}

func (e *downError) Error() string {
	last := "never answered"
	if !e.last.IsZero() {
		last = "last answered " + e.last.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("federation: upstream %q is down (%d pings failed; %s)", e.name, e.failures, last)
}

func (e *downError) Is(target error) bool { return target == ErrDown }

// Upstream is the gateway's client to one upstream MCP server: a pool of
// sessions, one per credential (one in all for a stdio child), health
// pings and list refreshes. Its methods are safe for concurrent use.
type Upstream struct {
	admitted chan struct{} // Options.MaxConcurrent slots (admit)
	name     string
	cfg      Config // defaults applied
	endpoint string // "" for a stdio child
	opts     Options
	log      *slog.Logger
	client   *mcp.Client // offers the upstream Options.Capabilities
	bare     *mcp.Client // offers none; nil when client offers none too, or for a stdio child (bareFor)
	http     *http.Client
	// fwd sends Forward's POSTs (and its refusals and cancellations): http,
	// or, for a plain-http endpoint reached without a proxy and no
	// Options.HTTPClient, the same guard over upstream's direct transport,
	// whose calls write and read on the calling goroutine (see New).
	fwd     *http.Client
	fwdIdle interface{ CloseIdleConnections() } // fwd's own pool, closed by Close; nil: none
	getenv  func(string) string

	// Knobs, unexported so tests can shorten them.
	pingEvery    time.Duration // health ping period
	downAfter    int           // pings failed in a row before down
	backoffMin   time.Duration // first restart delay of a stdio child
	backoffMax   time.Duration
	healthyReset time.Duration // a child up this long restarts at backoffMin again
	debounce     time.Duration // list_changed coalescing
	terminate    time.Duration // a stdio child's grace after stdin closes
	grace        time.Duration // notifications still relayed after a call's result

	ctx    context.Context // cancelled by Close; background work only
	cancel context.CancelFunc

	mu        sync.Mutex
	shared    *slot // the credential-less session (the only one for stdio)
	pool      *simplelru.LRU[string, *slot]
	bySession map[*mcp.ClientSession]*slot
	progress  map[string]*call  // our progress token → the call that owns it
	versions  map[string]string // a protocol version offered → the one the upstream answered with, when they differ
	closed    bool

	subs subscriptions // resources/subscribe, counted (subscribe.go)

	seq         atomic.Uint64
	tokenPrefix string
	logs        atomic.Bool // the upstream has sent a log message

	hmu          sync.Mutex
	up           bool
	failures     int
	lastAnswered time.Time
	lastError    string
	listDigest   string

	lcMu    sync.Mutex
	lcTimer *time.Timer
	lcRun   sync.Mutex // one OnListChanged at a time

	startOnce sync.Once
	wg        sync.WaitGroup
}

// New returns an upstream for cfg. It validates cfg and resolves a Server
// slug's endpoint, but connects nothing: [Upstream.Start] or the first
// call does.
func New(cfg Config, opts *Options) (*Upstream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	u := &Upstream{cfg: cfg.WithDefaults()}
	if opts != nil {
		u.opts = *opts
	}
	u.name = u.opts.Name
	u.log = u.opts.Logger
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	u.log = u.log.With("upstream", u.name)
	u.getenv = u.opts.Getenv
	if u.getenv == nil {
		u.getenv = os.Getenv
	}
	u.opts.MaxConcurrent = cmp.Or(max(u.opts.MaxConcurrent, 0), upstream.DefaultMaxConcurrent)
	u.opts.QueueTimeout = cmp.Or(max(u.opts.QueueTimeout, 0), upstream.DefaultQueueTimeout)
	u.admitted = make(chan struct{}, u.opts.MaxConcurrent)
	if u.opts.MaxSessions <= 0 {
		u.opts.MaxSessions = 256
	}
	if u.opts.IdleTimeout <= 0 {
		u.opts.IdleTimeout = 5 * time.Minute
	}
	switch {
	case cfg.URL != "":
		u.endpoint = cfg.URL
	case cfg.Server != "":
		ep, err := ServerEndpoint(cfg.Server, u.getenv)
		if err != nil {
			return nil, fmt.Errorf("federation: mcp.%w", err)
		}
		if err := checkURL(ep); err != nil {
			return nil, fmt.Errorf("federation: mcp.server %q: %w", cfg.Server, err)
		}
		u.endpoint = ep
	}
	if u.endpoint != "" {
		hc := http.Client{Transport: upstream.NewTransport()} // one per upstream, tuned as a REST upstream's
		if u.opts.HTTPClient != nil {
			hc = *u.opts.HTTPClient
		}
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		base = upstream.TraceTransport(base, u.opts.Tracing, u.name)
		hc.Transport = &guard{base: base, origin: origin(u.endpoint), name: u.name, max: u.cfg.MaxResponseBytes}
		// No redirect is followed, to another origin or to another path
		// of this one: the call and the caller's token go to the
		// configured endpoint and nowhere else (a path-routed origin may
		// front other services). A 3xx is the upstream's failure.
		hc.CheckRedirect = noRedirects
		u.http = &hc
		u.fwd = u.http
		if pu, err := url.Parse(u.endpoint); err == nil && u.opts.HTTPClient == nil && direct.Usable(pu, http.ProxyFromEnvironment) {
			// Forward's hop is the measured one (docs/performance.md,
			// "Federated tools/call"): net/http's transport hands each
			// request to a write and a read goroutine of its connection;
			// this one does neither. go-sdk's session (its handshake, its
			// GET stream) stays on net/http's.
			dt := direct.New(pu, upstream.NewTransport())
			u.fwd = &http.Client{Transport: &guard{base: upstream.TraceTransport(dt, u.opts.Tracing, u.name), origin: origin(u.endpoint), name: u.name, max: u.cfg.MaxResponseBytes},
				CheckRedirect: noRedirects}
			u.fwdIdle = dt
		}
	}
	u.pingEvery = 15 * time.Second
	u.downAfter = 3
	u.backoffMin = time.Second
	u.backoffMax = 30 * time.Second
	u.healthyReset = time.Minute
	u.debounce = 250 * time.Millisecond
	u.terminate = 2 * time.Second
	u.grace = time.Second
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.bySession = make(map[*mcp.ClientSession]*slot)
	u.progress = make(map[string]*call)
	u.versions = make(map[string]string)
	u.tokenPrefix = fmt.Sprintf("mcpgate-%x-", randUint64())
	pool, err := simplelru.NewLRU(u.opts.MaxSessions, func(_ string, s *slot) {
		// Called under u.mu. Close closes every slot itself, and waits:
		// a retire's close of its own would outlive Close.
		if !u.closed {
			s.retire()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	u.pool = pool
	u.shared = newSlot(u, "")
	u.client = u.newClient(u.opts.Capabilities)
	if offers(u.opts.Capabilities) && u.endpoint != "" {
		u.bare = u.newClient(nil)
	}
	return u, nil
}

// Name is the upstream's name from [Options].
func (u *Upstream) Name() string { return u.name }

// Config is the upstream's configuration, defaults applied.
func (u *Upstream) Config() Config { return u.cfg }

// Start begins the background work: the first connection, health pings
// every 15s and list refreshes. It does not block; an upstream that cannot
// be reached is tried again at the next ping. Calling it again does
// nothing. Work ends at [Upstream.Close].
func (u *Upstream) Start(ctx context.Context) {
	u.startOnce.Do(func() {
		u.mu.Lock()
		closed := u.closed
		if !closed {
			u.wg.Add(1)
		}
		u.mu.Unlock()
		if closed {
			return
		}
		go func() {
			defer u.wg.Done()
			u.run(ctx)
		}()
	})
}

func (u *Upstream) run(ctx context.Context) {
	stop := u.ctx
	if ctx != nil {
		var cancel context.CancelFunc
		stop, cancel = context.WithCancel(u.ctx)
		defer context.AfterFunc(ctx, cancel)()
		defer cancel()
	}
	u.probe(stop)
	if u.upNow() {
		u.refresh(stop)
	}
	ping := time.NewTicker(u.pingEvery)
	defer ping.Stop()
	var refresh <-chan time.Time
	if u.cfg.Refresh > 0 {
		t := time.NewTicker(u.cfg.Refresh)
		defer t.Stop()
		refresh = t.C
	}
	for {
		select {
		case <-stop.Done():
			return
		case <-ping.C:
			u.probe(stop)
			u.sweep(time.Now())
			u.keepSubscribed(stop)
		case <-refresh:
			u.refresh(stop)
		}
	}
}

// probe pings the upstream on the shared session, connecting it first if
// need be, and records the outcome.
func (u *Upstream) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, min(u.cfg.Timeout, 10*time.Second))
	defer cancel()
	s := u.shared
	cs, err := s.session(ctx)
	if err == nil {
		err = cs.Ping(ctx, nil)
		if err != nil && !answered(err) {
			s.drop(cs) // the next probe starts a new session
		} else {
			err = nil // a JSON-RPC error is an answer: the upstream is alive
		}
	}
	if u.ctx.Err() != nil {
		return
	}
	u.record(err)
}

func (u *Upstream) record(err error) {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	if err == nil {
		if !u.up {
			if u.failures >= u.downAfter {
				u.log.Info("upstream is up again")
			}
			// Up for the first time, or again: what it offers may be new
			// (a restart, or a start-up listing that found it unreachable).
			u.listChanged(0)
		}
		u.up = true
		u.failures = 0
		u.lastAnswered = time.Now()
		u.lastError = ""
		return
	}
	u.failures++
	u.lastError = err.Error()
	if u.failures == u.downAfter {
		u.log.Warn("upstream is down", "failures", u.failures, "error", err)
	} else {
		u.log.Debug("upstream ping failed", "failures", u.failures, "error", err)
	}
	if u.failures >= u.downAfter {
		u.up = false
	}
}

// answeredNow notes a successful call.
func (u *Upstream) answeredNow() {
	u.hmu.Lock()
	u.lastAnswered = time.Now()
	if u.failures < u.downAfter {
		u.up = true
	}
	u.hmu.Unlock()
}

func (u *Upstream) upNow() bool {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	return u.up
}

// downErr is non-nil while calls must fail fast.
func (u *Upstream) downErr() error {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	if u.failures < u.downAfter {
		return nil
	}
	return &downError{name: u.name, failures: u.failures, last: u.lastAnswered}
}

// Status is the upstream's health, for /metrics and readiness.
func (u *Upstream) Status() Health {
	u.hmu.Lock()
	defer u.hmu.Unlock()
	return Health{Up: u.up, LastAnswered: u.lastAnswered, LastError: u.lastError}
}

// refresh lists the upstream again and calls OnListChanged when the
// listing differs from the last one seen.
func (u *Upstream) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	l, err := u.List(ctx)
	if err != nil {
		u.log.Debug("upstream refresh failed", "error", err)
		return
	}
	d := l.digest()
	u.hmu.Lock()
	prev := u.listDigest
	u.listDigest = d
	u.hmu.Unlock()
	if prev != "" && prev != d {
		u.log.Info("upstream lists changed")
		u.listChanged(0)
	}
}

// listChanged calls OnListChanged after delay, coalescing the calls that
// arrive meanwhile.
func (u *Upstream) listChanged(delay time.Duration) {
	if u.opts.OnListChanged == nil {
		return
	}
	u.lcMu.Lock()
	defer u.lcMu.Unlock()
	if u.lcTimer != nil {
		return // one is pending: it will see this change too
	}
	u.lcTimer = time.AfterFunc(delay, func() {
		u.lcMu.Lock()
		u.lcTimer = nil
		u.lcMu.Unlock()
		if u.ctx.Err() != nil {
			return
		}
		u.lcRun.Lock()
		defer u.lcRun.Unlock()
		u.opts.OnListChanged()
	})
}

// Close closes every session, kills stdio children (their whole process
// group) and stops the background work. Calls in flight fail.
func (u *Upstream) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	slots := append([]*slot{u.shared}, u.pool.Values()...)
	u.pool.Purge() // closed below, not retired (see the pool's eviction callback)
	u.mu.Unlock()
	u.cancel()
	u.lcMu.Lock()
	if u.lcTimer != nil {
		u.lcTimer.Stop()
		u.lcTimer = nil
	}
	u.lcMu.Unlock()
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Go(s.close)
	}
	wg.Wait()
	u.wg.Wait()
	if u.fwdIdle != nil {
		u.fwdIdle.CloseIdleConnections()
	}
	return nil
}

// sweep closes the sessions idle longer than IdleTimeout. A session that
// holds resource subscriptions is not idle: closing it would end them.
func (u *Upstream) sweep(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for range u.pool.Len() {
		k, s, ok := u.pool.GetOldest()
		if !ok || s.busy() || now.Sub(s.used()) < u.opts.IdleTimeout {
			return
		}
		if u.subs.holds(k) {
			u.pool.Get(k) // to the front: the older ones behind it are looked at
			continue
		}
		u.pool.Remove(k) // retires s
	}
}

// noRedirects is both clients' CheckRedirect: the 3xx answer is returned
// as it is, and the request is not sent again anywhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
