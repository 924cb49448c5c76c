// Package config is the gateway's configuration: one plain struct, read from
// YAML (see [Load]) or built in code, checked by [Config.Validate], with its
// defaults filled in by [Config.Resolve] on a copy, so that a caller's
// Config means what it wrote. Package gateway serves a resolved Config and
// re-exports these types under their old names (gateway.Config, …).
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// Defaults applied by [Config.Resolve].
const (
	DefaultListen  = "127.0.0.1:8080"
	DefaultTimeout = 30 * time.Second

	DefaultMaxToolBytes     = 32 << 10
	DefaultLargeResultBytes = 256 << 10
	DefaultMaxCatalogBytes  = 2 << 20

	// DefaultMetricsPath is where the Prometheus metrics are served when
	// MetricsConfig.Path is empty.
	DefaultMetricsPath = "/metrics"

	// Bounds of the HTTP front door at /mcp (see Config).
	DefaultMaxBodyBytes   = 4 << 20 // go-sdk's DefaultMaxRequestBodyBytes
	DefaultBodyTimeout    = 10 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
	DefaultSessionTimeout = 10 * time.Minute
	DefaultMaxSessions    = 1000

	// The drain of `mcpgate serve` (see Config.DrainDelay).
	DefaultDrainDelay      = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultMaxSessionsPerCaller applies when auth is set (see
	// Config.MaxSessionsPerCaller).
	DefaultMaxSessionsPerCaller = 100
)

// Config is the gateway's whole configuration: one plain struct, read from YAML
// (see [Load]) or built in code. Validate checks it; Resolve returns the copy
// that is served, with the defaults applied.
type Config struct {
	// Listen is the HTTP address of `mcpgate serve`. Default DefaultListen.
	Listen string `yaml:"listen"`
	// Stateful keeps an MCP session per client (Mcp-Session-Id). Default false:
	// stateless, so any replica can answer any request and the gateway scales
	// horizontally behind a plain load balancer.
	Stateful bool `yaml:"stateful"`
	// NameStyle is "strict" (default: ^[a-zA-Z0-9_-]{1,64}$, what Claude
	// Desktop, OpenAI and VS Code accept) or "spec" (SEP-986: 128 characters,
	// dots allowed).
	NameStyle string `yaml:"name_style"`
	// SanitizeText removes, from every text a client is sent (tool names,
	// titles and descriptions; every title, description, enum value,
	// const, default, example and property name of their schemas), the
	// characters a reader does not see: zero-width and other invisible
	// characters, bidirectional controls and Unicode tag characters (see
	// annotations.SanitizeText, which keeps ordinary text — emoji, joiners
	// in Persian or Indic text — whole). A document can hide instructions
	// for the model in them; `mcpgate audit` reports them whatever this
	// says (MCPG012–MCPG014). An input schema's enum value or property name
	// is cleaned too, and a call then carries the cleaned value; an output
	// schema's enum or const that would change is left out. Default true.
	SanitizeText *bool `yaml:"sanitize_text"`
	// MaxCatalogBytes bounds the whole tools/list. Over it, the largest
	// tools are cut first (see MaxToolBytes). Default DefaultMaxCatalogBytes;
	// negative: no bound.
	MaxCatalogBytes int `yaml:"max_catalog_bytes"`
	// MaxResponseMemory bounds the memory held for upstream answers at
	// once, across all calls to all upstreams; answers are cut at it.
	// Default upstream.DefaultMaxResponseMemory (64 MiB): 32 concurrent 4 MiB
	// answers cannot take hundreds of MB. A call that finds no room waits up
	// to its upstream's queue_timeout, then gets an error result. An answer
	// counts from its first byte read until its result has been written to
	// the client (or that write failed: see WriteTimeout), over HTTP; over
	// stdio, until its result is made. It counts its bytes, once (the
	// result's text and structuredContent share them); while it is decoded
	// to be checked against its output schema, the decoded copy; and, when
	// go-sdk writes it, go-sdk's two encodings of it (see the gateway's sdkAnswerCost).
	MaxResponseMemory int64 `yaml:"max_response_memory"`

	// MaxBodyBytes bounds one HTTP request body to /mcp; a larger one is
	// answered 413 before it is parsed. One MCP message rarely needs more
	// than a few KiB. Default DefaultMaxBodyBytes (4 MiB); must not be
	// negative.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// BodyTimeout bounds the time to receive one request body, from the end
	// of its headers, so that a client trickling its body cannot hold a
	// connection (answered 408). It is set per request and lifted once the
	// body is in, so long SSE answers are not cut. mcpgate serve makes it
	// its http.Server's ReadTimeout, which runs from the request's start;
	// the gateway then sets no deadline of its own. Default
	// DefaultBodyTimeout (10s); must not be negative.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// WriteTimeout bounds each write of an answer, on every route of
	// gateway.Gateway.Handler (see httpbound.Writes): a client that stops reading is cut off
	// after it, and what its answer held (the upstream's bytes, counted by
	// MaxResponseMemory until the answer is written) is freed. It runs from
	// each write, so a long SSE stream that keeps being read is not cut.
	// On a server set up by gateway.Gateway.ConfigureServer (mcpgate serve's) a
	// watcher cuts a write after between once and 1.25 times it; elsewhere
	// a write deadline gives each write between half of it and all of it
	// (the deadline is moved on only when less than half is left). Default
	// DefaultWriteTimeout (30s); must not be negative.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// SessionTimeout closes a stateful session that received no request
	// for this long. Default DefaultSessionTimeout (10m); must not be
	// negative.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxSessions bounds the stateful sessions open at once; an initialize
	// over it is answered 503. A session holds about 14 KB at rest. Default
	// DefaultMaxSessions (1000); must not be negative.
	MaxSessions int `yaml:"max_sessions"`
	// MaxSessionsPerCaller bounds the stateful sessions one caller holds
	// open at once, so that one caller cannot take all MaxSessions; an
	// initialize over it is answered 429. A caller is the verified token's
	// subject. Default: DefaultMaxSessionsPerCaller (100) when Auth is set;
	// no bound without Auth, where a caller is only the Authorization header
	// it chose to send (a new header is a new caller, and every client that
	// sends none would share one bound); set it to count by that header all
	// the same. Must not be negative.
	MaxSessionsPerCaller int `yaml:"max_sessions_per_caller"`

	// DrainDelay is how long `mcpgate serve` keeps serving after SIGTERM or
	// SIGINT, with /readyz answering 503 "draining", so that load balancers
	// see it and stop sending new requests before the listener closes.
	// Nil means DefaultDrainDelay (5s); 0s stops accepting at once (a
	// single process with no balancer in front). Must not be negative.
	DrainDelay *time.Duration `yaml:"drain_delay"`
	// ShutdownTimeout bounds the wait, once the listener is closed, for the
	// requests in flight to finish; a playbook call still waiting near its
	// end is answered with its execution id, the run left going. Default
	// DefaultShutdownTimeout (30s); must not be negative.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// Metrics configures the Prometheus endpoint. Default: on, at
	// DefaultMetricsPath, on the same listener as /mcp (Metrics.Listen
	// moves it to a listener of its own).
	Metrics MetricsConfig `yaml:"metrics"`

	// Upstreams are the APIs served. At least one.
	Upstreams []Upstream `yaml:"upstreams"`

	// Tasks configures MCP tasks (2025-11-25) for playbook tools: the key
	// that seals task ids, and their ttl. See TasksConfig.
	Tasks TasksConfig `yaml:"tasks"`

	// State says where a fleet's replicas share state: memory (one
	// process, the default) or redis. See StateConfig.
	State StateConfig `yaml:"state"`
	// LogFormat is the log's format: text (slog's key=value, the default)
	// or json (one object a line). --log-format overrides it.
	LogFormat string `yaml:"log_format"`
	// RequestIDHeader is the header that carries the gateway's request id
	// (the one in its log lines and its Mcpgate-Request-Id answer header)
	// to the upstream on every call. Default DefaultRequestIDHeader
	// (X-Request-Id); "none" sends none. See observability.go.
	RequestIDHeader string `yaml:"request_id_header"`
	// Tracing turns on OpenTelemetry tracing (see TracingConfig). Default
	// off.
	Tracing TracingConfig `yaml:"tracing"`

	// Auth verifies inbound bearer tokens (issuer, audience, scopes, the
	// step-up policy); see auth.Config. Nil: nothing is verified, and the
	// gateway says so at start-up.
	Auth *auth.Config `yaml:"auth"`

	// Prompts are prompt templates served beside the tools (see Prompt).
	Prompts []Prompt `yaml:"prompts"`

	// Catalog says how tools/list presents the tools: all of them (flat,
	// the default) or the pinned ones and search meta-tools (see
	// CatalogConfig).
	Catalog CatalogConfig `yaml:"catalog"`
}

// MetricsConfig configures the gateway's Prometheus metrics. The endpoint is
// unauthenticated, even when Config.Auth verifies /mcp: it names the tools,
// the upstreams and how they fare (call counts, error kinds, latencies, status
// codes), plus the process's memory and goroutines, never arguments, tokens or
// session ids. Serve it on a listener of its own (Listen) that only the
// scraper can reach, firewall it, or turn it off.
type MetricsConfig struct {
	// Enabled serves the metrics at Path. Default true. False also stops
	// collecting them: a call then pays nothing for metrics.
	Enabled *bool `yaml:"enabled"`
	// Path is where the metrics are served. Default DefaultMetricsPath; it
	// must start with "/" and not be one of the gateway's other routes.
	Path string `yaml:"path"`
	// Listen is the HOST:PORT of a listener of their own for the metrics
	// (`mcpgate serve`; an embedding service mounts
	// gateway.Gateway.MetricsHandler). The main listener then has no metrics
	// route. Default "": served beside /mcp.
	Listen string `yaml:"listen"`
}

// SanitizesText reports whether served texts are sanitized (SanitizeText).
func (c *Config) SanitizesText() bool { return c.SanitizeText == nil || *c.SanitizeText }

// On reports whether metrics are collected and served.
func (m MetricsConfig) On() bool { return m.Enabled == nil || *m.Enabled }

// UpstreamNamed returns the upstream named name, or an empty one.
func (c *Config) UpstreamNamed(name string) *Upstream {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return &Upstream{}
}

// Upstream is one REST API and the tools made from it.
type Upstream struct {
	// Name identifies the upstream in logs and the catalog. Default "api",
	// or "api2", "api3", ... for later ones.
	Name string `yaml:"name"`
	// OpenAPI is the document: a file path or an http(s) URL, JSON or YAML,
	// OpenAPI 3.0/3.1 or Swagger 2.0. With Handler set, a path starting with
	// "/" is fetched from the handler.
	OpenAPI string `yaml:"openapi"`
	// BaseURL is where calls go. Default: the document's servers[0], resolved
	// against the document's URL when relative.
	BaseURL string `yaml:"base_url"`
	// ExposeTags are the gate tags. Default [agent-exposed]. Not allowed
	// with Include, which replaces the tag gate.
	ExposeTags []string `yaml:"expose_tags"`
	// ExposeAll exposes every operation, whatever its tags; Exclude still
	// applies. Not allowed with Include or ExposeTags.
	ExposeAll bool `yaml:"expose_all"`
	// Include, when set, replaces the tag gate: only operations matching one
	// of its rules become tools. A rule is "tag:NAME", "METHOD /path" (method
	// or *, path template with * globs that cross "/": "GET /v1/customers*"),
	// a bare upper-case method ("GET"), or an operationId with * globs; see
	// tagging.Rule for the exact syntax. A malformed rule is a configuration
	// error. Default: none, so the tag gate decides.
	Include []string `yaml:"include"`
	// Exclude takes out operations matching one of its rules (same syntax as
	// Include), whatever the gate or Include says. An operation's own
	// x-mcp-exposed wins over both lists. Default: none.
	Exclude []string `yaml:"exclude"`
	// Resources selects operations served as MCP resources (resources/list,
	// resources/templates/list, resources/read) besides those the document
	// marks (x-mcp-resource, the agent-resource tag): same rule syntax as
	// Include. Only GET operations become resources; another selected is
	// an audit finding. Independent of the tool gate: an operation may be
	// both a tool and a resource. Default: none.
	Resources []string `yaml:"resources"`
	// Timeout bounds each call to this upstream. Default DefaultTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// ToolPrefix is prepended to every tool name of this upstream, to keep
	// names apart when several upstreams are served.
	ToolPrefix string `yaml:"tool_prefix"`
	// Rename maps an operationId (or "METHOD /path") to a tool name.
	Rename map[string]string `yaml:"rename"`
	// Annotations overrides hints per tool name; it wins over everything the
	// document says.
	Annotations map[string]annotations.Override `yaml:"annotations"`
	// OpenWorld is the openWorld hint of tools that do not declare one.
	// Default false.
	OpenWorld bool `yaml:"open_world"`
	// NoOutputSchema leaves outputSchema out of every tool of this upstream.
	NoOutputSchema bool `yaml:"no_output_schema"`
	// LargeResultBytes bounds the response read for a tool tagged
	// agent-large (it may return many records); the text beyond it is cut
	// and the result says so. Default DefaultLargeResultBytes.
	LargeResultBytes int64 `yaml:"large_result_bytes"`
	// MaxToolBytes bounds one tool's JSON in tools/list. A tool over it is
	// degraded, not dropped: its outputSchema goes first, then nested
	// schemas become permissive stubs that say so. Default
	// DefaultMaxToolBytes; negative: no bound.
	MaxToolBytes int `yaml:"max_tool_bytes"`
	// MaxConcurrent bounds the calls in flight to this upstream. Default
	// upstream.DefaultMaxConcurrent (64): one batch must not open thousands
	// of connections.
	MaxConcurrent int `yaml:"max_concurrent"`
	// QueueTimeout is how long a call over max_concurrent (or over
	// max_response_memory) waits before it gets an error result saying the
	// upstream is busy: its waits for a slot and for room, in all.
	// Default upstream.DefaultQueueTimeout (5s).
	QueueTimeout time.Duration `yaml:"queue_timeout"`
	// DirectTransport lets calls to this upstream, when its base URL is
	// plain http and no proxy is set for it (HTTP_PROXY/NO_PROXY), go
	// through the gateway's own HTTP/1.1 transport: net/http's request
	// writer and response parser without net/http Transport's two
	// goroutines per connection, 15–20 µs less a call. Default true. An
	// https or proxied upstream uses net/http's Transport whatever this
	// says. Set it false to send this upstream's calls through net/http's
	// Transport too: for a server that misbehaves with the direct one (the
	// two are meant to read every answer alike: a difference is a bug to
	// report), or to compare the two. It is per upstream, like timeout and
	// max_concurrent, because each upstream has a transport of its own and
	// a server that misbehaves is one server; set it on each upstream to
	// compare them all.
	DirectTransport *bool `yaml:"direct_transport"`

	// Auth is the credential this upstream is given: mode forward (the
	// default with a single remote upstream or an in-process handler),
	// exchange, client_credentials, static or none; see auth.Upstream.
	Auth auth.Upstream `yaml:"auth"`
	// Playbooks, when set, makes the workflow engine's playbooks tools (see
	// Playbooks). Without openapi, base_url and the routes are required.
	Playbooks *Playbooks `yaml:"playbooks"`
	// MCP, when set, makes this upstream an MCP server (a stdio child, a
	// Streamable HTTP or legacy SSE URL, or a server slug resolved from
	// the environment; see federation.Config): its tools, prompts and
	// resources are served under ToolPrefix (default "<name>_"). Include
	// and Exclude are then tool-name globs ("read_*"), Rename and
	// Annotations key on the upstream's own tool names. Not with openapi,
	// base_url, playbooks, expose_tags or expose_all.
	MCP *federation.Config `yaml:"mcp"`
	// ToolPrefixSet says ToolPrefix was given, "" included: Parse sets it
	// when the file has the key. An MCP upstream whose ToolPrefix is not
	// set gets "<name>_"; code that means no prefix sets this true.
	ToolPrefixSet bool `yaml:"-"`

	// Handler, when set, serves this upstream's calls in-process instead of
	// over the network. Code only; not settable from YAML.
	Handler http.Handler `yaml:"-"`
	// Document, when set, is the OpenAPI document itself, and OpenAPI only
	// names it in messages. Code only.
	Document []byte `yaml:"-"`
}

// Direct reports whether u's calls may use the direct transport (see
// DirectTransport).
func (u *Upstream) Direct() bool { return u.DirectTransport == nil || *u.DirectTransport }

// LoadConfig reads a YAML configuration file. Unknown keys and values of the
// wrong type are errors that name the key and the line. A relative openapi
// file path is read from the configuration file's folder, not the working
// directory, so a configuration means the same wherever it is run from.
//
// Errors name the file: an *fs.PathError when it cannot be read, else
// "PATH: line 3: …".
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		if isFilePath(u.OpenAPI) && !filepath.IsAbs(u.OpenAPI) {
			u.OpenAPI = filepath.Join(dir, u.OpenAPI)
		}
	}
	return cfg, nil
}

