package upstream

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Request builds the HTTP request for validated arguments, against base (the
// upstream's base URL; the operation path is appended to its path).
func (b *Binding) Request(ctx context.Context, base *url.URL, args map[string]any) (*http.Request, error) {
	path := b.Path
	var rawQuery []string // deepObject and delimited forms are written by hand
	header := http.Header{}
	var cookies []string

	for _, p := range b.params {
		v, ok := args[p.arg]
		if !ok || v == nil {
			if p.in == openapi3.ParameterInPath {
				return nil, &ArgumentError{Problems: []string{p.arg + ": missing required path parameter"}}
			}
			continue
		}
		switch p.in {
		case openapi3.ParameterInPath:
			seg, err := pathValue(p, v)
			if err != nil {
				return nil, err
			}
			path = strings.ReplaceAll(path, "{"+p.name+"}", seg)
		case openapi3.ParameterInQuery:
			rawQuery = append(rawQuery, queryPairs(p, v)...)
		case openapi3.ParameterInHeader:
			s := joinValue(v, ",", p.explode)
			if strings.ContainsAny(s, "\r\n\x00") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": header values must not contain CR, LF or NUL"}}
			}
			header.Set(p.name, s)
		case openapi3.ParameterInCookie:
			s := joinValue(v, ",", false)
			if strings.ContainsAny(s, ";\r\n\x00") {
				return nil, &ArgumentError{Problems: []string{p.arg + ": cookie values must not contain ';', CR, LF or NUL"}}
			}
			cookies = append(cookies, p.name+"="+url.QueryEscape(s))
		}
	}
	u := *base
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = strings.Join(rawQuery, "&")
	u.Fragment = ""

	body, ctype, err := b.encodeBody(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, b.Method, u.String(), body)
	if err != nil {
		return nil, err
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
