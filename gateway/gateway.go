// Package gateway wires mcpgate together: configuration → catalog of tools →
// an MCP server (from the official go-sdk), served over Streamable HTTP at /mcp
// or over stdio. Each tool call is forwarded to its upstream API with the
// caller's bearer token.
//
// A Go service can embed the gateway in-process: give an [Upstream] a Handler
// (the service's own http.Handler) and mount [Gateway.Handler] beside it.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/internal/caller"
	"github.com/mcpgate/mcpgate/gateway/internal/httpbound"
	"github.com/mcpgate/mcpgate/gateway/internal/logsample"
	"github.com/mcpgate/mcpgate/gateway/state"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// Options configures a [Gateway]. The zero value is ready to use.
type Options struct {
	// Logger receives the gateway's logs. Nil means no logging. Tokens,
	// cookies and claims are never logged.
	Logger *slog.Logger
	// StaticToken, if set, is sent upstream as a bearer token on calls that
	// arrive without an Authorization header of their own. It is meant for
	// stdio, where a local user runs the gateway on their own behalf; an HTTP
	// gateway should leave it empty, so that callers cannot borrow it.
	StaticToken string
	// Lock, if set, is the reviewed catalog (see annotations.Lock): a tool
	// that is not in it, or whose hints, operation or input schema changed
	// since, is not exposed, so that a spec change cannot widen what agents
	// may do without a review. Drift reports what was held back.
	Lock *annotations.Lock
	// DisableFastPath sends every request to go-sdk, including the
	// stateless tools/list and tools/call the front door otherwise answers
	// itself (see fastPath) and the stdio tools/call lines (see
	// stdioFast). Default false: the fast path is go-sdk's
	// answers at a fraction of the cost. It exists to tell, when a client
	// misbehaves, whether the fast path is the difference.
	DisableFastPath bool
	// DeferUnavailable starts the gateway without an upstream whose remote
	// document cannot be fetched for now (see catalog.Options.DeferUnavailable);
	// NotLoaded names it, /readyz reports it, and the caller retries by
	// building a new gateway (mcpgate serve does, with backoff). Default
	// false: every upstream loads or New fails.
	DeferUnavailable bool
	// DisableLogSampling writes every warning and error line. Default
	// false: repeated failure lines are sampled, the first of a kind (level,
	// message, tool, upstream, cause) per second and then one line with the
	// count of those dropped (see gateway/internal/logsample). It is for a
	// log pipeline that samples on its own, or a test that counts lines.
	DisableLogSampling bool
	// TracerProvider, if set, makes the gateway's spans (see tracing.go)
	// whatever Config.Tracing says, e.g. a service's own provider, or a
	// test's with an in-memory exporter. The gateway does not shut it
	// down. Nil: Config.Tracing decides.
	TracerProvider trace.TracerProvider
	// Snapshot, if set, is a file `mcpgate build` wrote (WriteSnapshot):
	// the catalog is read from it when this build wrote it from this
	// configuration and these documents, skipping the documents' parse;
	// otherwise one line says which hash differs and the documents are
	// loaded as without it. See docs/snapshot.md.
	Snapshot string
	// SnapshotNotUsed, if set, is called once when Snapshot names a file
	// that is not used, with why, before the documents are loaded: mcpgate
	// serve turns the collector back on there, which it keeps off for a
	// start from a snapshot (a full load under it took half as long again).
	SnapshotNotUsed func(reason error)
	// Previous, when set, is the gateway this one is built to replace (a
	// reload): an MCP upstream whose configuration and client settings are
	// unchanged keeps Previous's client — its sessions, its stdio child and
	// whatever state that holds — instead of starting a new one; it is
	// closed with the last gateway that uses it. See fedreuse.go. So does
	// a REST upstream's transport, with its keep-alive connections, when
	// its base URL's scheme and host and direct_transport are unchanged
	// (restreuse.go).
	Previous *Gateway
}

