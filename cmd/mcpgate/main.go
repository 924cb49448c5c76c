// Command mcpgate is an MCP gateway for REST APIs: it reads an API's OpenAPI
// document and serves the operations tagged agent-exposed as MCP tools.
//
// Usage:
//
//	mcpgate serve  [--config F | --openapi SRC] [--upstream URL] [--addr HOST:PORT] [--stateful]
//	mcpgate stdio  [--config F | --openapi SRC] [--upstream URL]
//	mcpgate tools  [--config F | --openapi SRC] [--all] [--expose-tag T] [--format json|table] [--explain]
//	mcpgate audit  [--config F | --openapi SRC] [--format table|json|markdown|sarif]
//	               [--write-lock FILE] [--lock FILE] [--fail-on error|warning|never] [--explain]
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
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/examples/orchestrator/api"
	"github.com/mcpgate/mcpgate/examples/playbooks/engine"
	"github.com/mcpgate/mcpgate/gateway"
)

const usage = `mcpgate — serve a REST API's OpenAPI operations as MCP tools

Usage:
  mcpgate serve  [flags]   serve Streamable HTTP at /mcp (default: the built-in demo)
  mcpgate stdio  [flags]   serve over stdin/stdout, for Claude Desktop-style clients
  mcpgate tools  [flags]   print the tool catalog and exit
  mcpgate audit  [flags]   hints with provenance, lint findings, lockfile drift

Run 'mcpgate <command> -h' for the flags of a command.
`