// isFilePath reports whether an openapi source names a file, not a URL.
func isFilePath(src string) bool {
	if src == "" {
		return false
	}
	u, err := url.Parse(src)
	return err != nil || (u.Scheme != "http" && u.Scheme != "https")
}

// Parse parses YAML configuration bytes; see Load. Relative
// openapi paths are left as they are.
func Parse(data []byte) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return &cfg, nil // an empty file is an empty config
		}
		return nil, upstream.DecodeError(data, err)
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) == nil {
		if err := checkStrictBools(&root, ""); err != nil {
			return nil, err
		}
		markToolPrefixes(&root, &cfg)
	}
	return &cfg, nil
}

// markToolPrefixes sets ToolPrefixSet on each upstream whose mapping in
// the file has a tool_prefix key: `tool_prefix: ""` means no prefix, which
// the decoded string alone cannot tell from no key at all.
func markToolPrefixes(root *yaml.Node, cfg *Config) {
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "upstreams" || root.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for j, u := range root.Content[i+1].Content {
			for k := 0; u.Kind == yaml.MappingNode && k+1 < len(u.Content); k += 2 {
				if u.Content[k].Value == "tool_prefix" && j < len(cfg.Upstreams) {
					cfg.Upstreams[j].ToolPrefixSet = true
				}
			}
		}
	}
}

