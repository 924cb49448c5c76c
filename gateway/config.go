package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
)

// Defaults applied by [Config.Validate].
const (
	DefaultListen  = "127.0.0.1:8080"
	DefaultTimeout = 30 * time.Second

	DefaultMaxToolBytes     = 32 << 10
	DefaultLargeResultBytes = 256 << 10
	DefaultMaxCatalogBytes  = 2 << 20

	// Bounds of the HTTP front door at /mcp (see Config).
	DefaultMaxBodyBytes   = 4 << 20 // go-sdk's DefaultMaxRequestBodyBytes
	DefaultBodyTimeout    = 10 * time.Second
	DefaultSessionTimeout = 10 * time.Minute
	DefaultMaxSessions    = 1000
)

// Config is the gateway's whole configuration: one plain struct, read from YAML
// (see [LoadConfig]) or built in code. Call Validate before use; it applies the
// defaults.
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
	// MaxCatalogBytes bounds the whole tools/list. Over it, the largest
	// tools are cut first (see MaxToolBytes). Default DefaultMaxCatalogBytes;
	// negative: no bound.
	MaxCatalogBytes int `yaml:"max_catalog_bytes"`
	// MaxResponseMemory bounds the bytes of upstream answers held in memory
	// at once, across all calls to all upstreams; answers are cut at it.
	// Default upstream.DefaultMaxResponseMemory (64 MiB): 32 concurrent 4 MiB
	// answers cannot take hundreds of MB. A call that finds no room waits up
	// to its upstream's queue_timeout, then gets an error result.
	MaxResponseMemory int64 `yaml:"max_response_memory"`

	// MaxBodyBytes bounds one HTTP request body to /mcp; a larger one is
	// answered 413 before it is parsed. One MCP message rarely needs more
	// than a few KiB. Default DefaultMaxBodyBytes (4 MiB); must not be
	// negative.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// BodyTimeout bounds the time to receive one request body, from the end
	// of its headers, so that a client trickling its body cannot hold a
	// connection (answered 408). It is set per request and lifted once the
	// body is in, so long SSE answers are not cut. Default
	// DefaultBodyTimeout (10s); must not be negative.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// SessionTimeout closes a stateful session that received no request
	// for this long. Default DefaultSessionTimeout (10m); must not be
	// negative.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxSessions bounds the stateful sessions open at once; an initialize
	// over it is answered 503. A session holds about 14 KB at rest. Default
	// DefaultMaxSessions (1000); must not be negative.
	MaxSessions int `yaml:"max_sessions"`

	// Upstreams are the APIs served. At least one.
	Upstreams []Upstream `yaml:"upstreams"`
}

// upstream returns the upstream named name.
func (c *Config) upstream(name string) *Upstream {
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
	// upstream is busy. Default upstream.DefaultQueueTimeout (5s).
	QueueTimeout time.Duration `yaml:"queue_timeout"`

	// Playbooks, when set, makes the workflow engine's playbooks tools (see
	// Playbooks). Without openapi, base_url and the routes are required.
	Playbooks *Playbooks `yaml:"playbooks"`

	// Handler, when set, serves this upstream's calls in-process instead of
	// over the network. Code only; not settable from YAML.
	Handler http.Handler `yaml:"-"`
	// Document, when set, is the OpenAPI document itself, and OpenAPI only
	// names it in messages. Code only.
	Document []byte `yaml:"-"`
}

// LoadConfig reads a YAML configuration file. Unknown keys and values of the
// wrong type are errors that name the key and the line.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %v", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %v", path, err)
	}
	return cfg, nil
}

var (
	yamlFieldErr = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+`)
	yamlTypeErr  = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+)(?: (.*))? into (\S+)`)
)

// ParseConfig parses YAML configuration bytes; see LoadConfig.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return &cfg, nil // an empty file is an empty config
		}
		return nil, cleanYAMLError(data, err)
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) == nil {
		if err := checkStrictBools(&root, ""); err != nil {
			return nil, err
		}
	}
	return &cfg, nil
}

