package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/hashicorp/golang-lru/v2/expirable"
	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// Defaults of [VerifierOptions].
const (
	DefaultCacheSize  = 10000
	DefaultCacheTTL   = 5 * time.Minute
	DefaultMinRefetch = 30 * time.Second
)

// clockLeeway is how far the issuer's clock may run ahead of the gateway's:
// go-oidc's, for nbf (five minutes, what other OIDC libraries allow). The
// gateway applies the same to iat, which go-oidc does not check.
const clockLeeway = 5 * time.Minute

// VerifierOptions tunes a [Verifier]. The zero value is ready to use.
type VerifierOptions struct {
	// HTTPClient fetches discovery and the JWKS. Nil means a client with a
	// 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// CacheSize bounds the verified tokens kept. Default DefaultCacheSize.
	CacheSize int
	// CacheTTL bounds how long a verified token is trusted without being
	// verified again; a token is never trusted past its own exp. Default
	// DefaultCacheTTL.
	CacheTTL time.Duration
	// MinRefetch is the least time between two fetches of the JWKS caused
	// by unknown key ids. Default DefaultMinRefetch.
	MinRefetch time.Duration
	// Logger, nil for none. It gets start-up facts and failure reasons,
	// never a token or a claim.
	Logger *slog.Logger
}

// Verifier checks inbound bearer tokens: a JWT signed by the issuer's keys
// with an allowed algorithm, naming the audience, within exp and nbf, and
// not issued (iat) in the future beyond the clock leeway. Built
// once at start-up; safe for concurrent use.
type Verifier struct {
	cfg         Config
	verifier    *oidc.IDTokenVerifier
	keys        *keySet
	cache       *expirable.LRU[[sha256.Size]byte, mcpauth.TokenInfo]
	now         func() time.Time
	tokenURL    string
	metadataURL string
	logger      *slog.Logger
	introspect  *introspector // nil without Config.Introspection
}

// asymmetric are the algorithms accepted. "none" and the HMAC family are
// never accepted: a gateway holds no shared secret with the issuer, and HS256
// with a public key as the secret is the classic forgery.
var asymmetric = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// NewVerifier reads the issuer's discovery document and JWKS (so a wrong
// issuer stops the gateway at start-up) and returns a Verifier. cfg must have
// been validated.
func NewVerifier(ctx context.Context, cfg *Config, opts *VerifierOptions) (*Verifier, error) {
	var o VerifierOptions
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultMinRefetch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, o.HTTPClient), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: issuer %s: %v", cfg.Issuer, err)
	}
	var d oidc.ProviderConfig // what the gateway reads of the issuer's metadata
	if err := provider.Claims(&d); err != nil {
		return nil, fmt.Errorf("auth: issuer %s: discovery: %v", cfg.Issuer, err)
	}
	if d.JWKSURL == "" {
		return nil, fmt.Errorf("auth: issuer %s: discovery names no jwks_uri", cfg.Issuer)
	}
	// The algorithms the issuer says it signs with, less any we refuse;
	// RS256 (the one OIDC makes mandatory) when it says none.
	var algs []string
	for _, a := range d.Algorithms {
		if slices.Contains(asymmetric, a) {
			algs = append(algs, a)
		}
	}
	if len(algs) == 0 {
		algs = []string{oidc.RS256}
	}
	joseAlgs := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		joseAlgs[i] = jose.SignatureAlgorithm(a)
	}
	ks := &keySet{url: d.JWKSURL, client: o.HTTPClient, algs: joseAlgs, minRefetch: o.MinRefetch, now: o.Now}
	if _, err := ks.refresh(ctx); err != nil || ks.lastErr != nil {
		return nil, fmt.Errorf("auth: issuer %s: %v", cfg.Issuer, ks.lastErr)
	}
	v := &Verifier{
		cfg: *cfg,
		verifier: oidc.NewVerifier(cfg.Issuer, ks, &oidc.Config{
			ClientID:             cfg.Audience,
			SupportedSigningAlgs: algs,
			Now:                  o.Now,
		}),
		keys:        ks,
		cache:       expirable.NewLRU[[sha256.Size]byte, mcpauth.TokenInfo](o.CacheSize, nil, o.CacheTTL),
		now:         o.Now,
		tokenURL:    d.TokenURL,
		metadataURL: MetadataURL(cfg.Audience),
		logger:      o.Logger,
	}
	if cfg.Introspection != nil {
		v.introspect = newIntrospector(cfg, o.HTTPClient)
	}
	return v, nil
}

// TokenURL is the issuer's token endpoint, from discovery ("" if it names
// none): the default token_url of exchange and client_credentials.
func (v *Verifier) TokenURL() string { return v.tokenURL }

// Reasons a token is refused, as the 401 body says them. None echoes the
// token or a claim.
var (
	errMalformed   = errors.New("the token is not a JWT signed with an allowed algorithm")
	errExpired     = errors.New("the token has expired")
	errNotYet      = errors.New("the token is not valid yet (nbf)")
	errFutureIat   = errors.New("the token is issued in the future (iat)")
	errAudience    = errors.New("the token is not issued for this gateway (aud)")
	errIssuer      = errors.New("the token is not from the configured issuer (iss)")
	errNoExpiry    = errors.New("the token has no expiry (exp)")
	errClaims      = errors.New("the token's claims could not be read")
	errUnavailable = errors.New("the token could not be verified")
)

