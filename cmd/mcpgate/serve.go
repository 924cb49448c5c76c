package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway"
)

// serve runs the gateway on its listener until a signal ends it.
//
// Signals: SIGTERM or SIGINT (or ctx ending) starts the drain: /readyz
// answers 503 "draining" at once while everything is still served for
// drain_delay, so that load balancers take the replica out (no delay when
// nothing ever asked /readyz: no balancer probes this process); then the
// listener closes and the requests in flight get up to shutdown_timeout; a
// playbook call still waiting near its end is answered with its execution
// id, the run left going (playbook.Runner.Release). A second SIGTERM or
// SIGINT stops at once. SIGHUP reloads (see reloader). The exit status is 0
// after a clean drain, 1 when requests had to be cut.
func (m *cli) serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate serve", flag.ContinueOnError)
	var c common
	c.register(fs)
	addr := fs.String("addr", "", "listen `HOST:PORT` (default 127.0.0.1:8080)")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics on a listener of its own at `HOST:PORT` (metrics.listen), not beside /mcp")
	stateful := fs.Bool("stateful", false, "keep an MCP session per client (default: stateless)")
	lockFile := fs.String("lock", "", "serve only the tools of this reviewed `lockfile` unchanged (see mcpgate audit --write-lock)")
	watch := fs.Bool("watch", false, "reload when the config file, a local OpenAPI document or the lockfile changes (as on SIGHUP); polled every second")
	drainDelay := fs.Duration("drain-delay", -1, "after SIGTERM/SIGINT, keep serving this `long` with /readyz answering 503 (drain_delay; default 5s)")
	shutdownTimeout := fs.Duration("shutdown-timeout", 0, "then wait this `long` for the calls in flight (shutdown_timeout; default 30s)")
	catalogMode := catalogFlag(fs)
	logFormat := logFormatFlag(fs)
	snapshot := snapshotFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	ov := gateway.Overrides{Listen: *addr, MetricsListen: *metricsAddr, Stateful: *stateful, CatalogMode: catalogMode.value, LogFormat: logFormat.value, ShutdownTimeout: *shutdownTimeout}
	if *drainDelay >= 0 {
		ov.DrainDelay = drainDelay
	}
	// Signals are read from here on: a SIGHUP that arrives while the
	// catalog loads is a reload once it is served, never the default
	// action (which ends the process).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	lock, err := c.readLockFlag(*lockFile)
	if err != nil {
		return err
	}
	cfg, demo, err := c.loadConfig(ov, true)
	if err != nil {
		return err
	}
	logger, err := c.logger(m.stderr, cfg.LogFormat)
	if err != nil {
		return err
	}
	setMemoryLimit(logger)
	// The gateway outlives ctx, which ends at the first signal: the drain
	// still serves.
	life := context.WithoutCancel(ctx)
	// The snapshot is for the start only: a reload or retry reads the
	// configuration and documents, which changed or were not there.
	g, err := c.newGateway(life, cfg, &gateway.Options{Logger: logger, Lock: lock, DeferUnavailable: true, Snapshot: *snapshot})
	if err != nil {
		return err
	}
	if d := g.Drift(); !d.Empty() {
		// The same lines as audit --lock, from the same function, in one
		// write: the documents' validation logs to stderr meanwhile.
		m.stderr.Write(driftText(*lockFile, d))
	}
	front := gateway.NewFront(g)
	defer front.Close() // upstream MCP servers' sessions and children
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	var metricsLn net.Listener
	if cfg.Metrics.Listen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			ln.Close()
			return fmt.Errorf("metrics.listen: %w", err)
		}
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	mode := "stateless"
	if cfg.Stateful {
		mode = "stateful"
	}
	var b bytes.Buffer // one write, as above
	fmt.Fprintf(&b, "mcpgate: listening on %s (%d tools, %s)\n", url, g.Served(), mode)
	for _, n := range g.NotLoaded() {
		fmt.Fprintf(&b, "mcpgate: upstream %s is not loaded yet (%v): serving without it, retrying\n", n.Upstream, oneLine(n.Err.Error()))
	}
	if metricsLn != nil {
		fmt.Fprintf(&b, "mcpgate: metrics on http://%s%s\n", metricsLn.Addr(), cfg.Metrics.Path)
	}
	if demo {
		fmt.Fprintln(&b, "mcpgate: serving the built-in demo (examples/orchestrator and examples/playbooks, in-process)")
	}
	b.WriteString(snippets(url))
	m.stderr.Write(b.Bytes())

	// No server-wide WriteTimeout: it runs from the start of a request to
	// the end of its answer, so it would cut SSE streams and long tool
	// calls; the gateway's handler bounds each write instead (write_timeout),
	// and ConfigureServer has a watcher do it, and bound the idle keep-alive
	// connections, rather than a runtime timer per request.
	// ReadTimeout is body_timeout: net/http sets it as a read deadline from
	// the request's start and clears it once the body is read, so it bounds
	// a slow body (the front door then sets no deadline of its own, see
	// serverBoundsBody) and never a stream. Slow headers: ReadHeaderTimeout.
	gateway.TuneGC() // unless GOGC is set: see its doc for the memory it costs
	// Once idle, that headroom goes back to the OS (see its doc).
	go gateway.ReleaseIdleMemory(ctx, logger)
	srv := &http.Server{
		Handler:           front,
		ReadTimeout:       cfg.BodyTimeout,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second, // keep-alive connections between requests
		MaxHeaderBytes:    64 << 10,          // a bearer token fits many times over
	}
	defer g.ConfigureServer(srv)()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var metricsSrv *http.Server
	if metricsLn != nil {
		metricsSrv = &http.Server{
			Handler:           front.MetricsHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       10 * time.Second, // a scrape is a GET: nothing to stream
			WriteTimeout:      30 * time.Second, // nor to wait for, past a scrape's own timeout
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    16 << 10,
		}
		go func() { errc <- fmt.Errorf("metrics.listen: %w", metricsSrv.Serve(metricsLn)) }()
	}

	rl := &reloader{c: &c, ov: ov, lockFile: *lockFile, front: front, logger: logger, life: life, served: cfg}
	reloads := make(chan string, 1)
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	if *watch {
		go rl.watch(stopWatch, reloads)
	}
	retry := rl.retryTimer(g)
	// A retired gateway whose last stateful session ended idle
	// (session_timeout) serves no request that would reap it: look from
	// time to time.
	reap := time.NewTicker(reapEvery)
	defer reap.Stop()
	var serveErr error
	stops := 0 // SIGTERMs and SIGINTs received (see drain)
