package gateway

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/auth"
)

const authDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "components": {"securitySchemes": {"oa": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://idp.example.com/token", "scopes": {"things:read": "read"}}}}}},
  "paths": {
    "/things": {"get": {"operationId": "list_things", "tags": ["agent-exposed"], "security": [{"oa": ["things:read"]}],
      "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
    "/things/{id}": {"delete": {"operationId": "delete_thing", "tags": ["agent-exposed"],
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}}
  }
}`

const authAudience = "http://127.0.0.1:1/mcp"

// authIssuer is an OpenID provider on loopback: discovery, a JWKS with one
// RS256 key, and a token endpoint for client credentials and exchange.
type authIssuer struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func newAuthIssuer(t *testing.T) *authIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &authIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/jwks", "token_endpoint": is.URL + "/token"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		tok := "cc-token-for-" + r.PostForm.Get("resource")
		if r.PostForm.Get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange" {
			tok = "ex-token-for-" + r.PostForm.Get("audience")
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 300})
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

func (is *authIssuer) token(t *testing.T, scope string) string {
	return is.tokenFor(t, "user-secret-sub", scope)
}

// tokenFor is a token of subject sub, issued now.
func (is *authIssuer) tokenFor(t *testing.T, sub, scope string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	payload, _ := json.Marshal(map[string]any{"iss": is.URL, "aud": authAudience, "sub": sub,
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "scope": scope, "email": "claim-must-not-log@example.com"})
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := obj.CompactSerialize()
	return s
}

// credRecorder is an upstream that records the credential headers it gets.
type credRecorder struct {
	mu  sync.Mutex
	got []http.Header
}

func (c *credRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.got = append(c.got, http.Header{"Authorization": r.Header.Values("Authorization"), "X-Api-Key": r.Header.Values("X-Api-Key"), "Cookie": r.Header.Values("Cookie")})
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func (c *credRecorder) last() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) == 0 {
		return nil
	}
	return c.got[len(c.got)-1]
}

func authPost(t *testing.T, url, body string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func toolCall(name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args)
}

// TestAuthEndToEnd: a gateway that verifies, with one upstream per outbound
// mode; what reaches each upstream; 401/403 challenges; step-up; the RFC
// 9728 metadata; and no token, cookie or claim in any log line at debug.
func TestAuthEndToEnd(t *testing.T) {
	is := newAuthIssuer(t)
	t.Setenv("GW_SECRET", "gw-client-secret")
	t.Setenv("API_KEY", "static-api-key")
	modes := map[string]auth.Upstream{
		"fwd": {Mode: auth.ModeForward},
		"cc":  {Mode: auth.ModeClientCredentials, ClientID: "gw", ClientSecretEnv: "GW_SECRET", Audience: "https://cc.example.com"},
		"ex":  {Mode: auth.ModeExchange, ClientID: "gw", ClientSecretEnv: "GW_SECRET", Audience: "https://ex.example.com"},
		"st":  {Mode: auth.ModeStatic, Header: "X-Api-Key", ValueEnv: "API_KEY"},
		"no":  {Mode: auth.ModeNone},
	}
	recs := map[string]*credRecorder{}
	cfg := &Config{Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"},
		Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}}}
	for _, name := range []string{"fwd", "cc", "ex", "st", "no"} {
		rec := &credRecorder{}
		srv := httptest.NewServer(rec)
		t.Cleanup(srv.Close)
		recs[name] = rec
		cfg.Upstreams = append(cfg.Upstreams, Upstream{Name: name, OpenAPI: "auth.json", Document: []byte(authDoc),
			BaseURL: srv.URL, ToolPrefix: name + "_", Auth: modes[name]})
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := New(context.Background(), cfg, &Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	defer gw.Close()
	meta := "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp"

	reader := is.token(t, "mcp things:read")
	admin := is.token(t, "mcp things:read mcp:write mcp:destructive")
	bearer := func(tok string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tok}, "Cookie": {"session=cookie-must-not-log"}}
	}

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			h         http.Header
			body      string
			status    int
			challenge string
		}{
			{"no token", nil, toolCall("fwd_list_things", "{}"), 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
			{"bad token", bearer("x.y.z"), toolCall("fwd_list_things", "{}"), 401, `Bearer error="invalid_token", resource_metadata="` + meta + `"`},
			{"no mcp scope", bearer(is.token(t, "things:read")), toolCall("fwd_list_things", "{}"), 403, `Bearer error="insufficient_scope", scope="mcp", resource_metadata="` + meta + `"`},
			{"openapi scope missing", bearer(is.token(t, "mcp")), toolCall("fwd_list_things", "{}"), 403, `Bearer error="insufficient_scope", scope="mcp things:read", resource_metadata="` + meta + `"`},
			{"destructive without scope", bearer(reader), toolCall("fwd_delete_thing", `{"id":"1"}`), 403, `Bearer error="insufficient_scope", scope="mcp mcp:write mcp:destructive", resource_metadata="` + meta + `"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := recs["fwd"].last()
				resp, body := authPost(t, gw.URL+"/mcp", tc.body, tc.h)
				if resp.StatusCode != tc.status || resp.Header.Get("WWW-Authenticate") != tc.challenge {
					t.Errorf("got %d %q\nwant %d %q\nbody %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.status, tc.challenge, body)
				}
				if fmt.Sprint(recs["fwd"].last()) != fmt.Sprint(before) {
					t.Error("the upstream was called")
				}
			})
		}
	})

	// A 2026-07-28 request names its tool twice, in Mcp-Name and in the body.
	// Auth decides on the body, the tool that would run; a header that
	// disagrees is refused by go-sdk before dispatch. Either way, nothing
	// reaches the upstream.
	t.Run("2026-07-28 headers that disagree with the body", func(t *testing.T) {
		call := func(tool string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"id":"1"},`+
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
				`"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`, tool)
		}
		for _, tc := range []struct {
			name, header, body string
			status             int
		}{
			{"header names a read, body a delete", "fwd_list_things", "fwd_delete_thing", 403},
			{"header names a delete, body a read", "fwd_delete_thing", "fwd_list_things", 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := bearer(reader)
				h.Set("Mcp-Protocol-Version", "2026-07-28")
				h.Set("Mcp-Method", "tools/call")
				h.Set("Mcp-Name", tc.header)
				before := recs["fwd"].last()
				resp, body := authPost(t, gw.URL+"/mcp", call(tc.body), h)
				if resp.StatusCode != tc.status || (tc.status == 400) != strings.Contains(body, "Mcp-Name header value") {
					t.Errorf("got %d %s, want %d (400: the mismatch named)", resp.StatusCode, body, tc.status)
				}
				if fmt.Sprint(recs["fwd"].last()) != fmt.Sprint(before) {
					t.Error("the upstream was called")
				}
			})
		}
	})

	t.Run("step-up succeeds with the scope", func(t *testing.T) {
		resp, body := authPost(t, gw.URL+"/mcp", toolCall("fwd_delete_thing", `{"id":"1"}`), bearer(admin))
		if resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
	})

	t.Run("what each upstream receives", func(t *testing.T) {
		want := map[string]string{
			"fwd": "map[Authorization:[Bearer " + reader + "] Cookie:[] X-Api-Key:[]]",
			"cc":  "map[Authorization:[Bearer cc-token-for-https://cc.example.com] Cookie:[] X-Api-Key:[]]",
			"ex":  "map[Authorization:[Bearer ex-token-for-https://ex.example.com] Cookie:[] X-Api-Key:[]]",
			"st":  "map[Authorization:[] Cookie:[] X-Api-Key:[static-api-key]]",
			"no":  "map[Authorization:[] Cookie:[] X-Api-Key:[]]",
		}
		for name, w := range want {
			resp, body := authPost(t, gw.URL+"/mcp", toolCall(name+"_list_things", "{}"), bearer(reader))
			if resp.StatusCode != 200 || strings.Contains(body, `"isError":true`) {
				t.Fatalf("%s: status %d body %s", name, resp.StatusCode, body)
			}
			if got := fmt.Sprint(recs[name].last()); got != w {
				t.Errorf("%s received %s\nwant %s", name, got, w)
			}
		}
	})

	t.Run("metadata", func(t *testing.T) {
		for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
			resp, err := http.Get(gw.URL + p)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Resource string   `json:"resource"`
				Servers  []string `json:"authorization_servers"`
			}
			json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if resp.StatusCode != 200 || doc.Resource != authAudience || fmt.Sprint(doc.Servers) != "["+is.URL+"]" {
				t.Errorf("%s: %d %+v", p, resp.StatusCode, doc)
			}
		}
	})

	// Nothing secret in any log line, at debug level.
	out := logs.String()
	if !strings.Contains(out, "tool call") {
		t.Fatalf("no call was logged: %s", out)
	}
	for _, secret := range []string{reader, admin, "cookie-must-not-log", "user-secret-sub", "claim-must-not-log",
		"cc-token-for", "ex-token-for", "static-api-key", "gw-client-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("the logs hold %q", secret)
		}
	}
}

func TestAuthConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"two remote upstreams without modes", `
upstreams:
  - {name: a, openapi: a.json}
  - {name: b, openapi: b.json}
`, "upstreams[0] (a): auth.mode is required when 2 remote upstreams are served"},
		{"one mode stated", `
upstreams:
  - {name: a, openapi: a.json, auth: {mode: forward}}
  - {name: b, openapi: b.json}
`, "upstreams[1] (b): auth.mode is required"},
		{"unknown key", `
upstreams:
  - {name: a, openapi: a.json, auth: {mode: forward, secret: x}}
`, `unknown key "secret"`},
		{"unknown auth key", `
auth: {issuer: https://idp.example.com, audience: https://gw.example.com/mcp, jwks: x}
upstreams:
  - {name: a, openapi: a.json}
`, `unknown key "jwks"`},
		{"issuer without audience", `
auth: {issuer: https://idp.example.com}
upstreams:
  - {name: a, openapi: a.json}
`, "auth.audience: required"},
		{"single upstream defaults to forward", `
upstreams:
  - {name: a, openapi: a.json}
`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				cfg, err = cfg.Resolve()
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Upstreams[0].Auth.Mode != auth.ModeForward {
					t.Errorf("mode = %q", cfg.Upstreams[0].Auth.Mode)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestAuthListCallable: under auth.list: callable, tools/list shows each
// caller exactly the tools authorizeCall would let it call, and the fast
// path, go-sdk stateless and go-sdk stateful (sessions) give each caller the
// same list, marked private. The fast path's views are keyed by the
// policy-relevant scopes held, not by token.
func TestAuthListCallable(t *testing.T) {
	is := newAuthIssuer(t)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	newCfg := func(stateful bool) *Config {
		return &Config{Stateful: stateful,
			Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}, List: auth.ListCallable,
				Policy: auth.Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}},
			Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}
	}
	type server struct {
		name     string
		g        *Gateway
		url      string
		stateful bool
	}
	var servers []server
	for _, s := range []struct {
		name           string
		stateful, slow bool
	}{{"fast path", false, false}, {"go-sdk stateless", false, true}, {"go-sdk stateful", true, true}, {"stateful, fast calls", true, false}} {
		g, err := New(context.Background(), newCfg(s.stateful), &Options{DisableFastPath: s.slow})
		if err != nil {
			t.Fatal(err)
		}
		if (g.fast != nil) != !s.slow {
			t.Fatalf("%s: fast path %v", s.name, g.fast != nil)
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		servers = append(servers, server{s.name, g, srv.URL + "/mcp", s.stateful})
	}
	fastServed, sessionServed := 0, 0
	servers[0].g.fast.onServe = func() { fastServed++ }
	servers[3].g.fast.onServe = func() { sessionServed++ }

	for _, tc := range []struct {
		scope string
		want  string
	}{
		{"mcp", "[]"},
		{"mcp things:read", "[list_things]"},
		{"mcp things:read unrelated:scope", "[list_things]"}, // same view as the one above
		{"mcp mcp:write", "[]"},                              // delete_thing also needs mcp:destructive
		{"mcp mcp:write mcp:destructive", "[delete_thing]"},  // list_things needs things:read
		{"mcp things:read mcp:write mcp:destructive", "[delete_thing list_things]"},
	} {
		t.Run(tc.scope, func(t *testing.T) {
			authz := "Bearer " + is.token(t, tc.scope)
			for _, s := range servers {
				h := http.Header{"Authorization": {authz}}
				if s.stateful {
					h = sessionHeader(openSession(t, s.url, authz), authz)
				}
				before := fastServed
				a := sendRaw(t, s.url, rpc("1", "tools/list", ""), h)
				if s.name == "fast path" && fastServed != before+1 {
					t.Error("the fast path did not answer")
				}
				if a.Status != http.StatusOK || len(a.Messages) != 1 {
					t.Fatalf("%s: %d %v %s", s.name, a.Status, a.Messages, a.Text)
				}
				res, _ := a.Messages[0].(map[string]any)["result"].(map[string]any)
				var names []string
				for _, tool := range res["tools"].([]any) {
					names = append(names, tool.(map[string]any)["name"].(string))
				}
				if got := fmt.Sprint(names); got != tc.want {
					t.Errorf("%s lists %s, want %s", s.name, got, tc.want)
				}
				if res["tools"] == nil || res["cacheScope"] != "private" {
					t.Errorf("%s: tools %v, cacheScope %v, want a list and private", s.name, res["tools"], res["cacheScope"])
				}
			}
			// Every tool listed can be called, and the others are refused
			// (step-up), whatever the path.
			session := sessionHeader(openSession(t, servers[3].url, authz), authz)
			for _, tool := range []string{"list_things", "delete_thing"} {
				listed := strings.Contains(tc.want, tool)
				resp, _ := authPost(t, servers[0].url, toolCall(tool, `{"id":"1"}`), http.Header{"Authorization": {authz}})
				if listed != (resp.StatusCode == http.StatusOK) {
					t.Errorf("%s: listed %v, call answered %d", tool, listed, resp.StatusCode)
				}
				before := sessionServed
				resp, _ = authPost(t, servers[3].url, toolCall(tool, `{"id":"1"}`), session)
				if listed != (resp.StatusCode == http.StatusOK) {
					t.Errorf("%s on a session: listed %v, call answered %d", tool, listed, resp.StatusCode)
				}
				if listed && sessionServed != before+1 {
					t.Errorf("%s on a session: not answered by the fast path", tool)
				}
			}
		})
	}
	// Five distinct sets of policy-relevant scopes held; the unrelated scope
	// made no view of its own. The keys are scope names only.
	keys := servers[0].g.fast.views.Keys()
	slices.Sort(keys)
	if want := `["" "mcp:destructive mcp:write" "mcp:destructive mcp:write things:read" "mcp:write" "things:read"]`; fmt.Sprintf("%q", keys) != want {
		t.Errorf("view keys %q\nwant %s", keys, want)
	}
}