// Gateway serves one catalog. It is safe for concurrent use.
type Gateway struct {
	// httpOnce builds httpHandler, the one Handler returns.
	httpOnce    sync.Once
	httpHandler http.Handler

	cfg     *Config
	opts    Options
	logger  *slog.Logger
	catalog *Catalog
	server  *mcp.Server
	drift   *annotations.Drift
	// heldPrompts are the prompts Options.Lock withholds (drift's
	// HeldPrompts): not listed, rendered or completed.
	heldPrompts map[string]bool
	// heldResources are the resources (OpenAPI and playbooks'; by URI or template)
	// Options.Lock withholds (drift's HeldResources): not served.
	heldResources map[string]bool
	served        int             // tools registered: the catalog less what the lock held back
	calls         *callContexts   // the POSTs being served, for the tool handlers (see frontDoor)
	noetlCalls    *inflight       // the NoETL-compatible endpoint's calls in flight, for notifications/cancelled
	callers       *caller.Key     // keys the callers' digests (shared.go's callerKey)
	life          *sessionLife    // stateful with the fast path: sessions' initialized state and idle timeout (sessionlife.go)
	streams       *sessionStreams // stateful: the sessions' standalone SSE streams, for notifications/tasks/status (taskstatus.go)
	sessions      *sessionBook    // stateful: its front door's session book (the Front links the books of the gateways it keeps)
	metrics       *metrics        // nil when metrics are off

	// The serving state: one client per upstream, by name, all under one
	// response budget; the runner of each upstream that has playbooks.
	clients map[string]*upstream.Client
	runners map[string]*playbook.Runner
	// federated are the clients of the MCP upstreams, by name (see
	// federation.go); live, the tools served, as relist changes them.
	federated map[string]*federation.Upstream
	fedShares map[string]*fedShare // the same clients, and the gateways sharing each (fedreuse.go)
	live      liveTools
	extras    fedExtras                // MCP upstreams' prompts and resources (fedextras.go)
	search    *searchMode              // nil: tools/list lists every tool (search.go)
	subs      *subscriptions           // resources/subscribe (subscribe.go)
	budget    *upstream.ResponseBudget // max_response_memory, shared by the clients

	// transports are the REST clients' transports, each maybe shared with
	// the gateways before and after a reload (restreuse.go).
	transports []transportUse

	validated chan struct{} // closed when the documents' validation has ended
	fast      *fastPath     // nil: every request goes to go-sdk
	tasks     *taskDoor     // nil: no playbook tools, so no MCP tasks

	// Auth (see auth.go's seam notes): verifier is nil without cfg.Auth;
	// outbound holds each upstream's credential source by name; require
	// each tool's step-up requirement by name.
	verifier *auth.Verifier
	outbound map[string]*auth.Outbound
	require  atomic.Pointer[map[string]auth.Requirement] // see requirements

	unverifiedOnce sync.Once // see warnUnverified

	// shared is the fleet's state (shared.go): nil with state.backend
	// memory; taskRecords, the task records (Redis's, or memory's).
	shared      *state.Redis
	sharedStop  chan struct{} // closed by Close: ends the session sweeps
	taskRecords state.Tasks
	// tracer makes the spans; nil when tracing is off (tracing.go).
	// ownTracer is the provider the gateway made from Config.Tracing, shut
	// down by Close.
	tracer    trace.Tracer
	ownTracer *sdktrace.TracerProvider
	// sdkTools is closed once go-sdk's server holds every tool (addTools):
	// what go-sdk serves waits for it.
	sdkTools     chan struct{}
	fromSnapshot bool    // the catalog came from Options.Snapshot
	later        []*Tool // from a snapshot: the tools addToolsLater adds to go-sdk's server

	// What go-sdk's server holds, and the reload's following (follow.go):
	// sdk, the tools g registered and their handlers; succ, the gateway g's
	// stateful sessions are served by since g was retired (nil: g).
	sdk    sdkRegistry
	succ   atomic.Pointer[Gateway]
	follow follower
	lent   atomic.Int64 // calls g runs for the sessions of gateways following it (lend)
}

