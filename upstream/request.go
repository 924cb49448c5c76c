package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"golang.org/x/net/http/httpguts"
)

// Request builds the HTTP request for validated arguments, against base (the
// upstream's base URL; the operation path is appended to its path).
func (b *Binding) Request(ctx context.Context, base *url.URL, args map[string]any) (*http.Request, error) {
	path, err := b.buildPath(args)
	if err != nil {
		return nil, err
	}
	var rawQuery []string // deepObject and delimited forms are written by hand
	// Room for what exchange adds (User-Agent, Accept, a credential), so
	// that the map is made once.
	header := make(http.Header, 4)
	var cookies []string

	for _, p := range b.params {
		v, ok := args[p.arg]
		if !ok || v == nil {
			continue
		}
		switch p.in {
		case openapi3.ParameterInQuery:
			if m, ok := v.(map[string]any); ok && p.explode && p.style != "deepObject" {
				if err := b.checkExplodedKeys(p, m); err != nil {
					return nil, err
				}
			}
			rawQuery = append(rawQuery, queryPairs(p, v)...)
		case openapi3.ParameterInHeader:
			s := joinValue(v, ",", p.explode)
			if !httpguts.ValidHeaderFieldValue(s) {
				return nil, &ArgumentError{Problems: []string{p.arg + ": header values must not contain control characters (CR, LF, NUL, …)"}}
			}
			header.Set(p.name, s)
		case openapi3.ParameterInCookie:
			s := joinValue(v, ",", false)
			if !httpguts.ValidHeaderFieldValue(s) || strings.Contains(s, ";") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": cookie values must not contain ';' or control characters"}}
			}
			// Form style (OpenAPI 3.0/3.1's cookie default): elements are
			// escaped, the commas between them are not.
			cookies = append(cookies, p.name+"="+joinEscaped(v, ",", false, url.QueryEscape))
		}
	}
	u, err := joinURL(base, path, strings.Join(rawQuery, "&"))
	if err != nil {
		return nil, err
	}
	body, ctype, err := b.encodeBody(args)
	if err != nil {
		return nil, err
	}
	req, err := newRequest(ctx, b.Method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header = header
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req, nil
}

// checkExplodedKeys refuses the keys of an exploded object argument (form
// style, OpenAPI's default for a query object) that each become a query
// parameter of their own and could stand for one the request must not carry
// twice or at all: another declared query parameter (a "limit" the input
// schema bounded would be sent again, unbounded, and which copy the API reads
// depends on its framework) and "_method", which Laravel and Symfony read
// from the query string as a method override (the headers that do the same
// are never arguments: see forbiddenHeader). An object schema allows any key
// unless it says otherwise, so validation alone does not stop them. Names
// are compared as servers may read them (see queryNameKey).
func (b *Binding) checkExplodedKeys(p paramBinding, m map[string]any) error {
	var problems []string
	for _, k := range sortedKeys(m) {
		nk := queryNameKey(k)
		if nk == "_method" {
			problems = append(problems, fmt.Sprintf("%s: key %q is a method override, which the gateway never sends", p.arg, k))
			continue
		}
		for _, q := range b.params {
			if q.in == openapi3.ParameterInQuery && q.arg != p.arg && q.nameKey == nk {
				problems = append(problems, fmt.Sprintf("%s: key %q would send the query parameter %q a second time; pass it as %q", p.arg, k, q.name, q.arg))
				break
			}
		}
	}
	if problems != nil {
		return &ArgumentError{Problems: problems}
	}
	return nil
}

// queryNameKey is a query parameter name as the laxest common server reads
// it: ASP.NET Core matches names regardless of case, and PHP (so Laravel and
// Symfony) drops leading spaces and reads "." and " " as "_". Two names with
// one key may reach the API as one parameter.
func queryNameKey(name string) string {
	return phpNameReplacer.Replace(strings.ToLower(strings.TrimLeft(name, " ")))
}

// phpNameReplacer is PHP's reading of "." and " " in a query name as "_".
var phpNameReplacer = strings.NewReplacer(".", "_", " ", "_")

// joinURL is the one place an upstream URL is made: base's scheme and host,
// base's path with escapedPath (already escaped, starting with "/") appended,
// and rawQuery (already escaped). It refuses a path that would not be sent
// as built, which is what keeps a caller's token on the path the operation
// names.
func joinURL(base *url.URL, escapedPath, rawQuery string) (*url.URL, error) {
	escaped := strings.TrimSuffix(base.EscapedPath(), "/") + escapedPath
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, RawQuery: rawQuery}
	var err error
	if u.Path, err = url.PathUnescape(escaped); err != nil {
		return nil, fmt.Errorf("upstream: built an invalid path %q: %v", escaped, err)
	}
	u.RawPath = escaped
	if u.EscapedPath() != escaped {
		// Cannot happen when every part of the path was escaped. Checked
		// anyway: this is what keeps a caller's token on the path built.
		return nil, fmt.Errorf("upstream: path %q would be sent as %q", escaped, u.EscapedPath())
	}
	return u, nil
}

// newRequest makes a request for u as joinURL made it. u is given to the
// request as it is, not formatted and parsed again: net/http sends u.Host
// and u.RequestURI(), that is the path joinURL checked and the query.
func newRequest(ctx context.Context, method string, u *url.URL, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "", body)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, u.Host
	return req, nil
}
