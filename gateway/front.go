package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// A Front is what `mcpgate serve` puts on its listener: the gateway served
// now, which a reload replaces whole, and the process's drain state.
//
// A reload builds a new [Gateway] beside the old one (mcpgate serve does, on
// SIGHUP or --watch) and [Front.Replace] swaps it in atomically: every
// request that arrives afterwards is the new gateway's; a request the old one
// is serving finishes there, on the old catalog and clients, and the old
// gateway is closed (its MCP upstreams' sessions and children) once nothing
// is served on it any more. In stateful mode a request that carries the
// Mcp-Session-Id of a session the old gateway made goes on to the old
// gateway until that session ends (at session_timeout idle, or when the
// client deletes it): go-sdk keeps a session's state in the server that made
// it. The retired gateway then follows the new one (follow.go): the session
// is served the new catalog and told of its changes (list_changed), unless
// the reload changed what the session negotiated (the auth section, search
// mode, tasks), when it keeps the catalog it has.
//
// Draining ([Front.Drain]) answers /readyz 503 "draining" at once, so that
// load balancers stop sending new requests, while everything else is still
// served; the server's shutdown then stops accepting, and
// [Front.ReleasePlaybookCalls] answers the playbook calls still waiting.
//
// The Front's own metrics — drain state and reloads — live beside the
// current gateway's, on its metrics route: a reload starts the gateway's
// counters from zero, as a restart would (Prometheus' rate() reads a reset
// as one), while the Front's go on.
type Front struct {
	cur     atomic.Pointer[servedGateway]
	mu      sync.Mutex // serializes Replace and the retired list
	retired []*servedGateway
	hasOld  atomic.Bool // len(retired) > 0, read without mu
	reapDue bool        // a reap is scheduled for retired gateways' runs (mu)

	draining atomic.Bool
	probed   atomic.Bool  // /readyz was asked at least once (see Probed)
	streams  atomic.Int64 // GET /mcp requests being served: stateful sessions' SSE streams

	registry      *prometheus.Registry
	drainGauge    prometheus.Gauge
	reloadOK      prometheus.Gauge
	reloads       *prometheus.CounterVec
	reloadTime    prometheus.Gauge
	notLoaded     prometheus.Gauge
	metricsServed http.Handler
}

// maxRetired bounds the retired gateways a Front keeps. In stateful mode a
// retired gateway serves the sessions it made until they end, and a client
// that keeps its session alive keeps the whole gateway (catalog, upstream
// clients, shared-state connection) with it: without a bound, each reload
// would keep one more. Past it, Replace closes the oldest retired gateway's
// sessions (their clients get 404 and start a new session on the current
// gateway, as when their replica goes away); it is closed once the requests
// it is serving end.
const maxRetired = 4

// closedMark is a retired gateway's active count once it is reaped: a
// request that counts itself on it then sees a negative count and goes to
// the current gateway instead (see ServeHTTP).
const closedMark = -1 << 40

// servedGateway is one gateway the Front serves, or served: its handler and
// the requests being served on it.
type servedGateway struct {
	g      *Gateway
	h      http.Handler
	active atomic.Int64
	closed sync.Once
}

// NewFront returns a Front serving g.
func NewFront(g *Gateway) *Front {
	f := &Front{registry: prometheus.NewRegistry()}
	f.drainGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcpgate_draining",
		Help: "1 while the gateway drains (SIGTERM or SIGINT received: /readyz answers 503), else 0.",
	})
	f.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcpgate_config_reload_success",
		Help: "1 if the last reload (SIGHUP, --watch, or a retry of an upstream not loaded) succeeded or none was tried, 0 if it failed and the previous state is still served.",
	})
	f.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_config_reloads_total",
		Help: "Reloads tried, by outcome (success, failure).",
	}, []string{"outcome"})
	f.reloadTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcpgate_config_last_reload_success_timestamp_seconds",
		Help: "When the state served now was built (start-up or the last successful reload), in Unix seconds.",
	})
	f.notLoaded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "mcpgate_upstreams_not_loaded",
		Help: "Upstreams served without for now: their remote documents could not be fetched; retried with backoff.",
	})
	f.reloadOK.Set(1)
	f.reloads.WithLabelValues("success")
	f.reloads.WithLabelValues("failure")
	f.registry.MustRegister(f.drainGauge, f.reloadOK, f.reloads, f.reloadTime, f.notLoaded)
	f.install(g)
	f.metricsServed = promhttp.HandlerFor(prometheus.Gatherers{f.registry, prometheus.GathererFunc(f.gatherCurrent)},
		promhttp.HandlerOpts{MaxRequestsInFlight: maxScrapesInFlight, Timeout: 10 * time.Second})
	return f
}

