package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// ErrUnavailable is wrapped by a [Verifier.Verify] error that says nothing
// about the token: the introspection endpoint could not be asked, or did
// not answer usably. [Verifier.Middleware] answers it 503, not 401: a 401
// invalid_token tells an MCP client to throw the token away and send its
// user through authorization again, for what is the gateway's (or the
// authorization server's) outage; 503 with Retry-After tells it to try
// again with the same token. It never wraps mcpauth.ErrInvalidToken.
var ErrUnavailable = errors.New("auth: the token could not be checked now")

// maxIntrospection bounds the introspection answer read.
const maxIntrospection = 1 << 20

// introspector asks an RFC 7662 endpoint about opaque tokens.
type introspector struct {
	url, clientID, secret string
	issuer, audience      string
	client                *http.Client
}

func newIntrospector(cfg *Config, client *http.Client) *introspector {
	in := cfg.Introspection
	c := *client
	// The token and the gateway's secret are for this URL only: a redirect
	// is an answer the gateway cannot use, never a place to send them.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &introspector{
		url: in.URL, clientID: in.ClientID, secret: os.Getenv(in.ClientSecretEnv),
		issuer: cfg.Issuer, audience: cfg.Audience, client: &c,
	}
}

// introspection is the part of an RFC 7662 §2.2 answer the gateway reads.
type introspection struct {
	Active    bool            `json:"active"`
	Exp       int64           `json:"exp"`
	Nbf       int64           `json:"nbf"`
	Aud       json.RawMessage `json:"aud"` // a string or a list (RFC 7662 §2.2, RFC 7519 §4.1.3)
	Iss       string          `json:"iss"`
	Sub       string          `json:"sub"`
	TokenType string          `json:"token_type"`
	claims
}

// Reasons an introspected token is refused, as the 401 body says them.
var (
	errInactive = errors.New("the token is not active (introspection)")
	errNoAud    = errors.New("the token's introspection names no audience (aud)")
)

// introspect asks the endpoint about token and checks the answer: active,
// within exp and nbf, aud naming the gateway, iss (when given) the
// configured issuer. Errors wrap mcpauth.ErrInvalidToken (the token is
// refused) or ErrUnavailable (nothing is known about it).
func (in *introspector) introspect(ctx context.Context, token string, now time.Time) (mcpauth.TokenInfo, error) {
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	// RFC 7662 §2.1: the gateway authenticates, as an OAuth client.
	resp, body, err := postForm(ctx, in.client, in.url, in.clientID, in.secret, form, maxIntrospection, "the introspection endpoint")
	if err != nil {
		return mcpauth.TokenInfo{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK {
		// 401/403 here is the gateway's own credential refused: a
		// configuration problem, not the caller's token.
		return mcpauth.TokenInfo{}, fmt.Errorf("%w: the introspection endpoint answered status %d", ErrUnavailable, resp.StatusCode)
	}
	var r introspection
	if mt != "application/json" || json.Unmarshal(body, &r) != nil {
		return mcpauth.TokenInfo{}, fmt.Errorf("%w: the introspection endpoint's answer is not a JSON object", ErrUnavailable)
	}
	refuse := func(reason error) (mcpauth.TokenInfo, error) {
		return mcpauth.TokenInfo{}, fmt.Errorf("%w: %w", mcpauth.ErrInvalidToken, reason)
	}
	switch {
	case !r.Active:
		return refuse(errInactive)
	case r.Exp == 0:
		// RFC 7662 makes exp optional; the gateway does not: without it an
		// answer could only be cached on faith.
		return refuse(errNoExpiry)
	case !now.Before(time.Unix(r.Exp, 0)):
		return refuse(errExpired)
	case r.Nbf != 0 && now.Before(time.Unix(r.Nbf, 0)):
		return refuse(errNotYet)
	case r.Iss != "" && r.Iss != in.issuer:
		return refuse(errIssuer)
	case r.TokenType != "" && !strings.EqualFold(r.TokenType, "Bearer") && !strings.EqualFold(r.TokenType, "access_token"):
		return refuse(errMalformed) // e.g. a refresh token
	}
	auds, ok := audiences(r.Aud)
	switch {
	case !ok:
		return refuse(errClaims)
	case len(auds) == 0:
		// Without aud the token may be meant for any resource of this
		// authorization server: forwarding it is the token passthrough
		// the MCP security guidance forbids.
		return refuse(errNoAud)
	case !slices.Contains(auds, in.audience):
		return refuse(errAudience)
	}
	ti := tokenInfo(r.scopes(), time.Unix(r.Exp, 0), r.Sub, r.ClientID)
	return ti, nil
}

// audiences reads aud: absent, a string, or a list of strings.
func audiences(raw json.RawMessage) ([]string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list, true
	}
	return nil, false
}

// looksLikeJWS reports whether token has the shape of a JWS compact
// serialization (three base64url parts): such tokens are verified locally
// with the issuer's keys and never introspected; any other token is opaque
// to the gateway and, with introspection configured, introspected.
func looksLikeJWS(token string) bool {
	return strings.Count(token, ".") == 2
}

// postForm POSTs form to endpoint as the gateway's own OAuth client
// (client_secret_basic, with id and secret form-urlencoded first: RFC 6749
// §2.3.1) and reads at most max bytes of the answer. The client follows no
// redirect. what names the endpoint in errors ("the token endpoint"); resp's
// body is closed.
func postForm(ctx context.Context, client *http.Client, endpoint, clientID, secret string, form url.Values, max int64, what string) (resp *http.Response, body []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, err = client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error repeats the URL
		}
		return nil, nil, fmt.Errorf("%s could not be reached: %v", what, err)
	}
	defer resp.Body.Close()
	if body, err = io.ReadAll(io.LimitReader(resp.Body, max)); err != nil {
		return nil, nil, fmt.Errorf("reading the answer of %s: %v", what, err)
	}
	return resp, body, nil
}