// Validate checks the configuration and names the first problem it finds.
// It changes nothing; [Config.Resolve] gives the configuration as served.
func (c *Config) Validate() error {
	_, err := c.Resolve()
	return err
}

// Resolve checks the configuration, like Validate, and returns a copy of it
// with every default applied: the configuration the gateway serves. c is
// left as it was (its Upstreams, Playbooks, Auth and Metrics included), so
// one Config can be resolved again, or served twice, and mean the same.
func (c *Config) Resolve() (*Config, error) {
	r := c.clone()
	if err := r.resolve(); err != nil {
		return nil, err
	}
	return r, nil
}

// clone copies what resolve writes to: the struct, the upstreams, each
// upstream's playbooks block and the auth section. What resolve only reads
// (maps, item lists, schemas) is shared.
func (c *Config) clone() *Config {
	r := *c
	r.Upstreams = slices.Clone(c.Upstreams)
	for i := range r.Upstreams {
		if p := r.Upstreams[i].Playbooks; p != nil {
			cp := *p
			r.Upstreams[i].Playbooks = &cp
		}
		if m := r.Upstreams[i].MCP; m != nil {
			cp := *m
			r.Upstreams[i].MCP = &cp
		}
	}
	if c.Auth != nil {
		a := *c.Auth
		r.Auth = &a
	}
	return &r
}

