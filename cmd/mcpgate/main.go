// Command mcpgate is an MCP gateway for REST APIs: it reads an API's OpenAPI
// document and serves the operations tagged agent-exposed as MCP tools.
//
// Usage:
//
//	mcpgate serve  [--config F | --openapi SRC] [--upstream URL] [--addr HOST:PORT] [--metrics-addr HOST:PORT] [--stateful] [--catalog flat|search|auto] [--snapshot FILE]
//	mcpgate stdio  [--config F | --openapi SRC] [--upstream URL] [--catalog flat|search|auto] [--snapshot FILE]
//	mcpgate build  [--config F | --openapi SRC] [--upstream URL] [--all] -o FILE
//	mcpgate tools  [--config F | --openapi SRC] [--all] [--expose-tag T] [--format json|table] [--explain]
//	mcpgate audit  [--config F | --openapi SRC] [--format table|json|markdown|sarif]
//	               [--write-lock FILE] [--lock FILE] [--fail-on error|warning|never] [--explain]
//	mcpgate call   [--endpoint URL | --server SLUG | --config F --upstream NAME] [--method M] [--tool T] [--arguments JSON] …
//
// With neither --config nor --openapi, serve and stdio serve the built-in demo:
// the orchestrator-style API of examples/orchestrator, in-process.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/examples/orchestrator/api"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway"
)

// exitError carries an exit status: 2 for bad input (configuration, a
// document that cannot be loaded, a lockfile that cannot be read), 1 for
// failures while running. Bad usage is a usageError.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// lockedWriter serializes writes to w: each Write goes out whole, never
// interleaved with another's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// cli is one run of the command: where it reads and writes.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// run runs the command line args (without the program name) and returns the
// exit status: 0 success, 1 a failure while running (or, for audit, findings
// or drift), 2 bad usage or bad input. Every error is one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// The logger (from background work too: the documents' validation ends
	// after serving has begun) and the command's own lines share stderr.
	m := &cli{stdin: stdin, stdout: stdout, stderr: &lockedWriter{w: stderr}}
	if len(args) == 0 {
		return m.exit(&usageError{cmd: "mcpgate", msg: "name a command: serve, stdio, tools, audit or version"})
	}
	var err error
	switch cmd, args := args[0], args[1:]; cmd {
	case "serve":
		err = m.serve(ctx, args)
	case "stdio":
		err = m.stdio(ctx, args)
	case "tools":
		err = m.tools(ctx, args)
	case "build":
		err = m.build(ctx, args)
	case "audit":
		var code int
		if code, err = m.audit(ctx, args); err == nil && code != 0 {
			return code // the report says why, on stdout
		}
	case "call":
		err = m.call(ctx, args)
	case "version", "--version", "-version":
		err = version(stdout, args)
	case "-h", "--help", "-help", "help":
		if len(args) > 0 && summary(args[0]) != "" { // mcpgate help serve
			return run(ctx, []string{args[0], "--help"}, stdin, stdout, stderr)
		}
		if len(args) > 0 {
			err = &usageError{cmd: "mcpgate", msg: fmt.Sprintf("no help for %q: not a command", args[0])}
			break
		}
		mainUsage(stdout)
	default:
		msg := fmt.Sprintf("unknown command %q", cmd)
		if strings.HasPrefix(cmd, "-") {
			msg = fmt.Sprintf("unknown flag %s: name a command first", cmd)
		}
		err = &usageError{cmd: "mcpgate", msg: msg}
	}
	return m.exit(err)
}

