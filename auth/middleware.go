package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataPath is the RFC 9728 well-known path of protected-resource
// metadata.
const MetadataPath = "/.well-known/oauth-protected-resource"

// MetadataURL derives the metadata URL of a resource as RFC 9728 §3.1 says:
// the well-known path goes between the host and the resource's path, so
// https://gw.example.com/mcp has its metadata at
// https://gw.example.com/.well-known/oauth-protected-resource/mcp.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + MetadataPath + path
}

// MetadataPaths are the paths the metadata is served at: the bare
// well-known path and the one suffixed with the audience's path (the one
// MetadataURL names), so clients that try either find it.
func (v *Verifier) MetadataPaths() []string {
	paths := []string{MetadataPath}
	if u, err := url.Parse(v.cfg.Audience); err == nil {
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			paths = append(paths, MetadataPath+p)
		}
	}
	return paths
}

// MetadataHandler serves the RFC 9728 document, through go-sdk's handler.
// Its resource is the configured audience byte for byte (clients compare it
// with the URL they used), never derived from the request's Host.
func (v *Verifier) MetadataHandler() http.Handler {
	scopes := slices.Clone(v.cfg.Scopes)
	for _, s := range []string{v.cfg.Policy.WriteScope, v.cfg.Policy.DestructiveScope} {
		if s != "" && !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	return mcpauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               v.cfg.Audience,
		AuthorizationServers:   []string{v.cfg.Issuer},
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcpgate",
	})
}

// Middleware verifies the bearer token of every request and requires
// Config.Scopes. A request without a valid token is answered 401, one
// missing a scope 403, each with an RFC 6750 challenge; one whose token
// could not be introspected 503 with Retry-After (see [ErrUnavailable]); otherwise the
// token's [mcpauth.TokenInfo] goes into the request's context, where go-sdk
// puts it in each request's RequestExtra.TokenInfo.
//
// go-sdk's auth.RequireBearerToken alone falls short (v1.8.0): it sends no
// error= parameter, answers 500 to any verifier error that does not wrap
// ErrInvalidToken, and writes err.Error() to the client. So this middleware
// decides everything, and go-sdk's is used only to put the TokenInfo where
// go-sdk reads it (its context key is unexported), with a verifier that
// returns what was already verified.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	inner := mcpauth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*mcpauth.TokenInfo, error) {
		if ti, ok := ctx.Value(verifiedKey{}).(*mcpauth.TokenInfo); ok {
			return ti, nil
		}
		return nil, mcpauth.ErrInvalidToken // unreachable: only reached through the outer check
	}, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := BearerToken(r.Header)
		if !ok {
			v.Unauthorized(w, errors.New("a bearer token is required (Authorization: Bearer ...)"))
			return
		}
		ti, err := v.Verify(r.Context(), tok)
		if errors.Is(err, ErrUnavailable) {
			v.logger.Warn("auth: token introspection failed", "reason", err.Error())
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "the bearer token could not be checked now; try again shortly")
			return
		}
		if err != nil {
			v.Unauthorized(w, err)
			return
		}
		if missing := Missing(ti, v.cfg.Scopes); len(missing) > 0 {
			v.Forbidden(w, v.cfg.Scopes)
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, ti)))
	})
}

type verifiedKey struct{}

// BearerToken returns the token of the request's only Authorization header,
// "Bearer <token>" (RFC 6750 §2.1: the scheme is case-insensitive). Two
// Authorization headers, or a token with spaces, are refused.
func BearerToken(h http.Header) (string, bool) {
	vals := h.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	f := strings.Fields(vals[0])
	if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
		return "", false
	}
	return f[1], true
}

// Missing returns the scopes of required that ti lacks.
func Missing(ti *mcpauth.TokenInfo, required []string) []string {
	var out []string
	for _, s := range required {
		if ti == nil || !slices.Contains(ti.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// Challenge401 is the WWW-Authenticate value of a refused token (RFC 6750
// §3, with RFC 9728 §5.1's resource_metadata).
func (v *Verifier) Challenge401() string {
	return fmt.Sprintf(`Bearer error="invalid_token", resource_metadata=%q`, v.metadataURL)
}

// Challenge403 is the WWW-Authenticate value of a valid token that lacks
// scopes: scope names every scope the request needs (RFC 6750 §3), so a
// client can ask the user for them (the MCP spec's step-up).
func (v *Verifier) Challenge403(scopes []string) string {
	return fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(scopes, " "), v.metadataURL)
}

// Unauthorized answers 401 with the challenge and a JSON-RPC error body
// whose message is err's text (the reasons of [Verifier.Verify], which
// echo nothing of the token).
func (v *Verifier) Unauthorized(w http.ResponseWriter, err error) {
	msg := strings.TrimPrefix(err.Error(), mcpauth.ErrInvalidToken.Error()+": ")
	w.Header().Set("WWW-Authenticate", v.Challenge401())
	writeError(w, http.StatusUnauthorized, "unauthorized: "+msg)
}

// Forbidden answers 403 insufficient_scope naming scopes.
func (v *Verifier) Forbidden(w http.ResponseWriter, scopes []string) {
	w.Header().Set("WWW-Authenticate", v.Challenge403(scopes))
	writeError(w, http.StatusForbidden, fmt.Sprintf("forbidden: this request needs the scope %s (insufficient_scope)", strings.Join(scopes, " ")))
}

// writeError writes a JSON-RPC error with id null: the body is not read yet,
// so its id is not known.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