// New resolves cfg (a copy: see [Config.Resolve]), loads every upstream's
// document and builds the catalog and the MCP server.
func New(ctx context.Context, cfg *Config, opts *Options) (_ *Gateway, err error) {
	cfg, err = cfg.Resolve() // the copy served: the caller's cfg stays as written
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, calls: &callContexts{}, noetlCalls: newInflight(), validated: make(chan struct{}), subs: newSubscriptions(), sdkTools: make(chan struct{})}
	if opts != nil {
		g.opts = *opts
	}
	if p := g.opts.Previous; p != nil {
		// One registry of the calls in flight for every gateway of the
		// process: a retired gateway's session may be served by this one
		// (follow.go). Calls are registered under ids unique to the process.
		g.calls = p.calls
	}
	g.logger = g.opts.Logger
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	} else if !g.opts.DisableLogSampling {
		g.logger = slog.New(logsample.New(g.logger.Handler(), nil))
	}
	// Serving does not wait for the documents' validation, which only
	// reports: its warnings are logged when it ends.
	logger := g.logger
	validated := g.validated
	built := make(chan bool, 1) // validation waits for the serving state
	defer func() { built <- err == nil }()
	if err := g.openShared(ctx); err != nil {
		return nil, err
	}
	if err := g.startTracing(ctx); err != nil {
		g.closeShared()
		return nil, err
	}
	defer func() {
		if err != nil {
			g.closeShared()
			g.stopTracing(context.Background())
		}
	}()
	// max_response_memory, shared by every upstream's client: REST
	// clients (startClients) and MCP upstreams' (startFederation).
	g.budget = upstream.NewResponseBudget(g.cfg.MaxResponseMemory)
	if err := g.startFederation(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.closeFederation()
			g.closeTransports()
		}
	}()
	cat, err := g.loadCatalog(ctx, cfg, &CatalogOptions{ValidateAfter: built, ListMCP: g.listFederated, DeferUnavailable: g.opts.DeferUnavailable, Validated: func(ws []string) {
		for _, w := range ws {
			logger.Warn("openapi document", "warning", w)
		}
		close(validated)
	}})
	if err != nil {
		return nil, err
	}
	g.catalog = cat
	if g.opts.Lock != nil {
		// Before auth: a federated tool's hints are believed when the
		// reviewed lock holds it unchanged.
		g.drift = annotations.Compare(g.opts.Lock, cat.Facts())
		g.drift.ComparePrompts(g.opts.Lock, cat.LockedPrompts(g.cfg))
		g.heldPrompts = map[string]bool{}
		for _, n := range g.drift.HeldPrompts() {
			g.heldPrompts[n] = true
		}
		g.drift.CompareResources(g.opts.Lock, cat.LockedResources())
		g.heldResources = map[string]bool{}
		for _, uri := range g.drift.HeldResources() {
			g.heldResources[uri] = true
		}
	}
	if err := g.startClients(); err != nil {
		return nil, err
	}
	if cfg.Metrics.On() {
		g.metrics = newMetrics(g.clients, g.runners, g.federated)
		g.metrics.registerState(g.shared)
	}
	if err := g.setUpAuth(ctx); err != nil {
		return nil, err
	}
	// resources/subscribe needs a session to send updates on, and an
	// upstream to subscribe to (subscribe.go).
	subscribing := g.cfg.Stateful && g.subscribable()
	var subscribe func(context.Context, *mcp.SubscribeRequest) error
	var unsubscribe func(context.Context, *mcp.UnsubscribeRequest) error
	if subscribing {
		subscribe, unsubscribe = g.subscribe, g.unsubscribe
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "mcpgate", Title: "mcpgate", Version: Version}, &mcp.ServerOptions{
		Logger:       g.sdkLogger(),
		Instructions: "Tools generated from REST APIs' OpenAPI documents. Each tool's annotations say whether it reads or writes.",
		Capabilities: &mcp.ServerCapabilities{
			// listChanged is advertised with MCP upstreams, whose tools
			// may change while serving (relist), and to stateful sessions,
			// which a reload's changes reach (follow.go); a stateless
			// gateway's POST has no stream to notify on otherwise.
			Tools:   &mcp.ToolCapabilities{ListChanged: len(g.federated) > 0 || cfg.Stateful},
			Logging: &mcp.LoggingCapabilities{},
		},
		// nil (no completions capability) unless a configured prompt has
		// an enum argument or an MCP upstream offers completions.
		CompletionHandler: g.sdkCompletion(g.completion()),
		// nil (no resources.subscribe) unless subscribing.
		SubscribeHandler:   subscribe,
		UnsubscribeHandler: unsubscribe,
	})
	switch {
	case subscribing:
		g.server.AddSendingMiddleware(g.subs.only)
	case !g.cfg.Stateful:
		g.server.AddReceivingMiddleware(refuseSubscriptions("a stateless gateway has no session to send notifications/resources/updated on; serve it stateful (--stateful) to subscribe to resources"))
	default:
		g.server.AddReceivingMiddleware(refuseSubscriptions("no upstream of this gateway offers resource subscriptions"))
	}
	if err := g.addPromptsAndResources(); err != nil {
		return nil, err
	}
	var served []*Tool
	for _, t := range cat.Tools {
		if !g.drift.Drifted(t.Tool.Name) {
			served = append(served, t)
		}
	}
	// Search mode (search.go) decides on the tools served, and withholds
	// an MCP upstream's tool named like a meta-tool. It indexes the tools
	// before the documents go: a parameter's description the size budget
	// cut from a schema is still the operation's.
	if g.search, served, err = newSearchMode(g, served); err != nil {
		return nil, err
	}
	cat.DropDocuments()
	// go-sdk's AddTool checks a tool by marshalling its schemas and parsing
	// them back (Kubernetes': 0.15 s on one core). It takes the server's
	// lock only to add the checked tool, and lists tools by name whatever
	// the order they were added in: check them on every core.
	g.addTools(served) // in the background from a snapshot: see addTools
	g.served = len(served)
	if g.search != nil {
		for _, n := range metaToolNames {
			g.server.AddTool(g.search.meta[n], g.search.handler(n))
		}
		g.server.AddReceivingMiddleware(g.search.listMiddleware)
		if g.cfg.Stateful {
			g.server.AddSendingMiddleware(g.search.notifyMiddleware)
			g.server.AddReceivingMiddleware(g.search.trackSessions)
		}
	}
	g.addListFilter() // auth.list: callable (auth.go), over search mode's list
	if len(g.federated) > 0 {
		g.live.tools = make(map[string]*Tool, len(served))
		for _, t := range served {
			g.live.tools[t.Tool.Name] = t
		}
		g.live.publish()
	}
	if g.fast, err = newFastPath(g, served); err != nil {
		return nil, err
	}
	if g.cfg.Stateful {
		g.streams = newSessionStreams()
		if p := g.opts.Previous; p != nil && p.streams != nil {
			g.streams = p.streams // by session id, unique to the process (follow.go)
		}
	}
	if g.fast != nil && g.cfg.Stateful {
		// The front door answers calls on sessions: it keeps their
		// initialized state and idle timeout (sessionLife, sdkHandler).
		g.life = newSessionLife(g.cfg.SessionTimeout)
		g.server.AddReceivingMiddleware(g.life.middleware)
	}
	if g.tasks, err = newTaskDoor(g, served); err != nil {
		return nil, err
	}
	if g.tasks != nil {
		g.server.AddReceivingMiddleware(g.tasks.middleware)
	}
	if g.metrics != nil {
		g.server.AddReceivingMiddleware(g.metrics.countMethods)
	}
	if g.tracer != nil {
		g.server.AddReceivingMiddleware(g.traceStdio)
	}
	if len(g.federated) > 0 {
		g.live.mu.Lock()
		g.live.ready = true // from now on, an upstream's changes are served (relist)
		g.live.mu.Unlock()
	}
	g.addToolsLater() // from a snapshot: see addTools
	return g, nil
}