// cleanYAMLError turns yaml.v3's multi-line "unmarshal errors" into one line
// that names each key and its line:
// `line 5: unknown key "foo"; line 7: upstreams[0].timeout: "soon" is not a duration`.
func cleanYAMLError(data []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // it parsed once already
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if sm := yamlFieldErr.FindStringSubmatch(m); sm != nil {
			m = fmt.Sprintf("line %s: unknown key %q", sm[1], sm[2])
		} else if sm := yamlTypeErr.FindStringSubmatch(m); sm != nil {
			line, _ := strconv.Atoi(sm[1])
			got, want := strings.Trim(sm[3], "`"), sm[4]
			switch {
			case got != "":
			case sm[2] == "map":
				got = "a mapping"
			case sm[2] == "seq":
				got = "a list"
			default:
				got = "a " + sm[2]
			}
			switch want {
			case "time.Duration":
				want = `a duration such as "30s"`
			case "bool", "*bool":
				want = "a boolean (true or false)"
			case "[]string", "[]gateway.Upstream", "[]gateway.PlaybookItem", "[]interface {}":
				want = "a list"
			case "gateway.Config", "gateway.Upstream", "map[string]string", "map[string]annotations.Override", "annotations.Override",
				"gateway.Playbooks", "map[string]interface {}", "map[string]gateway.PlaybookInput", "gateway.PlaybookInput", "playbook.Terminal":
				want = "a mapping"
			default:
				want = "a " + want
			}
			key := keyAtLine(&root, line, "")
			if key == "" {
				key = "value"
			}
			m = fmt.Sprintf("line %d: %s: %s is not %s", line, key, got, want)
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// keyAtLine returns the dotted path of the key whose value starts on line.
func keyAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAtLine(c, line, path); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if v.Line == line && (v.Kind == yaml.ScalarNode || k.Line == line) {
				return p
			}
			if sub := keyAtLine(v, line, p); sub != "" {
				return sub
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if sub := keyAtLine(c, line, fmt.Sprintf("%s[%d]", path, i)); sub != "" {
				return sub
			}
		}
	}
	return ""
}

// Validate checks the configuration and applies the defaults. It names the
// first problem it finds.
func (c *Config) Validate() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
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
	if c.MaxCatalogBytes == 0 {
		c.MaxCatalogBytes = DefaultMaxCatalogBytes
	}
	if c.MaxResponseMemory < 0 {
		return errors.New("max_response_memory: must not be negative")
	}
	if c.MaxResponseMemory == 0 {
		c.MaxResponseMemory = upstream.DefaultMaxResponseMemory
	}
	if err := c.applyFrontDoorDefaults(); err != nil {
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
		if u.OpenAPI == "" && u.Document == nil && u.Playbooks == nil {
			return fmt.Errorf("upstreams[%d] (%s): openapi is required", i, u.Name)
		}
		if err := validateUpstreamPlaybooks(i, u); err != nil {
			return err
		}
		if u.Timeout < 0 {
			return fmt.Errorf("upstreams[%d] (%s): timeout must not be negative", i, u.Name)
		}
		if u.Timeout == 0 {
			u.Timeout = DefaultTimeout
		}
		if u.MaxToolBytes == 0 {
			u.MaxToolBytes = DefaultMaxToolBytes
		}
		if u.LargeResultBytes <= 0 {
			u.LargeResultBytes = DefaultLargeResultBytes
		}
		if u.MaxConcurrent < 0 {
			return fmt.Errorf("upstreams[%d] (%s): max_concurrent must not be negative", i, u.Name)
		}
		if u.MaxConcurrent == 0 {
			u.MaxConcurrent = upstream.DefaultMaxConcurrent
		}
		if u.QueueTimeout < 0 {
			return fmt.Errorf("upstreams[%d] (%s): queue_timeout must not be negative", i, u.Name)
		}
		if u.QueueTimeout == 0 {
			u.QueueTimeout = upstream.DefaultQueueTimeout
		}
		if u.ExposeAll && len(u.ExposeTags) > 0 {
			return fmt.Errorf("upstreams[%d] (%s): expose_all and expose_tags exclude each other", i, u.Name)
		}
		for _, t := range u.ExposeTags {
			if strings.TrimSpace(t) == "" {
				return fmt.Errorf("upstreams[%d] (%s): expose_tags has an empty tag", i, u.Name)
			}
		}
		if _, err := u.selectOptions(); err != nil {
			return fmt.Errorf("upstreams[%d] (%s): %v", i, u.Name, err)
		}
	}
	return nil
}

// selectOptions turns u's gate and rules into tagging options. An error
// names the list, the rule's place in it and the rule.
func (u *Upstream) selectOptions() (*tagging.Options, error) {
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
		for j, text := range list.texts {
			r, err := tagging.ParseRule(text)
			if err != nil {
				return nil, fmt.Errorf("%s[%d]: %v", list.name, j, err)
			}
			*list.rules = append(*list.rules, r)
		}
	}
	return opts, nil
}

// applyFrontDoorDefaults checks the front door's bounds and fills in their
// defaults. Zero means the default; there is no "unbounded".
func (c *Config) applyFrontDoorDefaults() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("max_body_bytes: %d must not be negative", c.MaxBodyBytes)
	case c.BodyTimeout < 0:
		return fmt.Errorf("body_timeout: %s must not be negative", c.BodyTimeout)
	case c.SessionTimeout < 0:
		return fmt.Errorf("session_timeout: %s must not be negative", c.SessionTimeout)
	case c.MaxSessions < 0:
		return fmt.Errorf("max_sessions: %d must not be negative", c.MaxSessions)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	return nil
}

// Overrides are command-line settings that take precedence over a
// configuration file. Empty fields leave the file's value alone.
type Overrides struct {
	Listen     string
	Stateful   bool
	NameStyle  string
	OpenAPI    string
	BaseURL    string
	ExposeTags []string
	ExposeAll  bool
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
	if o.Stateful {
		c.Stateful = true
	}
	if o.NameStyle != "" {
		c.NameStyle = o.NameStyle
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