// TestAuthMetricsWarning: with auth on, metrics served beside /mcp (not
// verified) are warned about at start-up; on a listener of their own, or
// off, they are not.
func TestAuthMetricsWarning(t *testing.T) {
	is := newAuthIssuer(t)
	off := false
	for _, tt := range []struct {
		name    string
		metrics MetricsConfig
		warn    bool
	}{
		{"beside /mcp", MetricsConfig{}, true},
		{"own listener", MetricsConfig{Listen: "127.0.0.1:0"}, false},
		{"off", MetricsConfig{Enabled: &off}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := &Config{Metrics: tt.metrics, Auth: &auth.Config{Issuer: is.URL, Audience: authAudience},
				Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: "http://127.0.0.1:9"}}}
			if _, err := New(context.Background(), cfg, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(logs.String(), "level=WARN msg=\"auth: the metrics endpoint is not verified"); got != tt.warn {
				t.Errorf("warned: %v, want %v\n%s", got, tt.warn, logs.String())
			}
		})
	}
}

// TestAuthSessionOwner: with auth on, a stateful session belongs to the
// verified subject, not to the token string: the same user's refreshed token
// goes on in the session, another user's token is answered go-sdk's 404, as
// for a session that does not exist.
func TestAuthSessionOwner(t *testing.T) {
	is := newAuthIssuer(t)
	rec := &credRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	cfg := &Config{Stateful: true, Auth: &auth.Config{Issuer: is.URL, Audience: authAudience, Scopes: []string{"mcp"}},
		Upstreams: []Upstream{{Name: "api", OpenAPI: "auth.json", Document: []byte(authDoc), BaseURL: api.URL}}}
	g, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(gw.Close)
	url := gw.URL + "/mcp"

	first := is.tokenFor(t, "alice", "mcp things:read")
	id := openSession(t, url, "Bearer "+first)
	_, notFound := do(t, http.MethodDelete, url, nil, sessionHeader("no-such-session", "Bearer "+first))
	refreshed := is.tokenFor(t, "alice", "mcp things:read mcp:write") // another token string, same subject
	if refreshed == first {
		t.Fatal("the refreshed token is the same string")
	}
	resp, body := post(t, url, toolCall("list_things", "{}"), sessionHeader(id, "Bearer "+refreshed))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `\"ok\":true`) {
		t.Fatalf("a refreshed token of the session's subject: %d %s", resp.StatusCode, body)
	}
	if got := rec.last().Get("Authorization"); got != "Bearer "+refreshed {
		t.Errorf("the upstream got %.20q…, want the refreshed token", got)
	}

	before := rec.last()
	for _, tt := range []struct{ method, body string }{
		{http.MethodPost, toolCall("list_things", "{}")},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		mallory := is.tokenFor(t, "mallory", "mcp things:read")
		resp, body := do(t, tt.method, url, strings.NewReader(tt.body), sessionHeader(id, "Bearer "+mallory))
		if resp.StatusCode != http.StatusNotFound || body != notFound {
			t.Errorf("%s by another subject: %d %q, want 404 %q", tt.method, resp.StatusCode, body, notFound)
		}
	}
	if fmt.Sprint(rec.last()) != fmt.Sprint(before) {
		t.Error("another subject's call reached the upstream")
	}
	if resp, body := do(t, http.MethodDelete, url, nil, sessionHeader(id, "Bearer "+refreshed)); resp.StatusCode != http.StatusNoContent {
		t.Errorf("the owner's DELETE with the refreshed token: %d %s", resp.StatusCode, body)
	}
}