// exit reports err, if any, as one line on stderr and returns the exit
// status it stands for.
func (m *cli) exit(err error) int {
	if err == nil {
		return 0
	}
	var (
		help helpRequested
		ue   *usageError
		ee   *exitError
		code = 1
	)
	switch {
	case errors.As(err, &help):
		printHelp(m.stdout, help.fs)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(m.stderr, oneLine(ue.Error()))
		return 2
	case errors.As(err, &ee):
		code = ee.code
	}
	if code != 0 {
		fmt.Fprintf(m.stderr, "mcpgate: %s\n", oneLine(err.Error()))
	}
	return code
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// common are the flags every command shares.
type common struct {
	config     string
	openapi    string
	upstream   string
	exposeTags stringList
	all        bool
	nameStyle  choice
	logLevel   choice
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "YAML configuration `file`")
	fs.StringVar(&c.openapi, "openapi", "", "OpenAPI document: file path or http(s) URL, JSON or YAML (3.0, 3.1, Swagger 2.0)")
	fs.StringVar(&c.upstream, "upstream", "", "base `URL` of the API (default: the document's servers[0])")
	fs.Var(&c.exposeTags, "expose-tag", "expose operations with this `tag` (repeatable; default agent-exposed)")
	fs.BoolVar(&c.all, "all", false, "expose every operation")
	c.nameStyle = choice{allowed: []string{"strict", "spec"}}
	fs.Var(&c.nameStyle, "name-style", "`STYLE` of tool names: strict (default, ^[a-zA-Z0-9_-]{1,64}$) or spec (SEP-986)")
	c.logLevel = choice{value: "info", allowed: []string{"debug", "info", "warn", "error"}}
	fs.Var(&c.logLevel, "log-level", "log `LEVEL`: debug, info, warn or error (default info)")
}

// catalogFlag registers --catalog, config catalog.mode.
func catalogFlag(fs *flag.FlagSet) *choice {
	c := &choice{allowed: []string{"flat", "search", "auto"}}
	fs.Var(c, "catalog", "`MODE` of tools/list (catalog.mode): flat (every tool; default), search (pinned tools and search meta-tools) or auto (search past catalog.search_threshold tools)")
	return c
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// loadConfig builds the configuration from --config and the flags. demo
// reports that neither named an API, so the built-in demo is served.
func (c *common) loadConfig(o gateway.Overrides, allowDemo bool) (cfg *gateway.Config, demo bool, err error) {
	cfg = &gateway.Config{}
	if c.config != "" {
		if cfg, err = gateway.LoadConfig(c.config); err != nil {
			return nil, false, &exitError{2, flagError("--config", c.config, err)}
		}
	}
	o.OpenAPI, o.BaseURL, o.ExposeTags, o.ExposeAll, o.NameStyle = c.openapi, c.upstream, c.exposeTags, c.all, c.nameStyle.value
	if c.config == "" && c.openapi == "" {
		if !allowDemo {
			return nil, false, &exitError{2, errors.New("name an API: --openapi SRC or --config FILE")}
		}
		cfg.Upstreams = []gateway.Upstream{demoUpstream()}
		demo = true
		o.OpenAPI = ""
	}
	if err := cfg.Apply(o); err != nil {
		return nil, false, &exitError{2, err}
	}
	if demo { // after Apply, whose flags name the orchestrator
		cfg.Upstreams = append(cfg.Upstreams, demoPlaybooks())
		cfg.Prompts = append(cfg.Prompts, demoPrompt())
	}
	resolved, err := cfg.Resolve()
	if err != nil {
		if c.config != "" {
			err = fmt.Errorf("--config %s: %v", c.config, err)
		}
		return nil, false, &exitError{2, err}
	}
	return resolved, demo, nil
}

// loadError says which flag a catalog that cannot be built is about:
// --openapi when it named the document, else --config.
func (c *common) loadError(err error) error {
	var de *gateway.DocumentError
	switch {
	case errors.As(err, &de) && c.openapi != "":
		err = errors.New("--" + de.Error()) // "--openapi x.html: not a JSON or YAML document"
	case errors.As(err, &de) && c.config != "":
		err = fmt.Errorf("--config %s: upstream %s: %v", c.config, de.Upstream, de)
	}
	return &exitError{2, err}
}

// flagError names the flag and the file an error is about: "--lock: open
// x.lock: no such file or directory" when the cause names the file already,
// "--config x.yaml: line 3: …" otherwise.
func flagError(flag, file string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %v", flag, err)
	case strings.HasPrefix(err.Error(), file+": "):
		return fmt.Errorf("%s %v", flag, err)
	}
	return fmt.Errorf("%s %s: %v", flag, file, err)
}

// demoUpstream is the orchestrator-style example API, served in-process.
func demoUpstream() gateway.Upstream {
	return gateway.Upstream{
		Name:    "orchestrator",
		OpenAPI: "/openapi.json",
		Handler: api.New(nil).Handler(),
	}
}

// demoPlaybooks is the example playbook engine, served in-process: its
// routes and playbooks are found through its document's x-mcp-playbook.
func demoPlaybooks() gateway.Upstream {
	return gateway.Upstream{Name: "playbooks", OpenAPI: "/openapi.json", Handler: engine.New(nil).Handler(), Playbooks: &gateway.Playbooks{}}
}