loop:
	for {
		select {
		case serveErr = <-errc:
			break loop
		case <-ctx.Done():
			break loop
		case s := <-sigs:
			if s != syscall.SIGHUP {
				stops++
				break loop
			}
			rl.reload("SIGHUP")
		case why := <-reloads:
			rl.reload(why)
		case <-retry.C():
			rl.reload(retryTrigger)
		case <-reap.C:
		}
		retry.Reset(front.Current())
		front.Reap()
	}
	retry.Stop()
	if metricsSrv != nil {
		defer metricsSrv.Close() // scrapes go on through the drain: the drain gauge is worth seeing
	}
	if serveErr != nil {
		srv.Close()
		return serveErr
	}
	return m.drain(srv, front, front.Current().Config(), sigs, stops, logger)
}

// drain stops srv as serve's doc says.
//
// stops counts the SIGTERMs and SIGINTs serve's loop received. The second
// one stops at once. Counting rather than "the next one" because one
// signal reaches both sigs and ctx (main's signal.NotifyContext): when the
// loop ended on ctx, its signal may still be waiting in sigs.
func (m *cli) drain(srv *http.Server, front *gateway.Front, cfg *gateway.Config, sigs <-chan os.Signal, stops int, logger *slog.Logger) error {
	front.Drain()
	delay, timeout := *cfg.DrainDelay, cfg.ShutdownTimeout
	if !front.Probed() {
		// No balancer or orchestrator ever asked /readyz: none is waiting
		// to see it answer 503 (a local run, a test). Stop accepting now.
		delay = 0
	}
	fmt.Fprintf(m.stderr, "mcpgate: draining: /readyz answers 503; serving for %s more (drain_delay), then waiting up to %s for the calls in flight (shutdown_timeout); signal again to stop at once\n", delay, timeout)
	now := make(chan struct{}) // closed by a second signal
	go func() {
		for s := range sigs {
			if s == syscall.SIGHUP { // no reload while draining
				continue
			}
			if stops++; stops >= 2 {
				close(now)
				return
			}
		}
	}()
	select {
	case <-time.After(delay):
	case <-now:
	}
	// Shutdown closes the listener and the idle connections, then waits
	// for the requests in flight. Stateful sessions are closed once only
	// their GET streams are left (those end only so). Near the end of
	// shutdown_timeout the playbook calls still waiting are released
	// (answered, their runs left going); at its end whatever is left is cut.
	start := time.Now()
	shutdown := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() { shutdown <- srv.Shutdown(ctx) }()
	release := time.NewTimer(timeout - releaseGrace(timeout))
	defer release.Stop()
	idle := time.NewTicker(50 * time.Millisecond)
	defer idle.Stop()
	released, stopped := false, false // stopped: by a second signal
	releaseAll := func() {
		if !released {
			released = true
			front.ReleasePlaybookCalls()
		}
	}
	for {
		select {
		case err := <-shutdown:
			if err == nil {
				fmt.Fprintf(m.stderr, "mcpgate: drained in %s\n", time.Since(start).Round(time.Millisecond))
				return nil
			}
			srv.Close()
			if stopped {
				return &exitError{1, errors.New("a second signal stopped the drain with requests still in flight: they were cut")}
			}
			return &exitError{1, fmt.Errorf("shutdown_timeout (%s) passed with requests still in flight: they were cut", timeout)}
		case <-idle.C:
			// In stateful mode the sessions' GET streams keep Shutdown
			// waiting after the last call ended: close them then.
			// Not before: closing a session drops the answers of its
			// calls in flight.
			if cfg.Stateful && front.InFlight() == front.Streams() {
				front.CloseSessions()
			}
		case <-release.C:
			logger.Warn("drain: shutdown_timeout is ending: answering the playbook calls still waiting; their runs go on", "shutdown_timeout", timeout)
			releaseAll()
		case <-now:
			now, stopped = nil, true
			releaseAll()
			cancel() // Shutdown returns; Close cuts what is left
		}
	}
}

