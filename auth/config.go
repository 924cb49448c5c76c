// Package auth is mcpgate's authorization: it verifies the bearer tokens that
// reach the gateway (OIDC discovery, JWKS, issuer, audience, expiry, scopes),
// answers failures with RFC 6750 challenges that point at the gateway's RFC
// 9728 protected-resource metadata, decides per-tool step-up from the tools'
// annotations, and gives each upstream exactly the credential its
// configuration names (forward, RFC 8693 exchange, client credentials,
// static, none).
//
// It is a leaf package: it knows nothing of the catalog or the MCP server.
// Nothing here logs a token, a cookie or a claim, at any level.
package auth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Config is the inbound side: the `auth:` section of the gateway's
// configuration. A nil *Config means no verification at all (see the README:
// whatever token arrives is forwarded unchecked).
type Config struct {
	// Issuer is the OpenID provider's issuer URL; its discovery document
	// (/.well-known/openid-configuration) names the JWKS and the token
	// endpoint. Required.
	Issuer string `yaml:"issuer"`
	// Audience is the gateway's resource identifier: tokens must carry it in
	// `aud`, and it is the `resource` of the RFC 9728 metadata, byte for
	// byte, since clients compare it with the URL they used. So it is the
	// gateway's public URL of /mcp, e.g. https://gw.example.com/mcp. Required.
	Audience string `yaml:"audience"`
	// Scopes are required on every request. Default none.
	Scopes []string `yaml:"scopes"`
	// Policy names the scopes that the tools' annotations call for.
	Policy Policy `yaml:"policy"`
	// Introspection, when set, verifies opaque tokens (anything that is not
	// a JWS) at an RFC 7662 endpoint; JWTs are still verified locally.
	// Default: none, and an opaque token is refused.
	Introspection *Introspection `yaml:"introspection"`
	// List is "all" (default: tools/list shows every tool, so a client can
	// discover what needs a step-up) or "callable" (tools/list shows a
	// caller only the tools its token's scopes let it call under Policy and
	// the operations' OpenAPI scopes; a client then cannot discover what a
	// step-up would unlock).
	List string `yaml:"list"`
}

// The values of Config.List.
const (
	ListAll      = "all"
	ListCallable = "callable"
)

// Policy is the annotation-aware step-up policy. Empty scopes are not
// required.
type Policy struct {
	// WriteScope is needed to call a tool that is not read-only.
	WriteScope string `yaml:"write_scope"`
	// DestructiveScope is needed to call a destructive tool.
	DestructiveScope string `yaml:"destructive_scope"`
}

