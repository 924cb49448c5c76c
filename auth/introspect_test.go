package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// introspectionEndpoint is an RFC 7662 endpoint on loopback: it
// authenticates the gateway (client_secret_basic gw:gw-secret) and answers
// per token from answers; a token it does not know is inactive. It records
// the tokens it is asked about.
type introspectionEndpoint struct {
	*httptest.Server
	mu      sync.Mutex
	asked   []string
	answers map[string]func() (status int, contentType, body string)
}

func newIntrospectionEndpoint(t *testing.T, answers map[string]func() (int, string, string)) *introspectionEndpoint {
	e := &introspectionEndpoint{answers: answers}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if r.Method != http.MethodPost || !ok || id != "gw" || secret != "gw-secret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		r.ParseForm()
		tok := r.PostForm.Get("token")
		e.mu.Lock()
		e.asked = append(e.asked, tok)
		e.mu.Unlock()
		status, ct, body := http.StatusOK, "application/json", `{"active":false}`
		if f := e.answers[tok]; f != nil {
			status, ct, body = f()
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *introspectionEndpoint) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asked...)
}

func TestIntrospection(t *testing.T) {
	is := newTestIssuer(t)
	t.Setenv("INTROSPECT_SECRET", "gw-secret")
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	ok := func(fields map[string]any) func() (int, string, string) {
		return func() (int, string, string) {
			m := map[string]any{"active": true, "exp": exp, "aud": testAudience, "scope": "mcp read",
				"sub": "user-7", "client_id": "app", "iss": is.URL, "token_type": "Bearer"}
			for k, v := range fields {
				if v == nil {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			b, _ := json.Marshal(m)
			return http.StatusOK, "application/json", string(b)
		}
	}
	ep := newIntrospectionEndpoint(t, map[string]func() (int, string, string){
		"opaque-good":       ok(nil),
		"opaque-aud-list":   ok(map[string]any{"aud": []string{"https://api.example.com", testAudience}, "sub": nil, "iss": nil, "token_type": nil}),
		"opaque-inactive":   ok(map[string]any{"active": false}),
		"opaque-wrong-aud":  ok(map[string]any{"aud": "https://api.example.com"}),
		"opaque-no-aud":     ok(map[string]any{"aud": nil}),
		"opaque-expired":    ok(map[string]any{"exp": now.Add(-time.Minute).Unix()}),
		"opaque-no-exp":     ok(map[string]any{"exp": nil}),
		"opaque-future-nbf": ok(map[string]any{"nbf": now.Add(time.Hour).Unix()}),
		"opaque-other-iss":  ok(map[string]any{"iss": "https://evil.example.com"}),
		"opaque-refresh":    ok(map[string]any{"token_type": "refresh_token"}),
		"opaque-bad-aud":    ok(map[string]any{"aud": 7}),
		"opaque-html":       func() (int, string, string) { return http.StatusOK, "text/html", "<html>" },
		"opaque-error-500": func() (int, string, string) {
			return http.StatusInternalServerError, "application/json", `{"active":true}`
		},
	})
	v, clk := newTestVerifier(t, is, &Config{Introspection: &Introspection{URL: ep.URL, ClientID: "gw", ClientSecretEnv: "INTROSPECT_SECRET"}})
	clk.t = now

	for _, tc := range []struct {
		token string
		want  string // "" ok; "invalid: <reason>"; "unavailable"
	}{
		{"opaque-good", ""},
		{"opaque-aud-list", ""},
		{"opaque-inactive", "invalid: " + errInactive.Error()},
		{"opaque-unknown", "invalid: " + errInactive.Error()},
		{"opaque-wrong-aud", "invalid: " + errAudience.Error()},
		{"opaque-no-aud", "invalid: " + errNoAud.Error()},
		{"opaque-expired", "invalid: " + errExpired.Error()},
		{"opaque-no-exp", "invalid: " + errNoExpiry.Error()},
		{"opaque-future-nbf", "invalid: " + errNotYet.Error()},
		{"opaque-other-iss", "invalid: " + errIssuer.Error()},
		{"opaque-refresh", "invalid: " + errMalformed.Error()},
		{"opaque-bad-aud", "invalid: " + errClaims.Error()},
		{"opaque-html", "unavailable"},
		{"opaque-error-500", "unavailable"},
	} {
		t.Run(tc.token, func(t *testing.T) {
			ti, err := v.Verify(t.Context(), tc.token)
			switch {
			case tc.want == "":
				if err != nil {
					t.Fatal(err)
				}
				if ti.Expiration.Unix() != exp || strings.Join(ti.Scopes, " ") != "mcp read" || ti.UserID == "" {
					t.Errorf("token info %+v", ti)
				}
			case tc.want == "unavailable":
				if !errors.Is(err, ErrUnavailable) || errors.Is(err, mcpauth.ErrInvalidToken) {
					t.Errorf("err = %v, want ErrUnavailable only", err)
				}
			default:
				if !errors.Is(err, mcpauth.ErrInvalidToken) || errors.Is(err, ErrUnavailable) ||
					"invalid: "+strings.TrimPrefix(err.Error(), mcpauth.ErrInvalidToken.Error()+": ") != tc.want {
					t.Errorf("err = %v, want %s", err, tc.want)
				}
			}
			if err != nil && strings.Contains(err.Error(), tc.token) {
				t.Errorf("the error names the token: %v", err)
			}
		})
	}

	t.Run("cached until its exp", func(t *testing.T) {
		before := len(ep.calls())
		for range 3 {
			if _, err := v.Verify(t.Context(), "opaque-good"); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(ep.calls()) - before; n != 0 {
			t.Errorf("%d introspection calls for a cached token", n)
		}
		clk.add(2 * time.Hour) // past the token's exp, within no TTL either
		if _, err := v.Verify(t.Context(), "opaque-good"); err == nil || !errors.Is(err, mcpauth.ErrInvalidToken) {
			t.Errorf("after exp: err = %v", err)
		}
		if n := len(ep.calls()) - before; n != 1 {
			t.Errorf("after exp: %d introspection calls, want 1", n)
		}
		clk.t = now
	})

	t.Run("a JWT is verified locally, never introspected", func(t *testing.T) {
		jwt := is.sign(t, is.claims(testAudience, now, "mcp"), nil, "")
		before := len(ep.calls())
		if _, err := v.Verify(t.Context(), jwt); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(t.Context(), jwt[:len(jwt)-4]+"AAAA"); !errors.Is(err, mcpauth.ErrInvalidToken) {
			t.Errorf("a forged JWT: %v", err)
		}
		if len(ep.calls()) != before {
			t.Error("a JWT was sent to the introspection endpoint")
		}
	})

	t.Run("the endpoint refuses the gateway's credential", func(t *testing.T) {
		t.Setenv("INTROSPECT_SECRET", "wrong")
		v2, _ := newTestVerifier(t, is, &Config{Introspection: &Introspection{URL: ep.URL, ClientID: "gw", ClientSecretEnv: "INTROSPECT_SECRET"}})
		if _, err := v2.Verify(t.Context(), "opaque-good"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})
}

// TestIntrospectionMiddleware: a refused opaque token is a 401 challenge;
// an endpoint that is down is a 503 with Retry-After and no challenge, so a
// client keeps its token and tries again.
func TestIntrospectionMiddleware(t *testing.T) {
	is := newTestIssuer(t)
	t.Setenv("INTROSPECT_SECRET", "gw-secret")
	exp := time.Now().Add(time.Hour).Unix()
	ep := newIntrospectionEndpoint(t, map[string]func() (int, string, string){
		"good": func() (int, string, string) {
			b, _ := json.Marshal(map[string]any{"active": true, "exp": exp, "aud": testAudience, "scope": "mcp"})
			return http.StatusOK, "application/json", string(b)
		},
	})
	downURL := refusedURL(t)

	for _, tc := range []struct {
		name, url, token string
		status           int
		challenge        bool
	}{
		{"good", ep.URL, "good", 200, false},
		{"inactive", ep.URL, "revoked", 401, true},
		{"endpoint down", downURL, "good", 503, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := newTestVerifier(t, is, &Config{Scopes: []string{"mcp"}, Introspection: &Introspection{URL: tc.url, ClientID: "gw", ClientSecretEnv: "INTROSPECT_SECRET"}})
			h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || (w.Header().Get("WWW-Authenticate") != "") != tc.challenge {
				t.Errorf("%d %q, want %d (challenge %v); body %s", w.Code, w.Header().Get("WWW-Authenticate"), tc.status, tc.challenge, w.Body)
			}
			if tc.status == 503 && (w.Header().Get("Retry-After") == "" || strings.Contains(w.Body.String(), "127.0.0.1")) {
				t.Errorf("503 without Retry-After, or naming the endpoint: %v %s", w.Header(), w.Body)
			}
		})
	}
}

// refusedURL is an http URL on 127.0.0.1 that refuses connections for the
// rest of the test: its port is bound but not listening, so no server the
// test binary starts later can take it, as one may take a closed httptest
// server's (gateway/internal/testaddr has the same for the gateway).
func refusedURL(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
