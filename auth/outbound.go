package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
)

// Defaults of [OutboundOptions].
const (
	DefaultExchangeCacheSize = 10000
	// maxExchangeCacheTTL bounds how long an exchanged token is reused,
	// whatever its expires_in says.
	maxExchangeCacheTTL = time.Hour
	// expiryMargin is taken off a token's lifetime so that it is not sent
	// in its last seconds.
	expiryMargin = 10 * time.Second
	// exchangeTimeout bounds an exchange shared by concurrent callers
	// whatever the HTTP client's own timeout: callers that come while it
	// is under way join it, so one that never ended would leave its
	// subject without a token.
	exchangeTimeout = 30 * time.Second
)

// OutboundOptions tunes [NewOutbound]. The zero value is ready to use.
type OutboundOptions struct {
	// TokenURL is the token endpoint used when Upstream.TokenURL is empty:
	// the issuer's (see Verifier.TokenURL).
	TokenURL string
	// HTTPClient calls the token endpoint. Nil means a client with a 10 s
	// timeout that follows no redirect (a redirect must not carry the
	// gateway's client secret or the caller's token elsewhere).
	HTTPClient *http.Client
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Outbound gives one upstream the credential its configuration names. Safe
// for concurrent use.
type Outbound struct {
	mode   string
	header string // static
	value  string // static
	cc     oauth2.TokenSource
	ex     *exchanger
}

// Credential is what one call presents upstream: Header set to Value, or
// nothing when Header is empty.
type Credential struct {
	Header string
	Value  string
}

// Caller is the inbound side of one call: the caller's token (verified when
// the gateway verifies) and whether it was verified.
type Caller struct {
	Token    string
	Verified bool
}

// NewOutbound builds the credential source of one upstream. ctx is
// long-lived (the gateway's, not a request's): x/oauth2's client-credentials
// TokenSource keeps the context it was made with and uses it for every
// refresh. u must have been validated.
func NewOutbound(ctx context.Context, u *Upstream, opts *OutboundOptions) (*Outbound, error) {
	var o OutboundOptions
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	tokenURL := u.TokenURL
	if tokenURL == "" {
		tokenURL = o.TokenURL
	}
	out := &Outbound{mode: u.Mode}
	switch u.Mode {
	case ModeForward, ModeNone:
	case ModeStatic:
		out.header, out.value = u.Header, os.Getenv(u.ValueEnv)
		if out.header == "" || strings.EqualFold(out.header, "Authorization") {
			out.header, out.value = "Authorization", "Bearer "+out.value
		}
	case ModeClientCredentials:
		if tokenURL == "" {
			return nil, errors.New("auth: client_credentials: no token_url, and the issuer names no token_endpoint")
		}
		params := url.Values{}
		if u.Audience != "" {
			params.Set("resource", u.Audience) // RFC 8707
			params.Set("audience", u.Audience) // Auth0, Okta and others
		}
		cc := &clientcredentials.Config{
			ClientID:       u.ClientID,
			ClientSecret:   os.Getenv(u.ClientSecretEnv),
			TokenURL:       tokenURL,
			Scopes:         u.Scopes,
			EndpointParams: params,
			AuthStyle:      oauth2.AuthStyleInHeader,
		}
		// ReuseTokenSource inside: one token until it expires.
		out.cc = cc.TokenSource(context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, o.HTTPClient))
	case ModeExchange:
		if tokenURL == "" {
			return nil, errors.New("auth: exchange: no token_url, and the issuer names no token_endpoint")
		}
		out.ex = &exchanger{
			tokenURL: tokenURL, clientID: u.ClientID, secret: os.Getenv(u.ClientSecretEnv),
			audience: u.Audience, scopes: u.Scopes, client: o.HTTPClient, now: o.Now,
			cache: expirable.NewLRU[[sha256.Size]byte, exchanged](DefaultExchangeCacheSize, nil, maxExchangeCacheTTL),
		}
	default:
		return nil, fmt.Errorf("auth: unknown mode %q", u.Mode)
	}
	return out, nil
}

// Mode is the upstream's mode.
func (o *Outbound) Mode() string { return o.mode }

// Credential returns what to present upstream for one call. The caller's
// token is sent only in forward mode, and only to this upstream; in every
// other mode it goes nowhere but, in exchange mode, to the token endpoint.
// An error's text holds no token; it is fit for logs.
func (o *Outbound) Credential(ctx context.Context, c Caller) (Credential, error) {
	switch o.mode {
	case ModeForward:
		if c.Token == "" {
			return Credential{}, nil
		}
		return Credential{Header: "Authorization", Value: "Bearer " + c.Token}, nil
	case ModeStatic:
		return Credential{Header: o.header, Value: o.value}, nil
	case ModeClientCredentials:
		t, err := o.cc.Token()
		if err != nil {
			return Credential{}, fmt.Errorf("auth: client_credentials: %v", tokenError(err))
		}
		return Credential{Header: "Authorization", Value: "Bearer " + t.AccessToken}, nil
	case ModeExchange:
		if !c.Verified || c.Token == "" {
			return Credential{}, errors.New("auth: exchange: the call carries no verified token to exchange")
		}
		tok, err := o.ex.exchange(ctx, c.Token)
		if err != nil {
			return Credential{}, err
		}
		return Credential{Header: "Authorization", Value: "Bearer " + tok}, nil
	}
	return Credential{}, nil // none
}