// Verify checks token and returns what it grants. A JWT is verified with
// the issuer's keys; with Config.Introspection, any other token is asked
// about at the introspection endpoint (RFC 7662). Both kinds of answer are
// cached by the token's hash, never past the token's exp, nor past
// CacheTTL (so a token revoked at the authorization server is refused
// within CacheTTL).
//
// An error wraps go-sdk's auth.ErrInvalidToken when the token is refused;
// its text is fit for the client (it holds neither the token nor a claim).
// It wraps [ErrUnavailable] instead when the introspection endpoint could
// not say; that text is for logs. The TokenInfo is the caller's own copy.
func (v *Verifier) Verify(ctx context.Context, token string) (*mcpauth.TokenInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := v.now()
	if ti, ok := v.cache.Get(key); ok {
		// The cache's TTL is one global value: the token's own expiry is
		// checked here.
		if now.Before(ti.Expiration) {
			ti.Scopes = slices.Clone(ti.Scopes)
			return &ti, nil
		}
		v.cache.Remove(key)
	}
	if v.introspect != nil && !looksLikeJWS(token) {
		ti, err := v.introspect.introspect(ctx, token, now)
		if err != nil {
			return nil, err
		}
		v.cache.Add(key, ti)
		ti.Scopes = slices.Clone(ti.Scopes)
		return &ti, nil
	}
	idt, err := v.verifier.Verify(ctx, token)
	if err != nil {
		reason := classify(err)
		return nil, fmt.Errorf("%w: %w", mcpauth.ErrInvalidToken, reason)
	}
	if idt.Expiry.IsZero() {
		return nil, fmt.Errorf("%w: %w", mcpauth.ErrInvalidToken, errNoExpiry)
	}
	// A token issued later than now, beyond the clock leeway, was minted
	// by a clock that is wrong or with an iat chosen to outlive a
	// revocation cut-off; refuse it as go-oidc refuses such an nbf.
	// (go-oidc reads iat but does not check it.) No iat is not checked:
	// RFC 9068 requires it, RFC 7519 does not.
	if !idt.IssuedAt.IsZero() && idt.IssuedAt.After(now.Add(clockLeeway)) {
		return nil, fmt.Errorf("%w: %w", mcpauth.ErrInvalidToken, errFutureIat)
	}
	var c claims
	if err := idt.Claims(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", mcpauth.ErrInvalidToken, errClaims)
	}
	ti := tokenInfo(c.scopes(), idt.Expiry, idt.Subject, c.ClientID)
	v.cache.Add(key, ti)
	ti.Scopes = slices.Clone(ti.Scopes)
	return &ti, nil
}

// ClientSubject is the key of TokenInfo.Extra set (to true) when a token
// has no subject and its UserID is its client_id (a client-credentials
// token at some IdPs). Whoever keys state by UserID (the gateway's sessions
// and tasks) must tell the two apart: a client whose id is the same string
// as some user's sub is not that user.
const ClientSubject = "mcpgate/client_subject"

// tokenInfo is what a verified token says: its scopes, expiry, and who it
// speaks for (its sub, else its client_id, marked ClientSubject).
func tokenInfo(scopes []string, exp time.Time, sub, clientID string) mcpauth.TokenInfo {
	ti := mcpauth.TokenInfo{Scopes: scopes, Expiration: exp, UserID: sub}
	if sub == "" && clientID != "" {
		ti.UserID = clientID
		ti.Extra = map[string]any{ClientSubject: true}
	}
	return ti
}

// classify maps go-oidc's and the key set's errors to the fixed reasons.
// go-oidc's own texts name the expected and received iss and aud, which are
// claims: they are never passed on. go-oidc returns untyped errors for these,
// so the mapping reads its messages; the tests pin each case.
func classify(err error) error {
	var te *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &te):
		return errExpired
	case strings.Contains(msg, errUnknownKey.Error()):
		return errUnknownKey
	case strings.Contains(msg, errBadSignature.Error()):
		return errBadSignature
	case strings.Contains(msg, "malformed jwt"), strings.Contains(msg, errMalformed.Error()),
		strings.Contains(msg, "not signed"), strings.Contains(msg, "multiple signatures"):
		return errMalformed
	case strings.Contains(msg, "different provider"):
		return errIssuer
	case strings.Contains(msg, "expected audience"):
		return errAudience
	case strings.Contains(msg, "nbf"):
		return errNotYet
	case strings.Contains(msg, "unmarshal claims"):
		return errClaims
	}
	return errUnavailable
}

// claims are the access-token claims go-oidc does not read.
type claims struct {
	Scope    string          `json:"scope"` // RFC 9068 / RFC 8693: space-separated
	Scp      json.RawMessage `json:"scp"`   // Okta, Azure AD: a list, or a space-separated string
	ClientID string          `json:"client_id"`
}

func (c *claims) scopes() []string {
	out := strings.Fields(c.Scope)
	if len(c.Scp) > 0 {
		var list []string
		var s string
		if json.Unmarshal(c.Scp, &list) == nil {
			out = append(out, list...)
		} else if json.Unmarshal(c.Scp, &s) == nil {
			out = append(out, strings.Fields(s)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
