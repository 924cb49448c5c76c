package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
)

const testAudience = "http://127.0.0.1:8080/mcp"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestVerifier(t *testing.T, is *testIssuer, cfg *Config) (*Verifier, *clock) {
	t.Helper()
	if cfg == nil {
		cfg = &Config{}
	}
	cfg.Issuer, cfg.Audience = is.URL, testAudience
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	v, err := NewVerifier(context.Background(), cfg, &VerifierOptions{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return v, clk
}

func TestVerify(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, nil)
	now := clk.now()
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	with := func(k string, val any) string {
		c := is.claims(testAudience, now, "mcp read")
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return is.sign(t, c, nil, "")
	}
	good := is.sign(t, is.claims(testAudience, now, "mcp read"), nil, "")
	parts := strings.Split(good, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + parts[1] + "."
	hs := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"k1"}`)) + "." + parts[1] + "." + parts[2]
	for _, tc := range []struct {
		name  string
		token string
		want  error // nil: accepted
	}{
		{"good", good, nil},
		{"expired", with("exp", now.Add(-time.Minute).Unix()), errExpired},
		{"no exp", with("exp", nil), errExpired},
		{"nbf in the future", with("nbf", now.Add(time.Hour).Unix()), errNotYet},
		{"nbf past", with("nbf", now.Add(-time.Minute).Unix()), nil},
		{"nbf ahead, within the clock leeway", with("nbf", now.Add(clockLeeway-time.Second).Unix()), nil},
		{"iat in the future", with("iat", now.Add(time.Hour).Unix()), errFutureIat},
		{"iat just past the clock leeway", with("iat", now.Add(clockLeeway+2*time.Second).Unix()), errFutureIat},
		{"iat ahead, within the clock leeway", with("iat", now.Add(clockLeeway-time.Second).Unix()), nil},
		{"iat past", with("iat", now.Add(-time.Minute).Unix()), nil},
		{"no iat", with("iat", nil), nil},
		{"wrong audience", with("aud", "https://other.example.com/mcp"), errAudience},
		{"audience list holding ours", with("aud", []string{"x", testAudience}), nil},
		{"wrong issuer", with("iss", "https://evil.example.com"), errIssuer},
		{"bad signature", is.sign(t, is.claims(testAudience, now, ""), other, "k1"), errBadSignature},
		{"unknown kid", is.sign(t, is.claims(testAudience, now, ""), other, "nope"), errUnknownKey},
		{"alg none", none, errMalformed},
		{"alg HS256", hs, errMalformed},
		{"not a jwt", "abc.def", errMalformed},
		{"empty", "", errMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ti, err := v.Verify(context.Background(), tc.token)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if ti.UserID != "user-1" || !ti.Expiration.Equal(time.Unix(now.Add(time.Hour).Unix(), 0)) {
					t.Errorf("token info = %+v", ti)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, mcpauth.ErrInvalidToken) || !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v wrapping ErrInvalidToken", err, tc.want)
			}
			// The reason names no claim: not the audience nor issuer it got.
			for _, leak := range []string{"other.example.com", "evil.example.com", "user-1"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q echoes a claim", err)
				}
			}
		})
	}
}

func TestScopeClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims string
		want   string
	}{
		{"scope", `{"scope":"b a"}`, "a b"},
		{"scp list", `{"scp":["x","y"]}`, "x y"},
		{"scp string", `{"scp":"y x"}`, "x y"},
		{"both", `{"scope":"a","scp":["a","b"]}`, "a b"},
		{"none", `{}`, ""},
		{"scp wrong type", `{"scp":7}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c claims
			if err := jsonUnmarshal(tc.claims, &c); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.scopes(), " "); got != tc.want {
				t.Errorf("scopes = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCacheHonoursTokenExpiry(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, nil)
	c := is.claims(testAudience, clk.now(), "")
	c["exp"] = clk.now().Add(2 * time.Minute).Unix() // shorter than the cache's TTL
	tok := is.sign(t, c, nil, "")
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if v.cache.Len() != 1 {
		t.Fatalf("cache holds %d tokens, want 1", v.cache.Len())
	}
	clk.add(3 * time.Minute)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, errExpired) {
		t.Fatalf("after exp, from the cache: err = %v, want expired", err)
	}
}

// A flood of tokens with unknown kids must not make the gateway hammer the
// IdP: one JWKS fetch per MinRefetch at most, however many tokens.
func TestUnknownKidFloodFetchesOnce(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, nil)
	base := is.jwksHits.Load() // the start-up fetch
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := is.sign(t, is.claims(testAudience, clk.now(), ""), other, fmt.Sprintf("bad-%d", i))
			if _, err := v.Verify(context.Background(), tok); !errors.Is(err, errUnknownKey) {
				t.Errorf("err = %v, want unknown key", err)
			}
		}()
	}
	wg.Wait()
	if got := is.jwksHits.Load() - base; got != 0 {
		t.Errorf("200 unknown kids within MinRefetch of start-up fetched the JWKS %d times, want 0", got)
	}
	// Past MinRefetch, a concurrent flood shares one fetch.
	clk.add(DefaultMinRefetch)
	base = is.jwksHits.Load()
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := is.sign(t, is.claims(testAudience, clk.now(), ""), other, fmt.Sprintf("bad2-%d", i))
			v.Verify(context.Background(), tok)
		}()
	}
	wg.Wait()
	if got := is.jwksHits.Load() - base; got != 1 {
		t.Errorf("200 unknown kids past MinRefetch fetched the JWKS %d times, want 1", got)
	}
	// A known kid with a bad signature fetches nothing.
	before := is.jwksHits.Load()
	clk.add(DefaultMinRefetch + time.Second)
	tok := is.sign(t, is.claims(testAudience, clk.now(), ""), other, "k1")
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, errBadSignature) {
		t.Fatalf("err = %v, want bad signature", err)
	}
	if is.jwksHits.Load() != before {
		t.Error("a bad signature under a known kid fetched the JWKS")
	}
}