// demoPrompt is a prompt template beside the demo's tools: the third
// primitive, rendered from its arguments (docs/prompts.md).
func demoPrompt() gateway.Prompt {
	return gateway.Prompt{
		Name:        "triage_subscription",
		Title:       "Triage a subscription",
		Description: "Ask for a triage of one subscription of the orchestrator: its state, its recent processes, and what to do next.",
		Arguments: []gateway.PromptArgument{
			{Name: "subscription_id", Description: "The subscription's id.", Required: true},
			{Name: "depth", Description: "How much to say.", Required: true, Enum: []string{"brief", "detailed"}},
		},
		Template: "Using the orchestrator's tools (read-only ones first), look up subscription {{ input.subscription_id }}: " +
			"its product, its state and its recent processes. Then give a {{ input.depth }} triage: what is wrong, " +
			"if anything, why, and which workflow would fix it. Do not start a workflow without asking.",
	}
}

// logFormatFlag registers --log-format (config log_format) on serve and
// stdio, the commands that log while they run.
func logFormatFlag(fs *flag.FlagSet) *choice {
	c := &choice{allowed: []string{gateway.LogText, gateway.LogJSON}}
	fs.Var(c, "log-format", "`FORMAT` of the log on stderr (log_format): text (key=value; default) or json (one object a line)")
	return c
}