// exitError carries an exit status: 2 for bad input (usage, config, a document
// that cannot be loaded), 1 for failures while running.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(ctx, args)
	case "stdio":
		err = stdio(ctx, args)
	case "tools":
		err = tools(ctx, args)
	case "audit":
		var code int
		code, err = audit(ctx, args)
		if err == nil && code != 0 {
			os.Exit(code)
		}
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "mcpgate: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "mcpgate: %s\n", oneLine(err.Error()))
		} else {
			code = 0
		}
		os.Exit(code)
	}
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
	nameStyle  string
	logLevel   string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "YAML configuration `file`")
	fs.StringVar(&c.openapi, "openapi", "", "OpenAPI document: file path or http(s) URL, JSON or YAML (3.0, 3.1, Swagger 2.0)")
	fs.StringVar(&c.upstream, "upstream", "", "base `URL` of the API (default: the document's servers[0])")
	fs.Var(&c.exposeTags, "expose-tag", "expose operations with this `tag` (repeatable; default agent-exposed)")
	fs.BoolVar(&c.all, "all", false, "expose every operation")
	fs.StringVar(&c.nameStyle, "name-style", "", "tool names: strict (default, ^[a-zA-Z0-9_-]{1,64}$) or spec (SEP-986)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{2, err}
	}
	if fs.NArg() > 0 {
		return &exitError{2, fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// loadConfig builds the configuration from --config and the flags. demo
// reports that neither named an API, so the built-in demo is served.
func (c *common) loadConfig(o gateway.Overrides, allowDemo bool) (cfg *gateway.Config, demo bool, err error) {
	cfg = &gateway.Config{}
	if c.config != "" {
		if cfg, err = gateway.LoadConfig(c.config); err != nil {
			return nil, false, &exitError{2, err}
		}
	}
	o.OpenAPI, o.BaseURL, o.ExposeTags, o.ExposeAll, o.NameStyle = c.openapi, c.upstream, c.exposeTags, c.all, c.nameStyle
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
	}
	if err := cfg.Validate(); err != nil {
		return nil, false, &exitError{2, fmt.Errorf("config: %v", err)}
	}
	return cfg, demo, nil
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

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, &exitError{2, fmt.Errorf("--log-level: %v", err)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

func newGateway(ctx context.Context, cfg *gateway.Config, opts *gateway.Options) (*gateway.Gateway, error) {
	g, err := gateway.New(ctx, cfg, opts)
	if err != nil {
		return nil, &exitError{2, err}
	}
	for _, w := range g.Catalog().Warnings {
		opts.Logger.Warn("openapi document", "warning", w)
	}
	return g, nil
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate serve", flag.ContinueOnError)
	var c common
	c.register(fs)
	addr := fs.String("addr", "", "listen `HOST:PORT` (default 127.0.0.1:8080)")
	stateful := fs.Bool("stateful", false, "keep an MCP session per client (default: stateless)")
	lockFile := fs.String("lock", "", "serve only the tools of this reviewed `lockfile` unchanged (see mcpgate audit --write-lock)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var lock *annotations.Lock
	if *lockFile != "" {
		var err error
		if lock, err = readLock(*lockFile); err != nil {
			return err
		}
	}
	cfg, demo, err := c.loadConfig(gateway.Overrides{Listen: *addr, Stateful: *stateful}, true)
	if err != nil {
		return err
	}
	logger, err := c.logger(os.Stderr)
	if err != nil {
		return err
	}
	g, err := newGateway(ctx, cfg, &gateway.Options{Logger: logger, Lock: lock})
	if err != nil {
		return err
	}
	if d := g.Drift(); !d.Empty() {
		var held []string
		held = append(held, d.Added...)
		for _, c := range d.Changed {
			held = append(held, c.Tool+" ("+c.Field+" "+c.From+" → "+c.To+")")
		}
		fmt.Fprintf(os.Stderr, "mcpgate: --lock %s: not serving %d tools that drifted from the lock: %s\n", *lockFile, len(held), strings.Join(held, ", "))
		if len(d.Removed) > 0 {
			fmt.Fprintf(os.Stderr, "mcpgate: --lock %s: locked tools no longer in the catalog: %s\n", *lockFile, strings.Join(d.Removed, ", "))
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	mode := "stateless"
	if cfg.Stateful {
		mode = "stateful"
	}
	fmt.Fprintf(os.Stderr, "mcpgate: listening on %s (%d tools, %s)\n", url, g.Served(), mode)
	if demo {
		fmt.Fprintln(os.Stderr, "mcpgate: serving the built-in demo (examples/orchestrator and examples/playbooks, in-process)")
	}
	fmt.Fprint(os.Stderr, snippets(url))

	// No server-wide ReadTimeout or WriteTimeout: they run from the start of
	// a request to the end of its answer, so they would cut SSE streams and
	// long tool calls. A slow body is cut by the front door's per-request
	// body deadline (body_timeout) instead; slow headers by ReadHeaderTimeout.
	srv := &http.Server{
		Handler:           g.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second, // keep-alive connections between requests
		MaxHeaderBytes:    64 << 10,          // a bearer token fits many times over
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
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

func stdio(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate stdio", flag.ContinueOnError)
	var c common
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, true)
	if err != nil {
		return err
	}
	// stdout carries the protocol: logs go to stderr only.
	logger, err := c.logger(os.Stderr)
	if err != nil {
		return err
	}
	g, err := newGateway(ctx, cfg, &gateway.Options{
		Logger: logger,
		// Over stdio there is no inbound Authorization header: the local user
		// names the upstream credential in the environment.
		StaticToken: os.Getenv("MCPGATE_UPSTREAM_TOKEN"),
	})
	if err != nil {
		return err
	}
	// ServeStdio answers a bad line and goes on, and ends (nil) when stdin
	// closes or a shutdown request comes, once the calls read are answered.
	if err := g.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // stdin closed, shutdown, or a signal: a normal end
}

func tools(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcpgate tools", flag.ContinueOnError)
	var c common
	c.register(fs)
	format := fs.String("format", "table", "output format: json or table")
	explain := fs.Bool("explain", false, "say for every operation why it is or is not a tool")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *format != "json" && *format != "table" {
		return &exitError{2, fmt.Errorf("--format: %q is not json or table", *format)}
	}
	cfg, _, err := c.loadConfig(gateway.Overrides{}, true)
	if err != nil {
		return err
	}
	cat, err := gateway.BuildCatalog(ctx, cfg)
	if err != nil {
		return &exitError{2, err}
	}
	l := cat.Listing()
	if *explain {
		l = cat.ExplainListing()
	}
	if *format == "json" {
		return l.WriteJSON(os.Stdout)
	}
	return l.WriteTable(os.Stdout)
}

func readLock(path string) (*annotations.Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &exitError{2, err}
	}
	defer f.Close()
	lock, err := annotations.ReadLock(f)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("%s: %v", path, err)}
	}
	return lock, nil
}

// audit prints every tool's hints with their provenance and the lint
// findings, and writes or checks a lockfile. Its exit status is 0 clean, 1
// when findings reach --fail-on or the lock drifted, 2 on bad input.
func audit(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("mcpgate audit", flag.ContinueOnError)
	var c common
	c.register(fs)
	format := fs.String("format", "table", "output format: table, json, markdown or sarif")
	writeLock := fs.String("write-lock", "", "write the catalog's lockfile to `FILE`")
	lockFile := fs.String("lock", "", "compare the catalog against the lockfile `FILE`")
	failOn := fs.String("fail-on", "error", "exit 1 on findings of this severity or worse: error, warning or never")
	explain := fs.Bool("explain", false, "add why every operation is or is not a tool (not with --format sarif)")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	switch *format {
	case "table", "json", "markdown", "sarif":
	default:
		return 0, &exitError{2, fmt.Errorf("--format: %q is not table, json, markdown or sarif", *format)}
	}
	if *explain && *format == "sarif" {
		return 0, &exitError{2, errors.New("--explain: not available with --format sarif (use table, json or markdown)")}
	}
	switch *failOn {
	case "error", "warning", "never":
	default:
		return 0, &exitError{2, fmt.Errorf("--fail-on: %q is not error, warning or never", *failOn)}
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
	cat, err := gateway.BuildCatalogWith(ctx, cfg, &gateway.CatalogOptions{IncludeOrigin: true})
	if err != nil {
		return 0, &exitError{2, err}
	}
	facts := cat.Facts()
	if *writeLock != "" {
		var buf bytes.Buffer
		annotations.NewLock(facts).Write(&buf)
		if err := os.WriteFile(*writeLock, buf.Bytes(), 0o644); err != nil {
			return 0, err
		}
	}
	report := annotations.NewReport(facts, lock, cat.Skipped...)
	if *explain {
		err = (&gateway.ExplainedReport{Report: report, Selection: cat.Selection}).Write(os.Stdout, *format)
	} else {
		err = report.Write(os.Stdout, *format)
	}
	if err != nil {
		return 0, err
	}
	return report.ExitCode(*failOn), nil
}