// resolve is Resolve on the copy it owns.
func (c *Config) resolve() error {
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not HOST:PORT", c.Listen)
	}
	switch c.NameStyle {
	case "":
		c.NameStyle = "strict"
	case "strict", "spec":
	default:
		return fmt.Errorf("name_style: %q is not strict or spec", c.NameStyle)
	}
	c.MaxCatalogBytes = cmp.Or(c.MaxCatalogBytes, DefaultMaxCatalogBytes)
	if c.MaxResponseMemory < 0 {
		return errors.New("max_response_memory: must not be negative")
	}
	c.MaxResponseMemory = cmp.Or(c.MaxResponseMemory, upstream.DefaultMaxResponseMemory)
	if err := c.applyFrontDoorDefaults(); err != nil {
		return err
	}
	if err := c.Metrics.validate(c.Listen); err != nil {
		return err
	}
	if err := c.Tasks.validate(); err != nil {
		return err
	}
	if err := c.State.validate(); err != nil {
		return err
	}
	if err := c.State.needsTaskKey(c.Tasks); err != nil {
		return err
	}
	if err := c.resolveObservability(); err != nil {
		return err
	}
	if err := c.validatePrompts(); err != nil {
		return err
	}
	if err := c.Catalog.resolve(); err != nil {
		return err
	}
	if len(c.Upstreams) == 0 {
		return errors.New("upstreams: at least one upstream is needed")
	}
	names := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Name == "" {
			u.Name = "api"
			if i > 0 {
				u.Name = fmt.Sprintf("api%d", i+1)
			}
		}
		if names[u.Name] {
			return fmt.Errorf("upstreams[%d]: name %q is used twice", i, u.Name)
		}
		names[u.Name] = true
		if strings.ContainsFunc(u.Name, unicode.IsControl) {
			// The name is in every error below, in logs and in metrics
			// labels: a line break there would forge a line.
			return fmt.Errorf("upstreams[%d]: name %q has a control character", i, u.Name)
		}
		if u.MCP != nil {
			if err := resolveMCP(u); err != nil {
				return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
			}
		} else if u.OpenAPI == "" && u.Document == nil && u.Playbooks == nil {
			return fmt.Errorf("upstreams[%d] (%s): openapi is required (or playbooks, or mcp)", i, u.Name)
		}
		if err := validateUpstreamPlaybooks(i, u, c.Auth != nil); err != nil {
			return err
		}
		if u.Timeout < 0 {
			return fmt.Errorf("upstreams[%d] (%s): timeout must not be negative", i, u.Name)
		}
		u.Timeout = cmp.Or(u.Timeout, DefaultTimeout)
		u.MaxToolBytes = cmp.Or(u.MaxToolBytes, DefaultMaxToolBytes)
		if u.LargeResultBytes <= 0 {
			u.LargeResultBytes = DefaultLargeResultBytes
		}
		if u.MaxConcurrent < 0 {
			return fmt.Errorf("upstreams[%d] (%s): max_concurrent must not be negative", i, u.Name)
		}
		u.MaxConcurrent = cmp.Or(u.MaxConcurrent, upstream.DefaultMaxConcurrent)
		if u.QueueTimeout < 0 {
			return fmt.Errorf("upstreams[%d] (%s): queue_timeout must not be negative", i, u.Name)
		}
		u.QueueTimeout = cmp.Or(u.QueueTimeout, upstream.DefaultQueueTimeout)
		if u.ExposeAll && len(u.ExposeTags) > 0 {
			return fmt.Errorf("upstreams[%d] (%s): expose_all and expose_tags exclude each other", i, u.Name)
		}
		for _, t := range u.ExposeTags {
			if strings.TrimSpace(t) == "" {
				return fmt.Errorf("upstreams[%d] (%s): expose_tags has an empty tag", i, u.Name)
			}
		}
		if u.MCP != nil {
			continue // include and exclude are tool-name globs (resolveMCP)
		}
		if _, err := u.Selection(); err != nil {
			return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
		}
		if _, err := u.ResourceRules(); err != nil {
			return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
		}
	}
	return c.validateAuth()
}