// startClients makes the serving state from the catalog: one client per
// upstream (an upstream without a base URL can be listed and audited, not
// served) and one playbook runner per playbook engine, which runs its tools
// (g.runners, by the tools' Upstream).
func (g *Gateway) startClients() error {
	budget := g.budget
	g.clients = make(map[string]*upstream.Client, len(g.cfg.Upstreams))
	g.runners = map[string]*playbook.Runner{}
	for i := range g.cfg.Upstreams {
		u := &g.cfg.Upstreams[i]
		if u.MCP != nil {
			continue // its client is federation's (startFederation)
		}
		if g.notLoaded(u.Name) {
			continue // no document, no tools: nothing to call yet
		}
		var rt http.RoundTripper // nil: the client's own (in-process)
		if base, ok := g.catalog.RemoteBase(u); ok {
			rt = g.remoteTransport("upstream", u.Name, base, !u.Direct())
		}
		c, err := g.catalog.TracedClient(u, budget, g.upstreamTracing(), rt)
		if err != nil {
			return fmt.Errorf("upstream %s: %v", u.Name, err)
		}
		g.clients[u.Name] = c
		if opts := g.catalog.Engine(u.Name); opts != nil {
			o := *g.engineOptions(u.Name, opts) // a copy: the catalog's stay as they are
			// g.metrics is set once the clients are: before any run.
			o.OnRunEnd = func(e playbook.RunEnd) { g.metrics.playbookRunEnded(e) }
			o.Logger = g.logger // its "playbook run" lines (docs/observability.md)
			r, err := playbook.New(c, &o)
			if err != nil {
				return fmt.Errorf("upstream %s: playbooks: %v", u.Name, err)
			}
			g.runners[u.Name] = r
		}
	}
	return nil
}

