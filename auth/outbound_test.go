package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestOutboundModes(t *testing.T) {
	is := newTestIssuer(t)
	t.Setenv("TEST_SECRET", "s3cret")
	t.Setenv("TEST_KEY", "key-value")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("gw:s3cret"))
	for _, tc := range []struct {
		name   string
		up     Upstream
		caller Caller
		header string
		value  string
		form   map[string]string // what the token endpoint must have been sent
	}{
		{"forward", Upstream{Mode: ModeForward}, Caller{Token: "caller-tok", Verified: true}, "Authorization", "Bearer caller-tok", nil},
		{"forward without a token", Upstream{}, Caller{}, "", "", nil},
		{"none", Upstream{Mode: ModeNone}, Caller{Token: "caller-tok", Verified: true}, "", "", nil},
		{"static bearer", Upstream{Mode: ModeStatic, ValueEnv: "TEST_KEY"}, Caller{Token: "caller-tok"}, "Authorization", "Bearer key-value", nil},
		{"static header", Upstream{Mode: ModeStatic, Header: "X-Api-Key", ValueEnv: "TEST_KEY"}, Caller{Token: "caller-tok"}, "X-Api-Key", "key-value", nil},
		{"client credentials", Upstream{Mode: ModeClientCredentials, ClientID: "gw", ClientSecretEnv: "TEST_SECRET", Audience: "https://api.example.com", Scopes: []string{"read"}},
			Caller{Token: "caller-tok", Verified: true}, "Authorization", "Bearer issued-client_credentials",
			map[string]string{"grant_type": "client_credentials", "resource": "https://api.example.com", "audience": "https://api.example.com", "scope": "read"}},
		{"exchange", Upstream{Mode: ModeExchange, ClientID: "gw", ClientSecretEnv: "TEST_SECRET", Audience: "https://api.example.com"},
			Caller{Token: "caller-tok", Verified: true}, "Authorization", "Bearer issued-" + grantTokenExchange,
			map[string]string{"grant_type": grantTokenExchange, "subject_token": "caller-tok", "subject_token_type": typeAccessToken, "resource": "https://api.example.com", "audience": "https://api.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.mu.Lock()
			is.tokenCalls, is.tokenAuth = nil, nil
			is.mu.Unlock()
			u := tc.up
			if err := u.Validate(true); err != nil {
				t.Fatal(err)
			}
			o, err := NewOutbound(context.Background(), &u, &OutboundOptions{TokenURL: is.URL + "/token"})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second call comes from the cache
				c, err := o.Credential(context.Background(), tc.caller)
				if err != nil {
					t.Fatal(err)
				}
				if c.Header != tc.header || c.Value != tc.value {
					t.Errorf("credential = %q: %q, want %q: %q", c.Header, c.Value, tc.header, tc.value)
				}
			}
			is.mu.Lock()
			defer is.mu.Unlock()
			if tc.form == nil {
				if len(is.tokenCalls) != 0 {
					t.Errorf("the token endpoint was called %d times", len(is.tokenCalls))
				}
				return
			}
			if len(is.tokenCalls) != 1 {
				t.Fatalf("token endpoint called %d times, want 1 (then cached)", len(is.tokenCalls))
			}
			for k, want := range tc.form {
				if got := strings.Join(is.tokenCalls[0][k], ","); got != want {
					t.Errorf("form %s = %q, want %q", k, got, want)
				}
			}
			if is.tokenAuth[0] != basic {
				t.Errorf("client authentication = %q, want client_secret_basic", is.tokenAuth[0])
			}
		})
	}
}