// resolveMCP checks an MCP upstream and applies its defaults: the keys of
// an OpenAPI upstream are refused by name, include and exclude must be
// tool-name globs, and a stdio child gets no credential.
func resolveMCP(u *Upstream) error {
	for _, k := range []struct {
		key string
		set bool
	}{
		{"openapi", u.OpenAPI != "" || u.Document != nil}, {"base_url", u.BaseURL != ""}, {"playbooks", u.Playbooks != nil},
		{"expose_tags", len(u.ExposeTags) > 0}, {"expose_all", u.ExposeAll}, {"handler", u.Handler != nil},
		{"resources", len(u.Resources) > 0},
	} {
		if k.set {
			return fmt.Errorf("mcp and %s exclude each other: an upstream is an OpenAPI API, a playbook engine or an MCP server", k.key)
		}
	}
	if err := u.MCP.Validate(); err != nil {
		return err
	}
	// timeout, every upstream's key, and mcp.timeout are one bound: a
	// call's. Set on the upstream, it is the call's; set on both, they
	// must agree; after defaults the two are the same (so a configuration
	// validated again is read alike).
	switch {
	case u.Timeout > 0 && u.MCP.Timeout > 0 && u.Timeout != u.MCP.Timeout:
		return fmt.Errorf("timeout (%s) and mcp.timeout (%s) are one bound, a call's: set one of them", u.Timeout, u.MCP.Timeout)
	case u.Timeout > 0:
		u.MCP.Timeout = u.Timeout
	}
	*u.MCP = u.MCP.WithDefaults()
	if u.Timeout >= 0 {
		u.Timeout = u.MCP.Timeout
	}
	for _, list := range []struct {
		name  string
		globs []string
	}{{"include", u.Include}, {"exclude", u.Exclude}} {
		for j, g := range list.globs {
			if strings.TrimSpace(g) == "" || strings.ContainsFunc(g, unicode.IsControl) {
				return fmt.Errorf("%s[%d]: %q is not a tool-name glob", list.name, j, g)
			}
		}
	}
	if len(u.MCP.Command) > 0 && u.Auth.Mode != "" && u.Auth.Mode != auth.ModeNone {
		return fmt.Errorf("auth.mode: a stdio child gets no credential (%s); give it what it needs in mcp.env", u.Auth.Mode)
	}
	if len(u.MCP.Command) > 0 {
		u.Auth.Mode = auth.ModeNone
	}
	if !u.ToolPrefixSet {
		u.ToolPrefix = u.Name + "_"
		u.ToolPrefixSet = true
	}
	return nil
}