// install makes g the gateway served.
func (f *Front) install(g *Gateway) *servedGateway {
	s := &servedGateway{g: g, h: g.Handler()}
	f.notLoaded.Set(float64(len(g.catalog.NotLoaded)))
	f.reloadTime.SetToCurrentTime()
	return f.cur.Swap(s)
}

func (f *Front) gatherCurrent() ([]*dto.MetricFamily, error) {
	if reg := f.cur.Load().g.Metrics(); reg != nil {
		return reg.Gather()
	}
	return nil, nil
}

// Current is the gateway served now.
func (f *Front) Current() *Gateway { return f.cur.Load().g }

// Replace serves g from now on, and retires the gateway served until now:
// it finishes what it is serving (and, stateful, its sessions) and is then
// closed.
func (f *Front) Replace(g *Gateway) {
	f.mu.Lock()
	for name, r := range g.runners {
		// A re-send of a call whose run the old gateway drives joins it.
		r.Succeed(f.cur.Load().g.runners[name])
	}
	// g's initializes count the sessions of the gateways kept from the
	// first request it serves, not from the end of Replace.
	f.linkSessionBooks(g)
	old := f.install(g)
	f.reloadOK.Set(1)
	f.reloads.WithLabelValues("success").Inc()
	f.retired = append(f.retired, old)
	f.hasOld.Store(true)
	// What serves nothing is closed first: a request that was on its way to
	// it then goes to g (closedMark). Every stateful gateway still kept
	// follows, with sessions or not: one may be serving an initialize that
	// reached it before the swap, whose session would otherwise never
	// follow.
	f.reapLocked()
	type following struct {
		g        *Gateway
		sessions int
	}
	var follows []following
	for _, s := range f.retired {
		// Their stateful sessions are served by g from now on, and told
		// what changed (follow.go), or keep their catalog, logged why.
		if !s.g.cfg.Stateful {
			continue
		}
		n := s.g.sessionCount()
		if ok, why := s.g.canFollow(g); ok {
			s.g.followGateway(g)
			follows = append(follows, following{s.g, n})
		} else if n > 0 {
			g.logger.Warn("reload: stateful sessions begun before it keep the catalog they have until they end", "sessions", n, "why", why)
		}
	}
	for _, s := range f.retired[:max(len(f.retired)-maxRetired, 0)] {
		s.closeSessions()
	}
	f.reapLocked()
	f.mu.Unlock()
	// Their servers show g's tools (and prompts and resources), outside
	// the lock, which every request naming a session takes while a retired
	// gateway is kept: the sessions' requests go on meanwhile (the first
	// time a gateway is followed, its definitions' digests take tens of ms).
	for _, fl := range follows {
		added, changed, removed, others := fl.g.mirror()
		if fl.sessions > 0 {
			g.logger.Info("reload: stateful sessions begun before it follow it", "sessions", fl.sessions, "added", added, "changed", changed, "removed", removed, "prompts_and_resources_changed", others)
		}
	}
}

// ReloadFailed records a reload that failed: the state served is unchanged.
func (f *Front) ReloadFailed() {
	f.reloadOK.Set(0)
	f.reloads.WithLabelValues("failure").Inc()
}

// Reap closes the retired gateways that serve nothing any more. The Front
// reaps after each request on a retired gateway; mcpgate serve also calls
// it from time to time, for stateful sessions that ended idle.
func (f *Front) Reap() {
	if !f.hasOld.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reapLocked()
}