func TestJWKSRotation(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, nil)
	old := is.sign(t, is.claims(testAudience, clk.now(), ""), nil, "")
	is.rotate(t, "k2")
	// Within MinRefetch of the start-up fetch the new key is not fetched yet.
	fresh := is.sign(t, is.claims(testAudience, clk.now(), ""), nil, "")
	if _, err := v.Verify(context.Background(), fresh); !errors.Is(err, errUnknownKey) {
		t.Fatalf("before MinRefetch: err = %v, want unknown key", err)
	}
	clk.add(DefaultMinRefetch)
	if _, err := v.Verify(context.Background(), fresh); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if _, err := v.Verify(context.Background(), old); err != nil {
		t.Fatalf("the old key, still published: %v", err)
	}
}

func TestMiddleware(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, &Config{Scopes: []string{"mcp"}})
	var seen *mcpauth.TokenInfo
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = mcpauth.TokenInfoFromContext(r.Context())
	}))
	good := is.sign(t, is.claims(testAudience, clk.now(), "mcp"), nil, "")
	noScope := is.sign(t, is.claims(testAudience, clk.now(), "other"), nil, "")
	wrongAud := is.sign(t, is.claims("https://api.example.com", clk.now(), "mcp"), nil, "")
	meta := "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name      string
		auth      []string
		status    int
		challenge string
	}{
		{"good", []string{"Bearer " + good}, 200, ""},
		{"scheme case", []string{"bearer " + good}, 200, ""},
		{"no token", nil, 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"basic", []string{"Basic dTpw"}, 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"two headers", []string{"Bearer " + good, "Bearer " + good}, 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"bad token", []string{"Bearer x.y.z"}, 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"wrong audience", []string{"Bearer " + wrongAud}, 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
		{"missing scope", []string{"Bearer " + noScope}, 403, `Bearer error="insufficient_scope", scope="mcp", resource_metadata="` + meta + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			r := httptest.NewRequest("POST", "/mcp", nil)
			for _, a := range tc.auth {
				r.Header.Add("Authorization", a)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("challenge = %q\nwant        %q", got, tc.challenge)
			}
			if tc.status == 200 {
				if seen == nil || seen.UserID != "user-1" {
					t.Errorf("handler saw token info %+v", seen)
				}
				return
			}
			if seen != nil {
				t.Error("handler ran")
			}
			body := w.Body.String()
			if !strings.Contains(body, `"error"`) || strings.Contains(body, good) || strings.Contains(body, "api.example.com") {
				t.Errorf("body = %s", body)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	is := newTestIssuer(t)
	v, _ := newTestVerifier(t, is, &Config{Scopes: []string{"mcp"}, Policy: Policy{WriteScope: "mcp:write"}})
	if got, want := v.MetadataPaths(), []string{MetadataPath, MetadataPath + "/mcp"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paths = %v, want %v", got, want)
	}
	w := httptest.NewRecorder()
	v.MetadataHandler().ServeHTTP(w, httptest.NewRequest("GET", "http://evil.example/.well-known/oauth-protected-resource/mcp", nil))
	var doc struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
		Scopes   []string `json:"scopes_supported"`
	}
	if err := jsonUnmarshal(w.Body.String(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Resource != testAudience || len(doc.Servers) != 1 || doc.Servers[0] != is.URL || fmt.Sprint(doc.Scopes) != "[mcp mcp:write]" {
		t.Errorf("metadata = %+v", doc)
	}
}

func TestMetadataURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://gw.example.com/mcp":      "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
		"https://gw.example.com":          "https://gw.example.com/.well-known/oauth-protected-resource",
		"https://gw.example.com/":         "https://gw.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:9/a/b/":         "http://127.0.0.1:9/.well-known/oauth-protected-resource/a/b",
		"https://gw.example.com:8443/mcp": "https://gw.example.com:8443/.well-known/oauth-protected-resource/mcp",
	} {
		if got := MetadataURL(in); got != want {
			t.Errorf("MetadataURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewVerifierWrongIssuer(t *testing.T) {
	is := newTestIssuer(t)
	cfg := &Config{Issuer: is.URL + "/other", Audience: testAudience}
	if _, err := NewVerifier(context.Background(), cfg, nil); err == nil {
		t.Fatal("an issuer without discovery was accepted")
	}
}

// TestTokenInfoSubject: a token's subject is its UserID; a token without one
// is its client, marked ClientSubject so that it never shares a user's
// sessions and tasks.
func TestTokenInfoSubject(t *testing.T) {
	for _, tc := range []struct {
		sub, client, want string
		marked            bool
	}{
		{"user-1", "app", "user-1", false},
		{"", "app", "app", true},
		{"", "", "", false},
	} {
		ti := tokenInfo(nil, time.Time{}, tc.sub, tc.client)
		if got, marked := ti.UserID, ti.Extra[ClientSubject] == true; got != tc.want || marked != tc.marked {
			t.Errorf("tokenInfo(%q, %q): UserID %q, marked %v; want %q, %v", tc.sub, tc.client, got, marked, tc.want, tc.marked)
		}
	}
}