// logger is the log on w at --log-level, in format (a resolved config's
// log_format: text or json; "" is text, for the commands that have no
// config to read it from).
func (c *common) logger(w io.Writer, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel.value)); err != nil {
		return nil, &exitError{2, fmt.Errorf("--log-level: %v", err)}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if format == gateway.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// startupMemoryLimit is the soft memory limit (runtime/debug.SetMemoryLimit)
// while the catalog is built, unless GOMEMLIMIT is set. Loading a 4 MB
// document (Stripe's, Kubernetes') makes tens of MB of short-lived garbage;
// at the default GC pace RSS peaks at 170-190 MiB (Kubernetes'), which stays
// the process's high-water mark. Under this limit the collector runs sooner
// while the heap is near it: the peak measured on those two documents is
// 89-91 MiB, for 0.15-0.2 s more start-up (Kubernetes': 0.95-1.0 s to
// listening rather than 0.77-0.83, measured to the "listening" line on 2
// cores). It is soft: a catalog that needs more still
// gets it. The limit is lifted once the catalog is built and validated.
// From a snapshot the heap never comes near it (11-15 MB); it bounds the
// documents' load when the snapshot is not used (see newGateway).
const startupMemoryLimit = 80 << 20

func (c *common) newGateway(ctx context.Context, cfg *gateway.Config, opts *gateway.Options) (*gateway.Gateway, error) {
	prev := int64(-1)
	if os.Getenv("GOMEMLIMIT") == "" {
		prev = debug.SetMemoryLimit(min(startupMemoryLimit, debug.SetMemoryLimit(-1)))
	}
	// From a snapshot, the collector is off until New returns (unless
	// GOGC is set): the start allocates 11-15 MB (Kubernetes', Stripe's),
	// nearly all of it the catalog it keeps, so a collection during it
	// finds little to free, and it cost the start dearly: a large
	// allocation made while the collector marks pays for marking in
	// proportion (Stripe's tools/list page, 2 MB: 11-27 ms to build, 6 ms
	// without; docs/snapshot.md). Should the snapshot not be used, the
	// collector is back on before the documents are loaded, under the
	// start-up limit above (with it off, the limit alone had a full load
	// of Kubernetes take 1.9-2.1 s rather than 1.3).
	gcPrev, gcOff := 0, opts.Snapshot != "" && os.Getenv("GOGC") == ""
	if gcOff {
		gcPrev = debug.SetGCPercent(-1)
		o := *opts
		opts = &o
		notUsed := opts.SnapshotNotUsed
		opts.SnapshotNotUsed = func(reason error) {
			debug.SetGCPercent(gcPrev)
			gcOff = false
			if notUsed != nil {
				notUsed(reason)
			}
		}
	}
	g, err := gateway.New(ctx, cfg, opts)
	if gcOff {
		debug.SetGCPercent(gcPrev)
	}
	if err != nil {
		if prev >= 0 {
			debug.SetMemoryLimit(prev)
		}
		return nil, c.loadError(err)
	}
	logCatalog(opts.Logger, g)
	go func() {
		// Validation goes on in the background and holds the documents
		// until it ends. Then the start-up peak is garbage: lift the limit
		// and give the memory back to the OS rather than hold it for the
		// life of the process.
		<-g.Validated()
		if prev >= 0 {
			debug.SetMemoryLimit(prev)
		}
		debug.FreeOSMemory()
	}()
	return g, nil
}

// logCatalog logs the warnings of g's catalog, and each upstream through
// whose gate no operation passed: at start-up and after a reload.
func logCatalog(logger *slog.Logger, g *gateway.Gateway) {
	for _, w := range g.Catalog().Warnings {
		logger.Warn("catalog", "warning", w)
	}
	for _, u := range g.Catalog().Upstreams {
		if u.Selected == 0 && !u.Playbooks && !u.MCP {
			logger.Warn("no operation passed the gate", "upstream", u.Name, "hint", noToolsHint(u))
		}
	}
}

// noToolsHint says why an upstream has no tools and what to do about it:
// the usual first-run surprise is a real API whose operations carry no gate
// tag.
func noToolsHint(u gateway.UpstreamCount) string {
	switch {
	case u.Operations == 0:
		return fmt.Sprintf("%s has no operations", u.Source)
	case u.ExposeAll:
		return fmt.Sprintf("none of the %d operations of %s passed the gate", u.Operations, u.Source)
	case u.Include:
		return fmt.Sprintf("no rule of the upstream's include list matches any of the %d operations of %s (or exclude takes them all): see which rule decided what with --explain",
			u.Operations, u.Source)
	}
	tags := strings.Join(u.ExposeTags, " or ")
	return fmt.Sprintf("none of the %d operations of %s is tagged %s: tag the ones to expose, or pass --expose-tag TAG (config expose_tags) or --all (config expose_all)",
		u.Operations, u.Source, tags)
}

// snippets returns client configuration for the URL: Claude Desktop (which
// speaks stdio, so through the mcp-remote bridge) and Cursor (Streamable HTTP).
func snippets(url string) string {
	return fmt.Sprintf(`
Claude Desktop (claude_desktop_config.json):
  {"mcpServers": {"mcpgate": {"command": "npx", "args": ["-y", "mcp-remote", %q]}}}
Cursor (.cursor/mcp.json):
  {"mcpServers": {"mcpgate": {"url": %q}}}

`, url, url)
}

func (m *cli) stdio(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate stdio", flag.ContinueOnError)
	var c common
	c.register(fs)
	catalogMode := catalogFlag(fs)
	logFormat := logFormatFlag(fs)
	snapshot := snapshotFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{CatalogMode: catalogMode.value, LogFormat: logFormat.value}, true)
	if err != nil {
		return err
	}
	// stdout carries the protocol: logs go to stderr only.
	logger, err := c.logger(m.stderr, cfg.LogFormat)
	if err != nil {
		return err
	}
	g, err := c.newGateway(ctx, cfg, &gateway.Options{
		Logger: logger,
		// Over stdio there is no inbound Authorization header: the local user
		// names the upstream credential in the environment.
		StaticToken: os.Getenv("MCPGATE_UPSTREAM_TOKEN"),
		Snapshot:    *snapshot,
	})
	if err != nil {
		return err
	}
	defer g.Close()
	// ServeStdio answers a bad line and goes on, and ends (nil) when stdin
	// closes or a shutdown request comes, once the calls read are answered.
	if err := g.ServeStdio(ctx, m.stdin, m.stdout); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // stdin closed, shutdown, or a signal: a normal end
}

func (m *cli) tools(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate tools", flag.ContinueOnError)
	var c common
	c.register(fs)
	format := &choice{value: "table", allowed: []string{"json", "table"}}
	fs.Var(format, "format", "output `FORMAT`: json or table")
	explain := fs.Bool("explain", false, "say for every operation why it is or is not a tool")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, true)
	if err != nil {
		return err
	}
	cat, err := gateway.BuildCatalog(ctx, cfg, nil)
	if err != nil {
		return c.loadError(err)
	}
	for _, u := range cat.Upstreams {
		if u.Selected == 0 && !u.Playbooks && !u.MCP {
			fmt.Fprintf(m.stderr, "mcpgate: upstream %s: no tools: %s\n", u.Name, noToolsHint(u))
		}
	}
	l := cat.Listing()
	if *explain {
		l = cat.ExplainListing()
	}
	if mode := cat.ListingMode(cfg); mode != nil && mode.Search {
		l.CatalogMode = mode
	}
	if format.value == "json" {
		return l.WriteJSON(m.stdout)
	}
	return l.WriteTable(m.stdout)
}