func (f *Front) reapLocked() {
	kept := f.retired[:0]
	running := false
	for _, s := range f.retired {
		runs := s.g.runsActive() > 0
		running = running || runs
		if s.g.cfg.Stateful && s.g.sessionCount() > 0 || runs || s.g.followed() {
			kept = append(kept, s)
			continue
		}
		if !s.g.lent.CompareAndSwap(0, closedMark) {
			// A follower's call runs on it (follow.go's lend), counted on
			// the follower, whose session's GET stream keeps its own
			// count from reaching zero: look again, as for runs.
			running = true
			kept = append(kept, s)
			continue
		}
		if !s.active.CompareAndSwap(0, closedMark) {
			s.g.lent.Add(-closedMark) // open again: the lenders' +1 -1 in between net out
			kept = append(kept, s)
			continue
		}
		if b := s.g.sessions; b != nil {
			b.others.Store(nil) // reaped: it keeps no other gateway reachable
		}
		s.closed.Do(func() { s.g.Close() })
	}
	clear(f.retired[len(kept):])
	f.retired = kept
	f.hasOld.Store(len(kept) > 0)
	f.linkSessionBooks(nil)
	if running && !f.reapDue {
		// No request will come to reap it when its runs end: look again.
		f.reapDue = true
		time.AfterFunc(reapRunsEvery, func() {
			f.mu.Lock()
			f.reapDue = false
			f.reapLocked()
			f.mu.Unlock()
		})
	}
}

// linkSessionBooks gives the session book of each gateway kept — current,
// retired, and next, the one Replace is about to serve, if not nil — the
// books of the others: their sessions live in this process too (see
// sessionBook.others). A retired gateway's book needs them as much as the
// current one's: an initialize whose body was still being read at the
// swap reserves on the gateway it reached. f.mu is held.
func (f *Front) linkSessionBooks(next *Gateway) {
	var books []*sessionBook
	add := func(g *Gateway) {
		if g != nil && g.sessions != nil && !slices.Contains(books, g.sessions) {
			books = append(books, g.sessions)
		}
	}
	for _, s := range f.retired {
		add(s.g)
	}
	add(f.cur.Load().g)
	add(next)
	for _, b := range books {
		others := make([]*sessionBook, 0, len(books)-1)
		for _, o := range books {
			if o != b {
				others = append(others, o)
			}
		}
		b.others.Store(&others)
	}
}

// reapRunsEvery is how often a retired gateway kept for its playbook runs is
// looked at again (see runsActive).
const reapRunsEvery = time.Second

// runsActive is the number of playbook runs g's runners drive. A retired
// gateway is kept while it has any, though it serves no request: a run
// whose client hung up lingers, and a re-send after the reload (on the new
// gateway, or on another replica) is counted in the shared state that this
// gateway's runner reads when the linger ends; closed, that store cannot
// answer, the runner decides alone, and it cancels the run the re-send
// waits for.
func (g *Gateway) runsActive() int {
	n := 0
	for _, r := range g.runners {
		n += r.Active()
	}
	return n
}

// Retired is the number of retired gateways still serving.
func (f *Front) Retired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.retired)
}

// Close closes every gateway, current and retired.
func (f *Front) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range append(f.retired, f.cur.Load()) {
		s.closed.Do(func() { s.g.Close() })
	}
	f.retired = nil
}

// Drain starts the drain: /readyz answers 503 "draining" from now on.
func (f *Front) Drain() {
	f.draining.Store(true)
	f.drainGauge.Set(1)
}

// Probed reports whether /readyz was ever asked. A drain waits drain_delay
// for the balancers that probe /readyz to see it answer 503; with no probe
// ever asked (a local run, a test) nobody is waiting to see it.
func (f *Front) Probed() bool { return f.probed.Load() }

// Draining reports whether Drain was called.
func (f *Front) Draining() bool { return f.draining.Load() }