// NotLoaded are the upstreams this gateway serves without, for now: their
// remote documents could not be fetched (Options.DeferUnavailable).
func (g *Gateway) NotLoaded() []NotLoaded { return g.catalog.NotLoaded }

func (g *Gateway) notLoaded(name string) bool {
	for _, n := range g.catalog.NotLoaded {
		if n.Upstream == name {
			return true
		}
	}
	return false
}

// Validated is closed once the background validation of the documents has
// ended and its warnings are logged (see CatalogOptions.Validated). Until then
// it still holds the parsed documents.
func (g *Gateway) Validated() <-chan struct{} { return g.validated }

// Drift is how the catalog differs from Options.Lock (nil without a lock).
// Tools it names as added or changed are not served.
func (g *Gateway) Drift() *annotations.Drift { return g.drift }

// Served is the number of tools served: the catalog's, less any the lock held
// back.
func (g *Gateway) Served() int { return g.served }

// Catalog returns the tools built from the configuration (see Drift for those
// a lock held back).
func (g *Gateway) Catalog() *Catalog { return g.catalog }

// Metrics returns the gateway's Prometheus registry, or nil when metrics are
// off (Config.Metrics). [Gateway.Handler] serves it at Config.Metrics.Path
// unless Config.Metrics.Listen moves it to [Gateway.MetricsHandler]; a
// service that embeds the gateway and mounts only /mcp can serve it from its
// own endpoint instead. It holds the Go runtime and process collectors, so do
// not merge it with a registry that has them too.
func (g *Gateway) Metrics() *prometheus.Registry {
	if g.metrics == nil {
		return nil
	}
	return g.metrics.registry
}