// releaseGrace is how long before the end of shutdown_timeout the waiting
// playbook calls are released, so that their answers are written before
// the connections are cut: 2 s, or a tenth of a shorter timeout — but at
// least 1 s (and at most half the timeout). The answers must be written
// and then seen: net/http's Shutdown checks whether the connections are
// idle every 500 ms at most (plus 10 % jitter), and a drain whose last
// answer was written after one check and before the timeout, but with the
// next check past it, exited 1 as if calls had been cut (400 ms of grace
// for a 4 s timeout: the fleet test failed so under load).
func releaseGrace(timeout time.Duration) time.Duration {
	return min(2*time.Second, timeout/2, max(timeout/10, time.Second))
}

// readLockFlag reads --lock's file, or returns nil when it is not set.
func (c *common) readLockFlag(path string) (*annotations.Lock, error) {
	if path == "" {
		return nil, nil
	}
	return readLock(path)
}

// driftText is what serve prints of what --lock held back.
func driftText(lockFile string, d *annotations.Drift) []byte {
	var b bytes.Buffer
	what := fmt.Sprintf("%d added, renamed or changed tools", len(d.Held()))
	if n := len(d.HeldPrompts()); n > 0 {
		what += fmt.Sprintf(" and %d added or changed prompts", n)
	}
	if n := len(d.HeldResources()); n > 0 {
		if len(d.Held())+len(d.HeldPrompts()) == 0 {
			what = fmt.Sprintf("%d added or changed resources", n)
		} else {
			what += fmt.Sprintf(" and %d added or changed resources", n)
		}
	}
	fmt.Fprintf(&b, "mcpgate: --lock %s: not serving the %s:\n", lockFile, what)
	d.WriteText(&b)
	return b.Bytes()
}

// A reloader builds a new gateway from the config file and the flags, as
// at start-up, and has the Front serve it: on SIGHUP, on a change --watch
// sees, and to retry the upstreams a start-up or reload could not load.
//
// A reload that fails — a config that does not parse or resolve, a
// document that does not load, a lockfile that does not read, drift from
// the lock under --lock — keeps the state served, logs why, and sets
// mcpgate_config_reload_success to 0. The listeners, stateful, body_timeout,
// write_timeout and log_format are the process's, fixed at start: a reload that changes
// them says so and serves the rest of the change.
type reloader struct {
	c        *common
	ov       gateway.Overrides
	lockFile string
	front    *gateway.Front
	logger   *slog.Logger
	life     context.Context
	served   *gateway.Config // the config served now
	seen     map[string]watchedFile
}

// retryTrigger is the reload that retries the upstreams not loaded.
const retryTrigger = "retrying the upstreams not loaded"