func TestExchangeFailures(t *testing.T) {
	is := newTestIssuer(t)
	t.Setenv("TEST_SECRET", "s3cret")
	u := Upstream{Mode: ModeExchange, ClientID: "gw", ClientSecretEnv: "TEST_SECRET", Audience: "https://api.example.com"}
	if err := u.Validate(true); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	o, err := NewOutbound(context.Background(), &u, &OutboundOptions{TokenURL: is.URL + "/token", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Credential(context.Background(), Caller{Token: "t", Verified: false}); err == nil {
		t.Error("an unverified token was exchanged")
	}
	is.tokenFn = func(map[string][]string) (int, any) {
		return 400, map[string]any{"error": "invalid_target", "error_description": "secret-detail caller-tok"}
	}
	_, err = o.Credential(context.Background(), Caller{Token: "caller-tok", Verified: true})
	if err == nil || !strings.Contains(err.Error(), "invalid_target") || strings.Contains(err.Error(), "caller-tok") {
		t.Errorf("err = %v", err)
	}
	// Expiry: a token with expires_in 20 s is reused for 10 s, not after.
	n := 0
	is.tokenFn = func(map[string][]string) (int, any) {
		n++
		return 200, map[string]any{"access_token": "x", "token_type": "Bearer", "expires_in": 20}
	}
	o.Credential(context.Background(), Caller{Token: "c2", Verified: true})
	o.Credential(context.Background(), Caller{Token: "c2", Verified: true})
	clk.add(11 * time.Second)
	o.Credential(context.Background(), Caller{Token: "c2", Verified: true})
	o.Credential(context.Background(), Caller{Token: "c3", Verified: true})
	if n != 3 {
		t.Errorf("token endpoint called %d times, want 3 (c2, c2 after expiry, c3)", n)
	}
}

func TestUpstreamValidate(t *testing.T) {
	t.Setenv("SET", "v")
	for _, tc := range []struct {
		name      string
		u         Upstream
		hasIssuer bool
		want      string // substring of the error, "" for none
	}{
		{"default forward", Upstream{}, false, ""},
		{"unknown mode", Upstream{Mode: "pass"}, false, `"pass" is not forward`},
		{"forward with a key", Upstream{Mode: "forward", Header: "X"}, false, "auth.header: not used by mode forward"},
		{"static without env", Upstream{Mode: "static"}, false, "value_env: required"},
		{"static env unset", Upstream{Mode: "static", ValueEnv: "UNSET_XYZ"}, false, "UNSET_XYZ is not set"},
		{"static bad header", Upstream{Mode: "static", ValueEnv: "SET", Header: "Cookie"}, false, "not a valid header"},
		{"cc without token url", Upstream{Mode: "client_credentials", ClientID: "a", ClientSecretEnv: "SET"}, false, "token_url: required"},
		{"cc with issuer", Upstream{Mode: "client_credentials", ClientID: "a", ClientSecretEnv: "SET"}, true, ""},
		{"cc http token url", Upstream{Mode: "client_credentials", TokenURL: "http://idp.example.com/t", ClientID: "a", ClientSecretEnv: "SET"}, false, "must be https"},
		{"exchange without issuer", Upstream{Mode: "exchange", TokenURL: "https://idp/t", ClientID: "a", ClientSecretEnv: "SET", Audience: "x"}, false, "needs auth.issuer"},
		{"exchange without audience", Upstream{Mode: "exchange", ClientID: "a", ClientSecretEnv: "SET"}, true, "audience: required"},
		{"exchange secret unset", Upstream{Mode: "exchange", ClientID: "a", ClientSecretEnv: "UNSET_XYZ", Audience: "x"}, true, "UNSET_XYZ is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.u.Validate(tc.hasIssuer)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"good", Config{Issuer: "https://idp.example.com", Audience: "https://gw.example.com/mcp"}, ""},
		{"no issuer", Config{Audience: "https://gw.example.com/mcp"}, "auth.issuer: required"},
		{"no audience", Config{Issuer: "https://idp.example.com"}, "auth.audience: required"},
		{"http issuer", Config{Issuer: "http://idp.example.com", Audience: "https://gw/mcp"}, "must be https"},
		{"loopback http", Config{Issuer: "http://127.0.0.1:9", Audience: "http://localhost:8080/mcp"}, ""},
		{"audience fragment", Config{Issuer: "https://idp", Audience: "https://gw/mcp#x"}, "fragment"},
		{"introspection without url", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Introspection: &Introspection{}}, "auth.introspection.url: required"},
		{"introspection over http", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Introspection: &Introspection{URL: "http://idp/introspect", ClientID: "gw", ClientSecretEnv: "HOME"}}, "must be https"},
		{"introspection without client", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Introspection: &Introspection{URL: "https://idp/introspect"}}, "both required"},
		{"introspection secret unset", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Introspection: &Introspection{URL: "https://idp/introspect", ClientID: "gw", ClientSecretEnv: "MCPGATE_TEST_UNSET_SECRET"}}, "is not set"},
		{"introspection", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Introspection: &Introspection{URL: "https://idp/introspect", ClientID: "gw", ClientSecretEnv: "HOME"}}, ""},
		{"list callable", Config{Issuer: "https://idp", Audience: "https://gw/mcp", List: "callable"}, ""},
		{"list bad", Config{Issuer: "https://idp", Audience: "https://gw/mcp", List: "some"}, "is not all or callable"},
		{"scope with space", Config{Issuer: "https://idp", Audience: "https://gw/mcp", Scopes: []string{"a b"}}, "must not contain spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// inMemory is a RoundTripper that serves requests with h in the caller's
// goroutine: no network, so an exchange can run in a synctest bubble.
type inMemory struct{ h http.Handler }

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// TestExchangeCoalesced: concurrent first calls for one subject share one
// request to the token endpoint, and all get its token (or its error); a
// caller that gives up leaves without failing the others; different
// subjects are not shared. The token endpoint holds each request until
// synctest says every caller is blocked, so a second request would be seen
// whatever the scheduling.
func TestExchangeCoalesced(t *testing.T) {
	is := newTestIssuer(t)
	t.Setenv("TEST_SECRET", "s3cret")
	u := Upstream{Mode: ModeExchange, ClientID: "gw", ClientSecretEnv: "TEST_SECRET", Audience: "https://api.example.com"}
	if err := u.Validate(true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		subjects     []string // one caller each
		cancelFirst  bool     // the first caller gives up while the exchange is under way
		status       int      // the token endpoint's answer
		wantRequests int
	}{
		{"one subject, three callers", []string{"s", "s", "s"}, false, 200, 1},
		{"the first caller gives up", []string{"s", "s", "s"}, true, 200, 1},
		{"a refusal is shared", []string{"s", "s", "s"}, false, 400, 1},
		{"two subjects", []string{"s", "t", "s", "t"}, false, 200, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Made outside the bubble: its cache's cleaner goroutine never ends.
			o, err := NewOutbound(context.Background(), &u, &OutboundOptions{
				TokenURL:   is.URL + "/token",
				HTTPClient: &http.Client{Transport: inMemory{is.Config.Handler}},
			})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				var requests atomic.Int32
				is.mu.Lock()
				is.tokenFn = func(form map[string][]string) (int, any) {
					requests.Add(1)
					<-release
					if tt.status != 200 {
						return tt.status, map[string]any{"error": "invalid_target"}
					}
					return 200, map[string]any{"access_token": "for-" + form["subject_token"][0], "token_type": "Bearer", "expires_in": 300}
				}
				is.mu.Unlock()
				type answer struct {
					i   int
					c   Credential
					err error
				}
				answers := make(chan answer, len(tt.subjects))
				firstCtx, cancelFirst := context.WithCancel(context.Background())
				defer cancelFirst()
				for i, s := range tt.subjects {
					ctx := context.Background()
					if i == 0 {
						ctx = firstCtx
					}
					go func() {
						c, err := o.Credential(ctx, Caller{Token: s, Verified: true})
						answers <- answer{i, c, err}
					}()
				}
				synctest.Wait() // every caller is waiting on the token endpoint
				if n := int(requests.Load()); n != tt.wantRequests {
					t.Errorf("%d callers made %d requests to the token endpoint, want %d", len(tt.subjects), n, tt.wantRequests)
				}
				if tt.cancelFirst {
					cancelFirst()
					a := <-answers
					if a.i != 0 || !errors.Is(a.err, context.Canceled) {
						t.Errorf("caller %d answered %v, %v; want the first one to leave with context.Canceled", a.i, a.c, a.err)
					}
				}
				close(release)
				for range len(tt.subjects) - btoi(tt.cancelFirst) {
					a := <-answers
					switch want := "Bearer for-" + tt.subjects[a.i]; {
					case tt.status != 200:
						if a.err == nil || !strings.Contains(a.err.Error(), "invalid_target") {
							t.Errorf("caller %d: %v, %v; want the endpoint's refusal", a.i, a.c, a.err)
						}
					case a.err != nil || a.c.Value != want:
						t.Errorf("caller %d: %v, %v; want %q", a.i, a.c, a.err, want)
					}
				}
				if n := int(requests.Load()); n != tt.wantRequests {
					t.Errorf("%d requests to the token endpoint in all, want %d", n, tt.wantRequests)
				}
			})
		})
	}
	is.mu.Lock()
	is.tokenFn = nil
	is.mu.Unlock()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
