package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func hints(readOnly, destructive bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive}
}

func TestPolicyRequire(t *testing.T) {
	p := Policy{WriteScope: "w", DestructiveScope: "d"}
	for _, tc := range []struct {
		name  string
		ann   *mcp.ToolAnnotations
		anyOf [][]string
		have  []string
		want  string // missing scopes, "" when allowed
	}{
		{"read-only needs nothing", hints(true, false), nil, nil, "[]"},
		{"write needs w", hints(false, false), nil, nil, "[w]"},
		{"write with w", hints(false, false), nil, []string{"w"}, "[]"},
		{"destructive needs w and d", hints(false, true), nil, []string{"w"}, "[w d]"},
		{"destructive with both", hints(false, true), nil, []string{"w", "d"}, "[]"},
		{"no hints: MCP defaults, destructive", nil, nil, nil, "[w d]"},
		{"openapi scopes", hints(true, false), [][]string{{"pets:read"}}, nil, "[pets:read]"},
		{"openapi second alternative held", hints(true, false), [][]string{{"a"}, {"b"}}, []string{"b"}, "[]"},
		{"openapi alternative without scopes", hints(true, false), [][]string{{"a"}, {}}, nil, "[]"},
		{"both kinds", hints(false, false), [][]string{{"a"}}, []string{"a"}, "[w]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p.Require(tc.ann, tc.anyOf)
			got := fmt.Sprint(r.Missing(&mcpauth.TokenInfo{Scopes: tc.have}))
			if got != tc.want {
				t.Errorf("missing = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOAuthScopes(t *testing.T) {
	oauth := func(s string) bool { return s == "oa" || s == "oidc" }
	got := OAuthScopes([]map[string][]string{{"oa": {"a", "b"}, "oidc": {"b", "c"}}, {"apikey": nil}}, oauth)
	if fmt.Sprint(got) != "[[a b c] []]" {
		t.Errorf("got %v", got)
	}
}

// Step-up: a token without the destructive scope gets 403 naming it; with it
// the call is allowed.
func TestAuthorizeStepUp(t *testing.T) {
	is := newTestIssuer(t)
	v, clk := newTestVerifier(t, is, &Config{Scopes: []string{"mcp"}, Policy: Policy{WriteScope: "mcp:write", DestructiveScope: "mcp:destructive"}})
	req := v.cfg.Policy.Require(hints(false, true), nil)
	call := func(scope string) (int, string, bool) {
		tok := is.sign(t, is.claims(testAudience, clk.now(), scope), nil, "")
		ti, err := v.Verify(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/mcp", nil)
		r = r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ti))
		return v.Authorize(r, req)
	}
	status, ch, ok := call("mcp mcp:write")
	if ok || status != 403 || ch != `Bearer error="insufficient_scope", scope="mcp mcp:write mcp:destructive", resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("without the scope: %d %q %v", status, ch, ok)
	}
	if _, _, ok := call("mcp mcp:write mcp:destructive"); !ok {
		t.Error("with the scope: refused")
	}
	if status, _, ok := v.Authorize(httptest.NewRequest("POST", "/mcp", nil), req); ok || status != 401 {
		t.Errorf("unverified request: %d %v", status, ok)
	}
}

// TestScopeSetHeld: a caller's view key holds only the policy-relevant
// scopes it has, so callers who may call the same tools share a key, and a
// Holder of the key is decided as the caller is.
func TestScopeSetHeld(t *testing.T) {
	p := Policy{WriteScope: "w", DestructiveScope: "d"}
	reqs := map[string]Requirement{
		"read":    p.Require(hints(true, false), [][]string{{"r"}, {"admin"}}),
		"write":   p.Require(hints(false, false), nil),
		"destroy": p.Require(hints(false, true), [][]string{{}}),
	}
	set := ScopesNamed(reqs)
	if fmt.Sprint(set) != "[admin d r w]" {
		t.Fatalf("ScopesNamed = %v", set)
	}
	for _, tc := range []struct {
		have []string
		key  string
	}{
		{nil, ""},
		{[]string{"openid", "profile"}, ""},
		{[]string{"w", "r", "email"}, "r w"},
		{[]string{"d", "w", "admin", "r"}, "admin d r w"},
	} {
		ti := &mcpauth.TokenInfo{Scopes: tc.have}
		key := set.Held(ti)
		if key != tc.key {
			t.Errorf("Held(%v) = %q, want %q", tc.have, key, tc.key)
		}
		for name, r := range reqs {
			if r.Allows(ti) != r.Allows(Holder(key)) {
				t.Errorf("%v: %s decided differently for the token and its key", tc.have, name)
			}
		}
	}
	if set.Held(nil) != "" {
		t.Error("a nil TokenInfo holds scopes")
	}
}