// Introspection configures RFC 7662 token introspection. An answer is
// trusted only if it says active, has an exp still ahead (and nbf behind),
// names the gateway's audience in aud, and, when it names an iss, names the
// configured issuer; it is cached like a verified JWT (see
// [Verifier.Verify]).
type Introspection struct {
	// URL is the introspection endpoint. Required; https, or http on a
	// loopback host.
	URL string `yaml:"url"`
	// ClientID and ClientSecretEnv (the environment variable holding the
	// secret) authenticate the gateway at URL (client_secret_basic, RFC
	// 7662 §2.1). Both required.
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// Validate checks in. It reads the secret's environment variable, so a
// missing secret stops the gateway at start-up.
func (in *Introspection) Validate() error {
	if in.URL == "" {
		return errors.New("auth.introspection.url: required: the RFC 7662 endpoint opaque tokens are checked at")
	}
	if err := checkURL(in.URL); err != nil {
		return fmt.Errorf("auth.introspection.url: %v", err)
	}
	if in.ClientID == "" || in.ClientSecretEnv == "" {
		return errors.New("auth.introspection.client_id, client_secret_env: both required: the gateway authenticates at the introspection endpoint")
	}
	if os.Getenv(in.ClientSecretEnv) == "" {
		return fmt.Errorf("auth.introspection.client_secret_env: environment variable %s is not set or empty", in.ClientSecretEnv)
	}
	return nil
}

// Validate checks c and applies its defaults.
func (c *Config) Validate() error {
	if c.Issuer == "" {
		return errors.New("auth.issuer: required: the OpenID provider whose tokens the gateway accepts")
	}
	if err := checkURL(c.Issuer); err != nil {
		return fmt.Errorf("auth.issuer: %v", err)
	}
	if c.Audience == "" {
		return errors.New("auth.audience: required with issuer: the gateway's public URL of /mcp, which tokens must name in aud")
	}
	if err := checkURL(c.Audience); err != nil {
		return fmt.Errorf("auth.audience: %v", err)
	}
	for i, s := range append(append([]string{}, c.Scopes...), c.Policy.WriteScope, c.Policy.DestructiveScope) {
		if strings.ContainsAny(s, " \t\"\\") {
			return fmt.Errorf("auth: scope %q (%d) must not contain spaces, quotes or backslashes (RFC 6749 §3.3)", s, i)
		}
	}
	if c.Introspection != nil {
		if err := c.Introspection.Validate(); err != nil {
			return err
		}
	}
	switch c.List {
	case "":
		c.List = ListAll
	case ListAll, ListCallable:
	default:
		return fmt.Errorf("auth.list: %q is not all or callable", c.List)
	}
	return nil
}

// checkURL accepts an absolute https URL without fragment or credentials,
// or http on a loopback host (for local testing).
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	if u.User != nil || u.Fragment != "" || u.RawQuery != "" {
		return fmt.Errorf("%q must not carry credentials, a query or a fragment", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("%q must be https (http only on a loopback host)", s)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The outbound credential modes (see Upstream.Mode).
const (
	ModeForward           = "forward"
	ModeExchange          = "exchange"
	ModeClientCredentials = "client_credentials"
	ModeStatic            = "static"
	ModeNone              = "none"
)

// Upstream is the outbound side for one upstream: the `auth:` key of an
// upstream. Secrets are never in the file: only the names of environment
// variables that hold them.
type Upstream struct {
	// Mode is forward, exchange, client_credentials, static or none. Empty
	// means forward, which the gateway allows only with a single remote
	// upstream (see gateway.Config.Validate).
	Mode string `yaml:"mode"`
	// TokenURL is the token endpoint of exchange and client_credentials.
	// Default: the issuer's token_endpoint (needs auth.issuer).
	TokenURL string `yaml:"token_url"`
	// ClientID and ClientSecretEnv (the environment variable holding the
	// secret) authenticate the gateway at TokenURL (client_secret_basic).
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
	// Audience is the upstream's resource identifier, sent as RFC 8707
	// `resource` and as `audience`. Required for exchange; optional for
	// client_credentials.
	Audience string `yaml:"audience"`
	// Scopes are asked for at TokenURL. Default none.
	Scopes []string `yaml:"scopes"`
	// Header is the static mode's header. Default Authorization, whose value
	// is then sent as "Bearer <value>"; any other header gets the value as is.
	Header string `yaml:"header"`
	// ValueEnv is the environment variable holding the static value.
	ValueEnv string `yaml:"value_env"`
}

// Validate checks u for an upstream (named in messages by the caller) and
// applies the default mode. It reads the secrets' environment variables, so
// a missing secret stops the gateway at start-up, not at the first call.
func (u *Upstream) Validate(hasIssuer bool) error {
	if u.Mode == "" {
		u.Mode = ModeForward
	}
	set := map[string]bool{
		"token_url": u.TokenURL != "", "client_id": u.ClientID != "", "client_secret_env": u.ClientSecretEnv != "",
		"audience": u.Audience != "", "scopes": len(u.Scopes) > 0, "header": u.Header != "", "value_env": u.ValueEnv != "",
	}
	allowed := map[string][]string{
		ModeForward:           nil,
		ModeNone:              nil,
		ModeStatic:            {"header", "value_env"},
		ModeClientCredentials: {"token_url", "client_id", "client_secret_env", "audience", "scopes"},
		ModeExchange:          {"token_url", "client_id", "client_secret_env", "audience", "scopes"},
	}
	keys, ok := allowed[u.Mode]
	if !ok {
		return fmt.Errorf("auth.mode: %q is not forward, exchange, client_credentials, static or none", u.Mode)
	}
	for _, k := range []string{"token_url", "client_id", "client_secret_env", "audience", "scopes", "header", "value_env"} {
		if set[k] && !slices.Contains(keys, k) {
			return fmt.Errorf("auth.%s: not used by mode %s", k, u.Mode)
		}
	}
	switch u.Mode {
	case ModeStatic:
		if u.ValueEnv == "" {
			return errors.New("auth.value_env: required by mode static: the environment variable holding the header's value")
		}
		if os.Getenv(u.ValueEnv) == "" {
			return fmt.Errorf("auth.value_env: environment variable %s is not set or empty", u.ValueEnv)
		}
		if u.Header != "" && !validHeaderName(u.Header) {
			return fmt.Errorf("auth.header: %q is not a valid header name", u.Header)
		}
	case ModeClientCredentials, ModeExchange:
		if u.TokenURL == "" && !hasIssuer {
			return fmt.Errorf("auth.token_url: required by mode %s when there is no auth.issuer to take the token endpoint from", u.Mode)
		}
		if u.TokenURL != "" {
			if err := checkURL(u.TokenURL); err != nil {
				return fmt.Errorf("auth.token_url: %v", err)
			}
		}
		if u.ClientID == "" || u.ClientSecretEnv == "" {
			return fmt.Errorf("auth.client_id, auth.client_secret_env: both required by mode %s", u.Mode)
		}
		if os.Getenv(u.ClientSecretEnv) == "" {
			return fmt.Errorf("auth.client_secret_env: environment variable %s is not set or empty", u.ClientSecretEnv)
		}
		if u.Mode == ModeExchange {
			if !hasIssuer {
				return errors.New("auth.mode: exchange needs auth.issuer: only a verified caller token is exchanged")
			}
			if u.Audience == "" {
				return errors.New("auth.audience: required by mode exchange: the upstream's resource the new token is for")
			}
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token, and not a header
// the gateway sets itself or that would mean something else.
func validHeaderName(s string) bool {
	if !httpguts.ValidHeaderFieldName(s) {
		return false
	}
	switch strings.ToLower(s) {
	case "", "host", "content-length", "content-type", "transfer-encoding", "connection", "cookie":
		return false
	}
	return true
}
