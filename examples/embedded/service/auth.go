package service

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireToken wraps an API route in the service's own auth check: the
// request must carry "Authorization: Bearer <Options.Token>", or it is
// answered 401 with a JSON detail and a WWW-Authenticate challenge (RFC 6750
// §3: no error code when no token was sent, invalid_token when a wrong one
// was). Through /mcp, the token checked here is the MCP caller's own: the
// gateway forwards it, and nothing else, to this same check.
func (s *Service) requireToken(h http.HandlerFunc) http.Handler {
	want := []byte(s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="notes"`)
			writeJSON(w, http.StatusUnauthorized, detail{"missing bearer token"})
		case subtle.ConstantTimeCompare([]byte(tok), want) != 1:
			w.Header().Set("WWW-Authenticate", `Bearer realm="notes", error="invalid_token"`)
			writeJSON(w, http.StatusUnauthorized, detail{"invalid bearer token"})
		default:
			h(w, r)
		}
	})
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header
// (RFC 6750 §2.1; the scheme is case-insensitive).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