// IsMCPChild reports whether u is an MCP server the gateway runs as a stdio
// child: it is not reached over the network, so it gets no token.
func (u *Upstream) IsMCPChild() bool { return u.MCP != nil && len(u.MCP.Command) > 0 }

// validateAuth checks the auth section and each upstream's credential mode.
// With more than one remote upstream every one must state its mode: the
// default, forward, would send one caller's token to several origins, and a
// token is meant for one audience (MCP security guidance: no token
// passthrough to other resources).
func (c *Config) validateAuth() error {
	if c.Auth != nil {
		if err := c.Auth.Validate(); err != nil {
			return err
		}
	}
	remote := 0
	for i := range c.Upstreams {
		if c.Upstreams[i].Handler == nil && !c.Upstreams[i].IsMCPChild() {
			remote++
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		name := u.Name
		if remote > 1 && u.Auth.Mode == "" {
			return fmt.Errorf("upstreams[%d] (%s): auth.mode is required when %d remote upstreams are served: "+
				"the default, forward, would send each caller's token to every upstream's origin; "+
				"set forward only where the token is meant to go, and exchange, client_credentials, static or none elsewhere",
				i, name, remote)
		}
		if err := u.Auth.Validate(c.Auth != nil); err != nil {
			return fmt.Errorf("upstreams[%d] (%s): %v", i, name, err)
		}
	}
	return nil
}

// Selection turns u's gate and rules into tagging options. An error
// names the list, the rule's place in it and the rule.
func (u *Upstream) Selection() (*tagging.Options, error) {
	if len(u.Include) > 0 {
		switch {
		case u.ExposeAll:
			return nil, errors.New("expose_all and include exclude each other: expose_all exposes every operation, include only those it names")
		case len(u.ExposeTags) > 0:
			return nil, errors.New("expose_tags and include exclude each other: include replaces the tag gate; write the tags as include rules (tag:NAME)")
		}
	}
	opts := &tagging.Options{ExposeTags: u.ExposeTags, All: u.ExposeAll}
	for _, list := range []struct {
		name  string
		texts []string
		rules *[]tagging.Rule
	}{{"include", u.Include, &opts.Include}, {"exclude", u.Exclude, &opts.Exclude}} {
		rules, err := parseRules(list.name, list.texts)
		if err != nil {
			return nil, err
		}
		*list.rules = rules
	}
	return opts, nil
}

// ResourceRules parses u's resources rules (see Upstream.Resources). An
// error names the list, the rule's place in it and the rule.
func (u *Upstream) ResourceRules() ([]tagging.Rule, error) {
	return parseRules("resources", u.Resources)
}

func parseRules(list string, texts []string) ([]tagging.Rule, error) {
	var rules []tagging.Rule
	for j, text := range texts {
		r, err := tagging.ParseRule(text)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", list, j, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// applyFrontDoorDefaults checks the front door's bounds and fills in their
// defaults. Zero means the default; there is no "unbounded".
func (c *Config) applyFrontDoorDefaults() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("max_body_bytes: %d must not be negative", c.MaxBodyBytes)
	case c.BodyTimeout < 0:
		return fmt.Errorf("body_timeout: %s must not be negative", c.BodyTimeout)
	case c.WriteTimeout < 0:
		return fmt.Errorf("write_timeout: %s must not be negative", c.WriteTimeout)
	case c.SessionTimeout < 0:
		return fmt.Errorf("session_timeout: %s must not be negative", c.SessionTimeout)
	case c.MaxSessions < 0:
		return fmt.Errorf("max_sessions: %d must not be negative", c.MaxSessions)
	case c.MaxSessionsPerCaller < 0:
		return fmt.Errorf("max_sessions_per_caller: %d must not be negative", c.MaxSessionsPerCaller)
	case c.DrainDelay != nil && *c.DrainDelay < 0:
		return fmt.Errorf("drain_delay: %s must not be negative", *c.DrainDelay)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("shutdown_timeout: %s must not be negative", c.ShutdownTimeout)
	}
	if c.DrainDelay == nil {
		d := DefaultDrainDelay
		c.DrainDelay = &d
	}
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.BodyTimeout = cmp.Or(c.BodyTimeout, DefaultBodyTimeout)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.MaxSessions = cmp.Or(c.MaxSessions, DefaultMaxSessions)
	if c.MaxSessionsPerCaller == 0 && c.Auth != nil {
		c.MaxSessionsPerCaller = DefaultMaxSessionsPerCaller
	}
	return nil
}

// Overrides are command-line settings that take precedence over a
// configuration file. Empty fields leave the file's value alone.
type Overrides struct {
	Listen        string
	MetricsListen string
	Stateful      bool
	NameStyle     string
	OpenAPI       string
	BaseURL       string
	ExposeTags    []string
	ExposeAll     bool
	CatalogMode   string // catalog.mode: flat, search or auto
	// DrainDelay and ShutdownTimeout: nil and 0 leave the file's.
	DrainDelay      *time.Duration
	ShutdownTimeout time.Duration
	LogFormat       string // log_format: text or json
}

// Apply merges o into c. The upstream settings (OpenAPI, BaseURL, ExposeTags,
// ExposeAll) apply to the only upstream, and create it when the file had none;
// with several upstreams they are ambiguous and rejected. ExposeTags and
// ExposeAll replace the file's gate, include rules too (exclude rules stay):
// `--all` shows every operation the exclude rules let through.
func (c *Config) Apply(o Overrides) error {
	if o.Listen != "" {
		c.Listen = o.Listen
	}
	if o.MetricsListen != "" {
		c.Metrics.Listen = o.MetricsListen
	}
	if o.Stateful {
		c.Stateful = true
	}
	if o.NameStyle != "" {
		c.NameStyle = o.NameStyle
	}
	if o.CatalogMode != "" {
		c.Catalog.Mode = o.CatalogMode
	}
	if o.DrainDelay != nil {
		d := *o.DrainDelay
		c.DrainDelay = &d
	}
	if o.ShutdownTimeout != 0 {
		c.ShutdownTimeout = o.ShutdownTimeout
	}
	if o.LogFormat != "" {
		c.LogFormat = o.LogFormat
	}
	if o.OpenAPI == "" && o.BaseURL == "" && len(o.ExposeTags) == 0 && !o.ExposeAll {
		return nil
	}
	switch len(c.Upstreams) {
	case 0:
		if o.OpenAPI == "" {
			return errors.New("--upstream, --expose-tag and --all need --openapi (or a config with one upstream)")
		}
		c.Upstreams = append(c.Upstreams, Upstream{})
	case 1:
	default:
		return errors.New("--openapi, --upstream, --expose-tag and --all apply to a single upstream; the config has several")
	}
	u := &c.Upstreams[0]
	if o.OpenAPI != "" {
		u.OpenAPI = o.OpenAPI
	}
	if o.BaseURL != "" {
		u.BaseURL = o.BaseURL
	}
	if len(o.ExposeTags) > 0 {
		u.ExposeTags = o.ExposeTags
		u.ExposeAll = false
		u.Include = nil
	}
	if o.ExposeAll {
		u.ExposeAll = true
		u.ExposeTags = nil
		u.Include = nil
	}
	return nil
}

// validate checks the metrics settings and fills in the default path; listen
// is the main listener's address.
func (m *MetricsConfig) validate(listen string) error {
	m.Path = cmp.Or(m.Path, DefaultMetricsPath)
	if m.Listen != "" {
		_, port, err := net.SplitHostPort(m.Listen)
		switch {
		case err != nil:
			return fmt.Errorf("metrics.listen: %q is not HOST:PORT", m.Listen)
		case !m.On():
			return errors.New("metrics.listen: set, but metrics are off (metrics.enabled: false)")
		case m.Listen == listen && port != "0":
			return fmt.Errorf("metrics.listen: %q is the main listener's address; leave metrics.listen out to serve the metrics there", m.Listen)
		}
	}
	switch {
	case !strings.HasPrefix(m.Path, "/"):
		return fmt.Errorf("metrics.path: %q must start with /", m.Path)
	case m.Path == "/mcp" || m.Path == "/healthz" || m.Path == "/readyz":
		return fmt.Errorf("metrics.path: %q is taken by another of the gateway's routes", m.Path)
	case strings.ContainsAny(m.Path, "{}?#"):
		return fmt.Errorf("metrics.path: %q must be a plain path (no {, }, ? or #)", m.Path)
	}
	return nil
}