func (r *reloader) reload(why string) {
	start := time.Now()
	g, cfg, fixed, err := r.build()
	if err != nil {
		r.front.ReloadFailed()
		r.logger.Error("reload failed: still serving the previous configuration", "trigger", why, "error", oneLine(err.Error()))
		return
	}
	old := r.front.Current()
	if why == retryTrigger && !loadsMore(old, g) {
		// Nothing more to serve: a swap would only reset the metrics and
		// the process's own state, and retire the stateful sessions.
		g.Close()
		attrs := []any{}
		for _, n := range g.NotLoaded() {
			attrs = append(attrs, "not_loaded", n.Upstream)
		}
		r.logger.Info("retry: the upstreams not loaded are still not loaded; retrying with backoff", attrs...)
		return
	}
	if len(fixed) > 0 {
		r.logger.Warn("reload: these settings take effect only at a restart; the running values are kept", "settings", strings.Join(fixed, ","))
	}
	added, removed, changed := diffTools(old.Catalog(), g.Catalog())
	r.front.Replace(g)
	r.served = cfg
	attrs := []any{"trigger", why, "tools", g.Served(), "added", added, "removed", removed, "changed", changed,
		"took", time.Since(start).Round(time.Millisecond)}
	for _, n := range g.NotLoaded() {
		attrs = append(attrs, "not_loaded", n.Upstream)
	}
	r.logger.Info("reloaded", attrs...)
}

// loadsMore reports whether g loads an upstream that old could not.
func loadsMore(old, g *gateway.Gateway) bool {
	still := map[string]bool{}
	for _, n := range g.NotLoaded() {
		still[n.Upstream] = true
	}
	for _, n := range old.NotLoaded() {
		if !still[n.Upstream] {
			return true
		}
	}
	return false
}

// build makes a gateway as serve does at start, and names the settings the
// file changed that a reload cannot (restartOnly): they keep their running
// values.
func (r *reloader) build() (*gateway.Gateway, *gateway.Config, []string, error) {
	lock, err := r.c.readLockFlag(r.lockFile)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, _, err := r.c.loadConfig(r.ov, true)
	if err != nil {
		return nil, nil, nil, err
	}
	fixed := restartOnly(r.served, cfg)
	keepRestartOnly(cfg, r.served)
	// Not newGateway: its start-up memory limit is process-wide, and a
	// reload's restoring it could cross another's.
	// Previous: an MCP upstream left unchanged keeps its client (its stdio
	// child, its sessions) across the reload.
	g, err := gateway.New(r.life, cfg, &gateway.Options{Logger: r.logger, Lock: lock, DeferUnavailable: true, Previous: r.front.Current()})
	if err != nil {
		return nil, nil, nil, r.c.loadError(err)
	}
	if d := g.Drift(); lock != nil && !d.Empty() {
		g.Close()
		return nil, nil, nil, fmt.Errorf("--lock %s: the new catalog drifts from the lock (%d tools, %d prompts, %d resources added or changed): review it (mcpgate audit --lock) and update the lock first",
			r.lockFile, len(d.Held()), len(d.HeldPrompts()), len(d.HeldResources()))
	}
	logCatalog(r.logger, g)
	return g, cfg, fixed, nil
}

// keepRestartOnly sets in cfg the running values of the settings a reload
// cannot change (restartOnly), so that the new gateway serves with them.
func keepRestartOnly(cfg, running *gateway.Config) {
	cfg.Listen, cfg.Metrics.Listen, cfg.Stateful = running.Listen, running.Metrics.Listen, running.Stateful
	cfg.BodyTimeout, cfg.WriteTimeout, cfg.LogFormat = running.BodyTimeout, running.WriteTimeout, running.LogFormat
}

// restartOnly names the settings that differ between a and b and that a
// reload cannot change.
func restartOnly(a, b *gateway.Config) []string {
	var out []string
	if a.Listen != b.Listen {
		out = append(out, "listen")
	}
	if a.Metrics.Listen != b.Metrics.Listen {
		out = append(out, "metrics.listen")
	}
	if a.Stateful != b.Stateful {
		out = append(out, "stateful")
	}
	if a.BodyTimeout != b.BodyTimeout {
		out = append(out, "body_timeout")
	}
	if a.WriteTimeout != b.WriteTimeout {
		out = append(out, "write_timeout")
	}
	if a.LogFormat != b.LogFormat {
		out = append(out, "log_format")
	}
	return out
}

// diffTools counts the tools added, removed and changed (any field a client
// reads: description, schemas, hints) from a to b.
func diffTools(a, b *gateway.Catalog) (added, removed, changed int) {
	sums := func(c *gateway.Catalog) map[string][32]byte {
		m := make(map[string][32]byte, len(c.Tools))
		for _, t := range c.Tools {
			data, _ := json.Marshal(t.Tool)
			m[t.Tool.Name] = sha256.Sum256(data)
		}
		return m
	}
	as, bs := sums(a), sums(b)
	for n, s := range bs {
		switch old, ok := as[n]; {
		case !ok:
			added++
		case old != s:
			changed++
		}
	}
	for n := range as {
		if _, ok := bs[n]; !ok {
			removed++
		}
	}
	return added, removed, changed
}

