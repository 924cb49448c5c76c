package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Request builds the HTTP request for validated arguments, against base (the
// upstream's base URL; the operation path is appended to its path).
func (b *Binding) Request(ctx context.Context, base *url.URL, args map[string]any) (*http.Request, error) {
	path, err := b.buildPath(args)
	if err != nil {
		return nil, err
	}
	var rawQuery []string // deepObject and delimited forms are written by hand
	header := http.Header{}
	var cookies []string

	for _, p := range b.params {
		v, ok := args[p.arg]
		if !ok || v == nil {
			continue
		}
		switch p.in {
		case openapi3.ParameterInQuery:
			rawQuery = append(rawQuery, queryPairs(p, v)...)
		case openapi3.ParameterInHeader:
			s := joinValue(v, ",", p.explode)
			if hasCTL(s) {
				return nil, &ArgumentError{Problems: []string{p.arg + ": header values must not contain control characters (CR, LF, NUL, …)"}}
			}
			header.Set(p.name, s)
		case openapi3.ParameterInCookie:
			s := joinValue(v, ",", false)
			if hasCTL(s) || strings.Contains(s, ";") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": cookie values must not contain ';' or control characters"}}
			}
			// Form style (OpenAPI 3.0/3.1's cookie default): elements are
			// escaped, the commas between them are not.
			cookies = append(cookies, p.name+"="+joinEscaped(v, ",", false, url.QueryEscape))
		}
	}
	escaped := strings.TrimSuffix(base.EscapedPath(), "/") + path
	u := url.URL{Scheme: base.Scheme, Host: base.Host, RawQuery: strings.Join(rawQuery, "&")}
	u.Path, err = url.PathUnescape(escaped)
	if err != nil {
		return nil, fmt.Errorf("upstream: built an invalid path %q: %v", escaped, err)
	}
	u.RawPath = escaped
	if u.EscapedPath() != escaped {
		// Cannot happen: every part of the path is escaped by construction.
		// Checked anyway, because this is what keeps a caller's token on the
		// path the operation names.
		return nil, fmt.Errorf("upstream: path %q would be sent as %q", escaped, u.EscapedPath())
	}

	body, ctype, err := b.encodeBody(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, b.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if req.URL.EscapedPath() != escaped {
		return nil, fmt.Errorf("upstream: path %q would be sent as %q", escaped, req.URL.EscapedPath())
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req, nil
}

// hasCTL reports whether s holds a control character that no HTTP field value
// may carry (RFC 9110 §5.5: CTLs other than HTAB). net/http refuses to send
// such a value; it is the caller's argument that is wrong, so it is refused
// as one, before anything is sent.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}
