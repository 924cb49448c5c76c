package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// testIssuer is a real OpenID provider on loopback as far as the verifier
// can tell: discovery, a JWKS of RS256 keys it can rotate, and a token
// endpoint that records what it is sent.
type testIssuer struct {
	*httptest.Server
	jwksHits atomic.Int64

	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey // kid → key, all published
	kid  string                     // the signing key

	tokenCalls []map[string][]string // token endpoint form posts
	tokenAuth  []string              // their Authorization headers
	tokenFn    func(form map[string][]string) (status int, body any)
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	is := &testIssuer{keys: map[string]*rsa.PrivateKey{}}
	is.rotate(t, "k1")
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/jwks",
			"token_endpoint":                        is.URL + "/token",
			"authorization_endpoint":                is.URL + "/authorize",
			"id_token_signing_alg_values_supported": []string{"RS256", "HS256", "none"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.jwksHits.Add(1)
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		is.mu.Lock()
		is.tokenCalls = append(is.tokenCalls, r.PostForm)
		is.tokenAuth = append(is.tokenAuth, r.Header.Get("Authorization"))
		fn := is.tokenFn
		is.mu.Unlock()
		status, body := http.StatusOK, any(map[string]any{"access_token": "issued-" + r.PostForm.Get("grant_type"), "token_type": "Bearer", "expires_in": 300})
		if fn != nil {
			status, body = fn(r.PostForm)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

// rotate publishes a new key kid and signs with it from now on.
func (is *testIssuer) rotate(t *testing.T, kid string) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	is.kid = kid
}

// sign makes a JWT of claims with the issuer's current key, or with key and
// kid when given.
func (is *testIssuer) sign(t *testing.T, claims map[string]any, key *rsa.PrivateKey, kid string) string {
	t.Helper()
	is.mu.Lock()
	if key == nil {
		key = is.keys[is.kid]
	}
	if kid == "" {
		kid = is.kid
	}
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claims returns good claims for audience, valid for an hour from now.
func (is *testIssuer) claims(audience string, now time.Time, scope string) map[string]any {
	return map[string]any{
		"iss": is.URL, "sub": "user-1", "aud": audience, "client_id": "cli",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": scope,
	}
}