// readLock reads the lockfile of --lock.
func readLock(path string) (*annotations.Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &exitError{2, flagError("--lock", path, err)}
	}
	defer f.Close()
	lock, err := annotations.ReadLock(f)
	if err != nil {
		err = errors.New(strings.TrimPrefix(err.Error(), "annotations: "))
		return nil, &exitError{2, flagError("--lock", path, err)}
	}
	return lock, nil
}

// audit prints every tool's hints with their provenance and the lint
// findings, and writes or checks a lockfile. Its exit status is 0 clean, 1
// when findings reach --fail-on or the lock drifted, 2 on bad input.
func (m *cli) audit(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("mcpgate audit", flag.ContinueOnError)
	var c common
	c.register(fs)
	format := &choice{value: "table", allowed: []string{"table", "json", "markdown", "sarif"}}
	fs.Var(format, "format", "output `FORMAT`: table, json, markdown or sarif")
	writeLock := fs.String("write-lock", "", "write the catalog's lockfile to `FILE`")
	lockFile := fs.String("lock", "", "compare the catalog against the lockfile `FILE`")
	failOn := &choice{value: "error", allowed: []string{"error", "warning", "never"}}
	fs.Var(failOn, "fail-on", "exit 1 on findings of this `SEVERITY` or worse: error, warning or never")
	explain := fs.Bool("explain", false, "add why every operation is or is not a tool (not with --format sarif)")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if *explain && format.value == "sarif" {
		return 0, &exitError{2, errors.New("--explain: not available with --format sarif (use table, json or markdown)")}
	}
	var lock *annotations.Lock
	if *lockFile != "" {
		var err error
		if lock, err = readLock(*lockFile); err != nil {
			return 0, err
		}
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, true)
	if err != nil {
		return 0, err
	}
	cat, err := gateway.BuildCatalog(ctx, cfg, &gateway.CatalogOptions{IncludeOrigin: true, AuditTexts: true})
	if err != nil {
		return 0, c.loadError(err)
	}
	facts := cat.Facts()
	prompts := cat.LockedPrompts(cfg)
	resources := cat.ResourceFacts()
	locked := make([]annotations.LockedResource, len(resources))
	for i, r := range resources {
		locked[i] = r.LockedResource
	}
	if *writeLock != "" {
		var buf bytes.Buffer
		l := annotations.NewLock(facts)
		l.SetPrompts(prompts)
		l.SetResources(locked)
		l.Write(&buf)
		if err := os.WriteFile(*writeLock, buf.Bytes(), 0o644); err != nil {
			return 0, fmt.Errorf("--write-lock: %v", err)
		}
		// stdout carries the report: the confirmation goes with the logs.
		parts := []string{fmt.Sprintf("%d tools", len(facts))}
		for _, c := range []struct {
			n    int
			noun string
		}{{len(prompts), "prompt"}, {len(locked), "resource"}} {
			switch c.n {
			case 0:
			case 1:
				parts = append(parts, "1 "+c.noun)
			default:
				parts = append(parts, fmt.Sprintf("%d %ss", c.n, c.noun))
			}
		}
		what := parts[0]
		if len(parts) > 1 {
			what = strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
		}
		fmt.Fprintf(m.stderr, "mcpgate: wrote %s to %s\n", what, *writeLock)
	}
	report := annotations.NewReport(facts, lock, cat.Skipped...)
	report.Prompts = prompts
	report.Listing = cat.ListingMode(cfg)
	report.Resources = resources
	if lock != nil {
		report.Drift.ComparePrompts(lock, prompts)
		report.Drift.CompareResources(lock, locked)
	}
	if *explain {
		err = (&gateway.ExplainedReport{Report: report, Selection: cat.Selection, PlaybookMCP: cat.PlaybookParts}).Write(m.stdout, format.value)
	} else {
		err = report.Write(m.stdout, format.value)
	}
	if err != nil {
		return 0, err
	}
	return report.ExitCode(failOn.value), nil
}
