package auth

import (
	"net/http"
	"slices"
	"strings"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Requirement is what calling one tool needs, beyond Config.Scopes.
type Requirement struct {
	// All are needed: the policy's scopes for the tool's hints.
	All []string
	// AnyOf are the operation's OpenAPI security alternatives (its oauth2
	// and openIdConnect scopes): one of them must be held in full. Empty:
	// no OpenAPI scope is needed.
	AnyOf [][]string
}

// Require returns what a tool with these annotations and OpenAPI scope
// alternatives needs under p. The policy keys on the hints, not on names:
// a tool that is not read-only needs WriteScope; a destructive one needs
// DestructiveScope too. Hints absent take the MCP defaults (readOnly
// false, destructive true), so a tool that says nothing needs both.
func (p Policy) Require(a *mcp.ToolAnnotations, anyOf [][]string) Requirement {
	readOnly, destructive := false, true
	if a != nil {
		readOnly = a.ReadOnlyHint
		if a.DestructiveHint != nil {
			destructive = *a.DestructiveHint
		}
	}
	var r Requirement
	if !readOnly && p.WriteScope != "" {
		r.All = append(r.All, p.WriteScope)
	}
	if !readOnly && destructive && p.DestructiveScope != "" {
		r.All = append(r.All, p.DestructiveScope)
	}
	for _, alt := range anyOf {
		if len(alt) == 0 {
			// An alternative without scopes (an API key, or {} for
			// "optional"): no OpenAPI scope is required at all.
			return Requirement{All: r.All}
		}
	}
	r.AnyOf = anyOf
	return r
}

// Missing returns the scopes to name in a 403 when ti does not meet r (nil
// when it does): every scope of All, and of the first OpenAPI alternative
// when none is held in full.
func (r Requirement) Missing(ti *mcpauth.TokenInfo) []string {
	lacking := len(Missing(ti, r.All)) > 0
	var alt []string
	if len(r.AnyOf) > 0 {
		alt = r.AnyOf[0]
		for _, a := range r.AnyOf {
			if len(Missing(ti, a)) == 0 {
				alt = nil
				break
			}
		}
		lacking = lacking || alt != nil
	}
	if !lacking {
		return nil
	}
	need := slices.Clone(r.All)
	for _, s := range alt {
		if !slices.Contains(need, s) {
			need = append(need, s)
		}
	}
	return need
}

// Authorize decides one call of a tool with requirement r on behalf of the
// request's verified token (set by [Verifier.Middleware]). It returns the
// status and WWW-Authenticate challenge to answer with when the call is
// refused: 403 insufficient_scope naming everything the call needs.
func (v *Verifier) Authorize(req *http.Request, r Requirement) (status int, challenge string, ok bool) {
	ti, _ := req.Context().Value(verifiedKey{}).(*mcpauth.TokenInfo)
	if ti == nil {
		return http.StatusUnauthorized, v.Challenge401(), false
	}
	need := r.Missing(ti)
	if need == nil {
		return 0, "", true
	}
	// The challenge names the request-wide scopes too: a client that asks
	// for only what it is told must not lose them.
	all := slices.Clone(v.cfg.Scopes)
	for _, s := range need {
		if !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	return http.StatusForbidden, v.Challenge403(all), false
}

// OAuthScopes returns the scope alternatives of an OpenAPI security
// requirement list: one per alternative, holding the scopes of its oauth2
// and openIdConnect schemes (isOAuth says which schemes those are). An
// alternative with no such scheme comes back empty, meaning no scope.
func OAuthScopes(reqs []map[string][]string, isOAuth func(scheme string) bool) [][]string {
	var out [][]string
	for _, req := range reqs {
		alt := []string{}
		names := make([]string, 0, len(req))
		for name := range req {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if isOAuth(name) {
				for _, s := range req[name] {
					if !slices.Contains(alt, s) {
						alt = append(alt, s)
					}
				}
			}
		}
		out = append(out, alt)
	}
	return out
}

// Allows reports whether ti meets r.
func (r Requirement) Allows(ti *mcpauth.TokenInfo) bool { return r.Missing(ti) == nil }

// ScopeSet is the set of scopes that some tool's requirement names, sorted:
// the only scopes that decide which tools a caller may call. Two callers
// that hold the same members of it may call the same tools, whatever else
// their tokens say, so the members a caller holds ([ScopeSet.Held]) key its
// tools/list under `auth.list: callable`.
type ScopeSet []string

// ScopesNamed returns the scopes the requirements name.
func ScopesNamed(reqs map[string]Requirement) ScopeSet {
	var s []string
	for _, r := range reqs {
		s = append(s, r.All...)
		for _, alt := range r.AnyOf {
			s = append(s, alt...)
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// Held returns the members of s that ti holds, space-separated in s's
// order: a key for what ti may call that holds no part of the token, only
// scope names the configuration and the OpenAPI documents already hold.
func (s ScopeSet) Held(ti *mcpauth.TokenInfo) string {
	var b strings.Builder
	for _, scope := range s {
		if ti != nil && slices.Contains(ti.Scopes, scope) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(scope)
		}
	}
	return b.String()
}

// Holder is a TokenInfo that holds exactly the scopes of a key made by
// [ScopeSet.Held]: every requirement decides it as it decides the tokens
// behind that key.
func Holder(key string) *mcpauth.TokenInfo {
	return &mcpauth.TokenInfo{Scopes: strings.Fields(key)}
}