// reapEvery is how often serve closes the retired gateways that serve
// nothing any more (Front.Reap), besides after each reload.
const reapEvery = 30 * time.Second

// retryBackoff is how a gateway with upstreams not loaded retries them:
// from retryMin, doubling to retryMax, with ±20% jitter so that a fleet
// started together does not retry together.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// retrier times the retries of the upstreams not loaded.
type retrier struct {
	t       *time.Timer
	backoff time.Duration
	due     time.Time // when t fires, while armed
}

func (r *reloader) retryTimer(g *gateway.Gateway) *retrier {
	rt := &retrier{t: time.NewTimer(time.Hour)}
	rt.t.Stop()
	rt.Reset(g)
	return rt
}

// C fires when a retry is due.
func (rt *retrier) C() <-chan time.Time { return rt.t.C }

// Reset arms the timer while g has upstreams not loaded, backing off, and
// disarms it once every upstream is loaded. serve's loop calls it after
// every event, not only a retry's.
func (rt *retrier) Reset(g *gateway.Gateway) { rt.reset(len(g.NotLoaded()), time.Now()) }

func (rt *retrier) reset(notLoaded int, now time.Time) {
	if notLoaded == 0 {
		rt.backoff = 0
		rt.t.Stop()
		return
	}
	switch {
	case rt.backoff == 0:
		rt.backoff = retryMin
	case now.Before(rt.due):
		return // armed, not fired: another event came first; keep its due time
	default:
		rt.backoff = min(2*rt.backoff, retryMax) // it fired: the next one waits longer
	}
	jitter := time.Duration(float64(rt.backoff) * (0.8 + 0.4*rand.Float64()))
	rt.due = now.Add(jitter)
	rt.t.Reset(jitter)
}

func (rt *retrier) Stop() { rt.t.Stop() }

// watchInterval is how often --watch looks at the files.
const watchInterval = time.Second

// watch sends on reloads when the config file, a local document or the
// lockfile has changed and stayed unchanged for one more look (an editor's
// or a ConfigMap's update is several writes or a symlink swap). Files are
// polled — a stat per file each second, their bytes hashed only when that
// changes (see fingerprint) — which sees a ConfigMap's ..data symlink swap
// as any edit.
func (r *reloader) watch(stop <-chan struct{}, reloads chan<- string) {
	loaded := r.fingerprint()
	var pending string
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := r.fingerprint()
		switch {
		case now == loaded:
			pending = ""
		case now != pending:
			pending = now // changed: wait one more look for it to settle
		default:
			loaded, pending = now, ""
			select {
			case reloads <- "a watched file changed":
			default: // one is queued already
			}
		}
	}
}

// fingerprint hashes the watched files' contents (a missing file hashes as
// its error): the config file, each local OpenAPI document of the config
// served, and the lockfile. A file whose stat (size, modification time,
// inode) is unchanged keeps its hash: its bytes are read again only when
// that changes.
func (r *reloader) fingerprint() string {
	var files []string
	if r.c.config != "" {
		files = append(files, r.c.config)
	}
	if r.c.openapi != "" && !isURL(r.c.openapi) {
		files = append(files, r.c.openapi)
	}
	for _, u := range r.served.Upstreams {
		if u.OpenAPI != "" && !isURL(u.OpenAPI) && u.Handler == nil {
			files = append(files, u.OpenAPI)
		}
	}
	if r.lockFile != "" {
		files = append(files, r.lockFile)
	}
	slices.Sort(files)
	if r.seen == nil {
		r.seen = map[string]watchedFile{}
	}
	h := sha256.New()
	for _, f := range slices.Compact(files) {
		fmt.Fprintf(h, "%s\x00", f)
		st, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(h, "error %v\x00", err)
			continue
		}
		w, ok := r.seen[f]
		if !ok || !w.same(st) {
			w = watchedFile{info: st}
			if data, err := readWatched(f); err != nil {
				w.sum = sha256.Sum256([]byte(err.Error()))
			} else {
				w.sum = sha256.Sum256(data)
			}
			r.seen[f] = w
		}
		h.Write(w.sum[:])
	}
	return string(h.Sum(nil))
}

// watchedFile is what fingerprint keeps of a file.
type watchedFile struct {
	info fs.FileInfo
	sum  [32]byte
}

func (w watchedFile) same(st fs.FileInfo) bool {
	return w.info.Size() == st.Size() && w.info.ModTime().Equal(st.ModTime()) && os.SameFile(w.info, st)
}

func readWatched(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<20))
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}
