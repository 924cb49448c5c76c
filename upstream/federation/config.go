package federation

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults applied by [Config.WithDefaults].
const (
	DefaultTimeout = 30 * time.Second
	DefaultRefresh = 5 * time.Minute
	// DefaultMaxResponseBytes is Config.MaxResponseBytes's default.
	DefaultMaxResponseBytes = 16 << 20
)

// Config is an upstream MCP server, as written under an upstream's `mcp:`
// key in the gateway's YAML. Exactly one of Command, URL and Server names
// the server.
type Config struct {
	// Command is a stdio child's argv: the gateway starts it and speaks
	// MCP over its stdin and stdout.
	Command []string `yaml:"command"`
	// URL is a Streamable HTTP endpoint, or a legacy HTTP+SSE endpoint
	// when Transport is "sse".
	URL string `yaml:"url"`
	// Server is a slug whose URL is read from the environment by
	// [ServerEndpoint] (MCPGATE_MCP_<SLUG>_ENDPOINT, then NOETL's).
	Server string `yaml:"server"`
	// Transport is "" or "streamable" (the default) or "sse" (the
	// 2024-11-05 HTTP+SSE transport); only with URL or Server.
	Transport string `yaml:"transport"`
	// Env is added to a stdio child's environment, which inherits nothing
	// from the gateway's but PATH and HOME: the gateway's secrets stay
	// out of a third-party server's reach unless listed here.
	Env map[string]string `yaml:"env"`
	// Timeout bounds each call to the upstream; default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// TrustHints says the upstream's tool annotations may be believed
	// (readOnlyHint lets a client auto-approve a call). The gateway's
	// catalog reads it; this package only carries it.
	TrustHints bool `yaml:"trust_hints"`
	// Refresh is how often the upstream's lists are read again; default
	// 5m; negative: never (list_changed notifications still count).
	Refresh time.Duration `yaml:"refresh"`
	// MaxResponseBytes bounds each HTTP answer of the upstream: a JSON
	// body, or all of one SSE stream (a call's result with its
	// notifications); past it the read fails, saying so, and the call is
	// an error. Default DefaultMaxResponseBytes (16 MiB: MCP results carry
	// images and files as base64); must not be negative. A stdio child's
	// lines are go-sdk's to read.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// ProtocolVersion is the MCP version offered to the upstream first;
	// the upstream may answer with an older one it speaks. Default "":
	// go-sdk's latest (2026-07-28, discovered without a handshake, with
	// protocol fields in every request's _meta). An earlier version
	// ("2025-11-25") keeps a session with one handshake and plainer
	// requests, which a go-sdk server answers for less CPU (see
	// docs/performance.md).
	ProtocolVersion string `yaml:"protocol_version"`
}

// protocolVersions are the versions go-sdk v1.8.0's client speaks.
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Transport names accepted in [Config.Transport].
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
)

// Validate reports the first problem in c, naming its key ("mcp.url: …").
// It does not change c and does not read the environment: a Server slug's
// endpoint is resolved by [New].
func (c *Config) Validate() error {
	set := 0
	if len(c.Command) > 0 {
		set++
	}
	if c.URL != "" {
		set++
	}
	if c.Server != "" {
		set++
	}
	switch {
	case set == 0:
		return errors.New("mcp: set one of command, url or server")
	case set > 1:
		return errors.New("mcp: set only one of command, url or server")
	}
	if len(c.Command) > 0 {
		if strings.TrimSpace(c.Command[0]) == "" {
			return errors.New("mcp.command: the program (first element) is empty")
		}
		if c.Transport != "" {
			return fmt.Errorf("mcp.transport: %q applies to url or server, not command", c.Transport)
		}
	} else {
		switch c.Transport {
		case "", TransportStreamable, TransportSSE:
		default:
			return fmt.Errorf("mcp.transport: %q is not one of streamable, sse", c.Transport)
		}
	}
	if len(c.Env) > 0 && len(c.Command) == 0 {
		return errors.New("mcp.env: applies to command only")
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mcp.env: %q is not a variable name", k)
		}
	}
	if c.URL != "" {
		if err := checkURL(c.URL); err != nil {
			return fmt.Errorf("mcp.url: %w", err)
		}
	}
	if c.Server != "" && strings.TrimSpace(c.Server) == "" {
		return errors.New("mcp.server: the slug is blank")
	}
	if v := c.ProtocolVersion; v != "" && !slices.Contains(protocolVersions, v) {
		return fmt.Errorf("mcp.protocol_version: %q is not one of %s", v, strings.Join(protocolVersions, ", "))
	}
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("mcp.max_response_bytes: %d must not be negative", c.MaxResponseBytes)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("mcp.timeout: %v is negative", c.Timeout)
	}
	return nil
}

// checkURL accepts an absolute http or https URL with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q does not parse: %v", s, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if u.User != nil {
		// Credentials in a URL end up in logs and error texts.
		return fmt.Errorf("%q carries user info; send credentials as a Credential instead", redactURL(u))
	}
	return nil
}

// redactURL drops user info, the query and the fragment: the parts that
// may carry a secret.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

// WithDefaults returns c with the documented defaults filled in.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Refresh = cmp.Or(c.Refresh, DefaultRefresh)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	if c.Transport == "" && len(c.Command) == 0 {
		c.Transport = TransportStreamable
	}
	return c
}