// Server returns the MCP server, e.g. to connect it to a transport of one's
// own. To serve stdio, use [Gateway.ServeStdio].
// It waits until the server holds every tool (see addTools).
func (g *Gateway) Server() *mcp.Server {
	<-g.sdkTools
	return g.server
}

// MetricsHandler returns the routes of the metrics listener
// (Config.Metrics.Listen): Config.Metrics.Path, GET and HEAD, and nothing
// else. It is nil when metrics are off. `mcpgate serve` serves it on
// Config.Metrics.Listen when that is set.
func (g *Gateway) MetricsHandler() http.Handler {
	if g.metrics == nil {
		return nil
	}
	r := mux.NewRouter()
	g.routeMetrics(r)
	return r
}

// routeMetrics adds the metrics route, Config.Metrics.Path, to r.
func (g *Gateway) routeMetrics(r *mux.Router) {
	r.Handle(g.cfg.Metrics.Path, g.metrics.handler()).Methods(http.MethodGet, http.MethodHead)
}

// Handler returns the gateway's HTTP routes: /mcp (Streamable HTTP, behind
// the front door), /healthz (liveness), /readyz (readiness) and, unless
// Config.Metrics turns it off or moves it to a listener of its own,
// /metrics (Prometheus).
//
// Every route is gorilla/mux's, and /mcp is also matched first by its exact
// path: the router's regexp match and the two request copies it makes to
// carry route and vars in the context cost a tools/call about 1.4 µs, 0.9
// KB and 8 allocations (BenchmarkRouteMCP, 2 shared cores), and /mcp has
// neither vars nor method limits. A path that is not exactly "/mcp" — "/mcp/",
// "//mcp", "/MCP" — still goes through the router, which cleans and
// redirects as it always did.
//
// Every call returns the same handler: a gateway has one front door, so
// one table of sessions, one max_sessions and one registry of calls in
// flight, wherever an embedder mounts it and however often it asks.
func (g *Gateway) Handler() http.Handler {
	g.httpOnce.Do(func() { g.httpHandler = g.newHandler() })
	return g.httpHandler
}

// newHandler builds what Handler returns, once.
func (g *Gateway) newHandler() http.Handler {
	g.warnUnverified()
	r, mcpRoute := g.newMux()
	mcpRoute = g.accessLog(mcpRoute)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Every route's answers: write_timeout (see httpbound.Writes).
		dw := httpbound.Writes(w, req, g.cfg.WriteTimeout)
		defer dw.Finish()
		if req.URL.Path == "/mcp" {
			mcpRoute.ServeHTTP(dw, req)
			return
		}
		r.ServeHTTP(dw, req)
	})
}