// ReleasePlaybookCalls answers every playbook call still waiting, on every
// gateway, with its execution id, leaving the runs going (playbook.Runner's
// Release): the end of a drain.
func (f *Front) ReleasePlaybookCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range append(f.retired, f.cur.Load()) {
		for _, r := range s.g.runners {
			r.Release()
		}
	}
}

// CloseSessions ends every stateful session, on every gateway, which ends
// their standalone SSE streams: a server shutting down waits for requests,
// and a session's GET stream is one that never ends by itself.
//
// It closes nothing of a stateless gateway, whose server's sessions are
// each one POST being served: closing one would drop its answer.
func (f *Front) CloseSessions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range append(f.retired, f.cur.Load()) {
		s.closeSessions()
	}
}

// closeSessions ends the stateful sessions of s's gateway (none for a
// stateless one: see CloseSessions).
func (s *servedGateway) closeSessions() {
	if s.g.server == nil || !s.g.cfg.Stateful {
		return
	}
	for ss := range s.g.server.Sessions() {
		ss.Close()
		// The front door's record too (sessionLife): it learns of the
		// closes it does not make or see answered only at the session's
		// timeout, and would answer its calls until then.
		s.g.life.forget(ss.ID())
	}
}

// InFlight is the number of requests being served, on every gateway.
func (f *Front) InFlight() int64 {
	n := f.cur.Load().active.Load()
	if f.hasOld.Load() {
		f.mu.Lock()
		for _, s := range f.retired {
			n += max(s.active.Load(), 0)
		}
		f.mu.Unlock()
	}
	return n
}

// MetricsHandler serves the Front's metrics and the current gateway's on
// the metrics listener (Config.Metrics.Listen), or nil when metrics are off.
func (f *Front) MetricsHandler() http.Handler {
	if f.Current().metrics == nil {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != f.Current().cfg.Metrics.Path || r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		f.metricsServed.ServeHTTP(w, r)
	})
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := f.cur.Load()
	if f.hasOld.Load() {
		s = f.owner(r, s)
	}
	if r.URL.Path != "/mcp" {
		switch {
		case r.URL.Path == "/readyz" && !f.probed.Load():
			f.probed.Store(true)
		}
		switch {
		case r.URL.Path == "/readyz" && f.draining.Load():
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]any{"status": "draining", "reason": "the gateway is shutting down"})
			return
		case s.g.metrics != nil && s.g.cfg.Metrics.Listen == "" && r.URL.Path == s.g.cfg.Metrics.Path &&
			(r.Method == http.MethodGet || r.Method == http.MethodHead):
			f.metricsServed.ServeHTTP(w, r)
			return
		}
	}
	for s.active.Add(1) < 0 {
		// Reaped (closedMark) between the load and the count: it is
		// closed, and the current gateway serves this request.
		s.active.Add(-1)
		s = f.cur.Load()
	}
	defer func() {
		if s.active.Add(-1) == 0 && f.hasOld.Load() && s != f.cur.Load() {
			f.Reap()
		}
	}()
	if r.Method == http.MethodGet && r.URL.Path == "/mcp" {
		f.streams.Add(1)
		defer f.streams.Add(-1)
	}
	s.h.ServeHTTP(w, r)
}

// Streams is the number of GET /mcp requests being served (stateful
// sessions' standalone SSE streams, which end only with their sessions).
func (f *Front) Streams() int64 { return f.streams.Load() }

// owner returns the retired gateway whose stateful session r names, or cur.
func (f *Front) owner(r *http.Request, cur *servedGateway) *servedGateway {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || !cur.g.cfg.Stateful {
		return cur
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.retired {
		if s.g.hasSession(id) {
			return s
		}
	}
	return cur
}

// sessionCount is the number of the server's open sessions.
func (g *Gateway) sessionCount() int {
	n := 0
	for range g.server.Sessions() {
		n++
	}
	return n
}

func (g *Gateway) hasSession(id string) bool {
	for ss := range g.server.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// Config is the configuration g serves, resolved (a copy: see New).
func (g *Gateway) Config() *Config { return g.cfg }