// tokenError keeps the OAuth error code of a token-endpoint failure and
// drops its body, which the endpoint wrote and the gateway cannot vouch for.
func tokenError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := oauthCode(re.ErrorCode)
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Sprintf("the token endpoint refused (status %d, %s)", status, code)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the token endpoint could not be reached: " + ue.Err.Error()
	}
	return "the token endpoint's answer was not usable"
}

// exchanger performs RFC 8693 token exchange through x/oauth2's
// client-credentials request, with grant_type overridden (which
// clientcredentials.Config allows, for grants shaped like it): the same
// client_secret_basic authentication (RFC 6749 §2.3.1's must-support
// method), answer parsing, size bound and error type as the
// client_credentials mode. The request is the RFC's minimum: grant_type,
// subject_token, subject_token_type and requested_token_type access_token,
// resource and audience, optional scope. Why not go-sdk's
// oauthex.ExchangeToken: it is shaped for SEP-990 (ID-JAG): it requires
// audience, resource and both token types together and always
// authenticates with client_secret_post.
//
// Exchanged tokens are cached per subject token (by its SHA-256) and
// audience until shortly before they expire. Concurrent calls for a subject
// that is not cached share one request to the token endpoint: a client's
// first calls often come at once (a tools/list answer fans out), and each
// would otherwise be an exchange of its own.
type exchanger struct {
	tokenURL, clientID, secret, audience string
	scopes                               []string
	client                               *http.Client
	now                                  func() time.Time
	cache                                *expirable.LRU[[sha256.Size]byte, exchanged]
	flights                              singleflight.Group // by the cache key
}

type exchanged struct {
	token   string
	expires time.Time
}

const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	typeAccessToken    = "urn:ietf:params:oauth:token-type:access_token"
)

func (e *exchanger) exchange(ctx context.Context, subject string) (string, error) {
	key := sha256.Sum256([]byte(e.audience + "\x00" + subject))
	if tok, ok := e.cached(key); ok {
		return tok, nil
	}
	// The request is shared, so it is not the first caller's: that caller
	// hanging up must not fail the others. It keeps ctx's values (trace)
	// and is bounded by the client's timeout; each caller waits only as
	// long as its own ctx allows.
	ch := e.flights.DoChan(string(key[:]), func() (any, error) {
		if tok, ok := e.cached(key); ok {
			// Cached by a flight that ended between our look and our
			// joining.
			return tok, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
		defer cancel()
		return e.request(ctx, key, subject)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", fmt.Errorf("auth: exchange: %w", context.Cause(ctx))
	}
}

// cached returns the exchanged token cached under key, if it has not
// expired.
func (e *exchanger) cached(key [sha256.Size]byte) (string, bool) {
	x, ok := e.cache.Get(key)
	if !ok {
		return "", false
	}
	if e.now().Before(x.expires) {
		return x.token, true
	}
	e.cache.Remove(key)
	return "", false
}

// request asks the token endpoint to exchange subject and caches the
// answer under key.
func (e *exchanger) request(ctx context.Context, key [sha256.Size]byte, subject string) (string, error) {
	cfg := &clientcredentials.Config{
		ClientID:     e.clientID,
		ClientSecret: e.secret,
		TokenURL:     e.tokenURL,
		Scopes:       e.scopes,
		EndpointParams: url.Values{
			"grant_type":           {grantTokenExchange},
			"subject_token":        {subject},
			"subject_token_type":   {typeAccessToken},
			"requested_token_type": {typeAccessToken},
			"resource":             {e.audience},
			"audience":             {e.audience},
		},
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, e.client))
	if err != nil {
		return "", fmt.Errorf("auth: exchange: %v", tokenError(err))
	}
	// RFC 8693 §2.2.1: token_type is Bearer, or N_A for a token that is not
	// an access token of that kind.
	if !strings.EqualFold(tok.TokenType, "Bearer") && !strings.EqualFold(tok.TokenType, "N_A") {
		return "", errors.New("auth: exchange: the answer holds no bearer access_token")
	}
	ttl := time.Minute // no expires_in: reuse briefly, then ask again
	if !tok.Expiry.IsZero() {
		ttl = time.Until(tok.Expiry) - expiryMargin
	}
	if ttl > 0 {
		e.cache.Add(key, exchanged{token: tok.AccessToken, expires: e.now().Add(ttl)})
	}
	return tok.AccessToken, nil
}

// oauthCode returns an RFC 6749 §5.2 error code if it is one (printable
// ASCII without quotes), else a placeholder: it ends up in a log line.
func oauthCode(s string) string {
	if s == "" || len(s) > 64 {
		return "no error code"
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return "no error code"
		}
	}
	return s
}