// newMux returns the router and the handler it routes /mcp to.
func (g *Gateway) newMux() (*mux.Router, http.Handler) {
	r := mux.NewRouter()
	sdk := g.sdkHandler(!g.cfg.Stateful)
	fd := &frontDoor{
		gw:          g,
		next:        sdk,
		maxBody:     g.cfg.MaxBodyBytes,
		bodyTimeout: g.cfg.BodyTimeout,
		calls:       g.calls,
		metrics:     g.metrics,
		fast:        g.fast,
		tasks:       g.tasks,
		metaCalls:   g.search != nil,
		tracer:      g.tracer,
	}
	// Both modes keep the calls in flight: a stateless POST is a session of
	// its own, and a stateful client that hangs up and then cancels must
	// still reach the run its call left (see cancel.go).
	fd.inflight = newInflight()
	g.shareInflight(fd.inflight)
	if g.cfg.Stateful {
		fd.sessionless = g.sdkHandler(true)
		fd.sessions = newSessionBook(g.server, g.cfg.MaxSessions, g.cfg.MaxSessionsPerCaller)
		fd.streams = g.streams
		if g.life != nil {
			fd.sessions.life = g.life
			g.life.onExpired(fd.sessions.forget)
		}
		g.shareSessions(fd.sessions)
		g.sessions = fd.sessions
	}
	playbookRPC := http.Handler(&noetlDoor{fd: fd, next: http.HandlerFunc(g.servePlaybookRPC)})
	mcpRoute := http.Handler(fd)
	if g.verifier != nil {
		fd.authorize = g.authorizeCall
		mcpRoute = g.verifier.Middleware(fd)
		// The NoETL-compatible endpoint is verified like /mcp: tools/list
		// as well as tools/call.
		playbookRPC = g.verifier.Middleware(playbookRPC)
		for _, p := range g.verifier.MetadataPaths() {
			r.Handle(p, g.verifier.MetadataHandler()).Methods(http.MethodGet, http.MethodOptions)
		}
	}
	r.Handle("/mcp", mcpRoute)
	r.Handle("/api/mcp/playbook/{path:.+}/jsonrpc", playbookRPC).Methods(http.MethodPost)
	r.HandleFunc("/healthz", g.serveHealth).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", g.serveReady).Methods(http.MethodGet, http.MethodHead)
	if g.metrics != nil && g.cfg.Metrics.Listen == "" {
		g.routeMetrics(r)
	}
	r.Use(g.accessLog)
	return r, mcpRoute
}

// sdkHandler is go-sdk's Streamable HTTP handler on the gateway's server,
// stateless or not.
func (g *Gateway) sdkHandler(stateless bool) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.Server() },
		&mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			Logger:              g.sdkLogger(),
			SessionTimeout:      g.sdkSessionTimeout(),
			MaxRequestBodyBytes: g.cfg.MaxBodyBytes,
			// Ties handlers to the POST for 2026-07-28 requests; the front
			// door does it for every protocol version (see frontDoor).
			PropagateRequestCancellation: true,
		})
}

// sdkSessionTimeout is go-sdk's idle timeout for sessions: session_timeout,
// unless the front door keeps it (sessionLife), since go-sdk's timer would
// close a session whose calls the fast path answers while it is in use.
func (g *Gateway) sdkSessionTimeout() time.Duration {
	if g.life != nil {
		return 0
	}
	return g.cfg.SessionTimeout
}

// sdkLogger is the logger handed to go-sdk: the gateway's, less everything
// below warn. go-sdk logs session ids at info ("server session connected",
// "session_id"), and a session id is a bearer credential for its session; at
// warn and error (v1.8.0) it logs none.
func (g *Gateway) sdkLogger() *slog.Logger {
	return slog.New(minLevel{g.logger.Handler(), slog.LevelWarn})
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.min {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// accessLog logs one line per HTTP request: method, path, status, duration.
// Never headers: they carry tokens and cookies.
func (g *Gateway) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.logger.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("elapsed", time.Since(start))}
		if id := sw.Header().Get(requestIDHeader); id != "" {
			attrs = append(attrs, slog.String("request_id", id))
		}
		g.logger.LogAttrs(r.Context(), slog.LevelDebug, "http request", attrs...)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streamed (SSE) responses through the logging wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handler is the go-sdk tool handler of t, by its kind.
func (g *Gateway) handler(t *Tool) mcp.ToolHandler {
	switch {
	case t.IsPlaybook():
		// A playbook tool runs the runner (and may report progress):
		// the fast path hands go-sdk its calls with a progress token.
		return g.playbookHandler(t)
	case t.Federated != nil:
		// Relayed to its MCP server, with progress, logs and requests
		// back: go-sdk's session serves it too.
		return g.federatedHandler(t)
	default:
		return g.toolHandler(t)
	}
}

func (g *Gateway) toolHandler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Cancel the upstream call when the client's POST ends: go-sdk does
		// not (see frontDoor).
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		return g.callTool(ctx, t, req), nil
	}
}

// callTool runs one tool call, for go-sdk's tool handler and the front door's
// fast path alike: arguments decoded, credentials picked, the upstream
// called, one log line. ctx ends the call when the client goes away.
func (g *Gateway) callTool(ctx context.Context, t *Tool, req *mcp.CallToolRequest) *mcp.CallToolResult {
	args, err := upstream.DecodeArguments(req.Params.Arguments)
	if err != nil {
		res := &mcp.CallToolResult{}
		res.SetError(err)
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeInvalidArguments, Cause: err})
		return res
	}
	cred, err := g.credentials(ctx, t, req)
	if err != nil {
		res := &mcp.CallToolResult{}
		res.SetError(fmt.Errorf("the gateway could not obtain a credential for upstream %s", t.Upstream))
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeUnreachable, Cause: err})
		return res
	}
	if req.Extra != nil {
		ctx = g.callTrace(ctx, t, req.Extra.Header)
	} else {
		ctx = g.callTrace(ctx, t, nil)
	}
	res, rep := g.clients[t.Upstream].Call(ctx, t.Binding, args, cred)
	g.logCall(ctx, t, req, rep)
	return res
}

// logCall writes the one line a tool call leaves: tool, upstream, HTTP status,
// duration, outcome, the front door's request id and the client's own
// X-Request-Id when it sent a well-formed one; a call that failed on the
// upstream's side or the gateway's is a warning, with its cause. Never the
// arguments, tokens, cookies or session ids: the cause is a transport or
// mapping error, which holds none of them.
//
// It also counts the call in the metrics, so every call path that logs its
// call is counted. The ids come from req.Extra.Header, the header of the POST
// that carried the call (the front door set requestIDHeader there): a call
// path outside go-sdk passes a request whose Extra.Header is that header.
//
// A call that went well is a debug line: at 10k calls a second the line cost
// 10 µs of a call's 80-90 µs of CPU (mcpgate-bench, c=8), and its counts and
// latencies are in the metrics. A failed call is a warning at every level
// but error.
func (g *Gateway) logCall(ctx context.Context, t *Tool, req *mcp.CallToolRequest, rep upstream.Report) {
	g.metrics.observeCall(t.Tool.Name, t.Upstream, rep)
	if g.tracer != nil {
		traceCall(ctx, rep)
	}
	level := slog.LevelDebug
	if rep.Failed() {
		level = slog.LevelWarn
	}
	if !g.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.Int("status", rep.Status), slog.Duration("elapsed", rep.Elapsed),
		slog.String("outcome", string(rep.Outcome)))
	if req.Extra != nil && req.Extra.Header != nil {
		if id := req.Extra.Header.Get(requestIDHeader); id != "" {
			attrs = append(attrs, slog.String("request_id", id))
		}
		if id := clientRequestID(req.Extra.Header); id != "" {
			attrs = append(attrs, slog.String("client_request_id", id))
		}
	}
	if rep.Failed() && rep.Cause != nil {
		attrs = append(attrs, slog.String("cause", rep.Cause.Error()))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	g.logger.LogAttrs(ctx, level, "tool call", attrs...)
}

// clientRequestIDHeader is the request id a client or a proxy in front of the
// gateway (nginx's $request_id, Envoy) may send, to find its call in the
// gateway's log.
const clientRequestIDHeader = "X-Request-Id"

// maxClientRequestID bounds a client's request id: a UUID is 36 characters,
// a W3C trace id 32.
const maxClientRequestID = 128

// clientRequestID returns h's X-Request-Id when it is 1 to
// maxClientRequestID letters, digits and "-_.:", else "". It is logged, never
// trusted: the gateway's own id (requestIDHeader) is what ties a call to its
// POST, and a value outside that charset could forge log lines.
func clientRequestID(h http.Header) string {
	id := h.Get(clientRequestIDHeader)
	if id == "" || len(id) > maxClientRequestID {
		return ""
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return ""
		}
	}
	return id
}
