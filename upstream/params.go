package upstream

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"golang.org/x/net/http/httpguts"
)

type paramBinding struct {
	arg      string // key in the tool arguments
	name     string // name in the request
	nameKey  string // a query parameter's queryNameKey(name), for checkExplodedKeys
	in       string // openapi3.ParameterInPath, ...
	style    string
	explode  bool
	required bool
}

// mergeParams returns the operation's parameters: the path item's, overridden by
// the operation's own with the same name and location. Header parameters that
// OpenAPI says to ignore (Accept, Content-Type, Authorization) are left out, and
// so are those a model must never set (see forbiddenHeader): their names come
// back in refused, for the audit.
func mergeParams(item *openapi3.PathItem, op *openapi3.Operation) (params []*openapi3.Parameter, refused []string) {
	idx := map[string]int{}
	add := func(list openapi3.Parameters) {
		for _, pr := range list {
			if pr == nil || pr.Value == nil {
				continue
			}
			p := pr.Value
			key := p.In + "\x00" + p.Name
			if p.In == openapi3.ParameterInHeader {
				key = p.In + "\x00" + http.CanonicalHeaderKey(p.Name)
			}
			if i, ok := idx[key]; ok {
				params[i] = p
				continue
			}
			idx[key] = len(params)
			params = append(params, p)
		}
	}
	if item != nil {
		add(item.Parameters)
	}
	add(op.Parameters)
	kept := params[:0]
	for _, p := range params {
		if p.In == openapi3.ParameterInHeader {
			switch h := headerKey(p.Name); {
			case ignoredHeader(h):
				continue // OpenAPI 3 §4.8.12.1: ignored
			case forbiddenHeader(p.Name):
				refused = append(refused, p.Name)
				continue
			}
		}
		kept = append(kept, p)
	}
	return kept, refused
}

// ignoredHeader reports whether a header parameter, its name folded by
// headerKey, is one OpenAPI says to ignore (3.0 and 3.1 §4.8.12.1).
func ignoredHeader(key string) bool {
	return key == "accept" || key == "content-type" || key == "authorization"
}

// argumentHeader reports whether a header parameter named name may be a
// tool argument: what mergeParams keeps. A binding restored from a
// snapshot is held to it too (BindingSnapshot.Restore).
func argumentHeader(name string) bool {
	return !ignoredHeader(headerKey(name)) && !forbiddenHeader(name)
}

// forbiddenHeaders are request headers that no tool argument may set, whatever
// the document declares: hop-by-hop headers (RFC 9110 §7.6.1) and framing,
// which would let a model smuggle or split requests; credentials and cookies,
// which belong to the gateway's credential mode; the headers proxies and CDNs
// use to tell an upstream who the client is, where it came from and who was
// authenticated (nginx, Cloudflare, Fastly, Akamai, oauth2-proxy, Authelia);
// and method overrides, which would turn a read-only tool into a write behind
// its annotations' back. Keys are in the folded form of [headerKey].
var forbiddenHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true, "trailer": true,
	"transfer-encoding": true, "upgrade": true, "content-length": true, "expect": true, "host": true,
	"content-encoding": true, "accept-encoding": true,
	"cookie": true, "set-cookie": true, "proxy-authorization": true, "proxy-authenticate": true,
	"forwarded": true, "via": true, "x-real-ip": true, "true-client-ip": true, "x-client-ip": true,
	"x-cluster-client-ip": true, "cf-connecting-ip": true, "cf-connecting-ipv6": true,
	"fastly-client-ip": true, "akamai-client-ip": true, "x-envoy-external-address": true,
	"remote-user": true, "remote-email": true, "remote-groups": true, "remote-name": true,
	"x-remote-user": true, "x-user": true, "x-authenticated-user": true,
	"x-original-url": true, "x-rewrite-url": true, "x-original-uri": true, "origin": true,
	"x-http-method-override": true, "x-http-method": true, "x-method-override": true,
}

// forbiddenPrefixes are header families forbidden whole: every X-Forwarded
// header (X-Forwarded-For, -Host, -Proto, and the bare X-Forwarded), the
// copies proxies keep of them (X-Original-Forwarded-For), the identity
// headers of auth proxies (X-Auth-Request-User, -Email, -Access-Token) and
// MCP's own.
var forbiddenPrefixes = []string{"x-forwarded", "x-original-forwarded", "x-auth-request-", "mcp-"}

// headerKey folds a header name the way the servers behind a gateway may:
// case-insensitively, and with '_' and '-' as one (CGI, WSGI, Rack and PHP
// map both X_Forwarded_For and X-Forwarded-For to HTTP_X_FORWARDED_FOR).
func headerKey(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// forbiddenHeader reports whether a header parameter named name must not become
// a tool argument: a name in forbiddenHeaders or forbiddenPrefixes under
// [headerKey] folding, or a name that is not a valid header field name at all.
func forbiddenHeader(name string) bool {
	if !httpguts.ValidHeaderFieldName(name) {
		return true
	}
	k := headerKey(name)
	if forbiddenHeaders[k] {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func paramSchema(conv *schemaConverter, p *openapi3.Parameter) jsonSchema {
	var s jsonSchema
	switch {
	case p.Schema != nil:
		conv.dropRootDesc = p.Description != "" // replaced below
		s = conv.convert(p.Schema)
	case len(p.Content) > 0:
		for _, name := range sortedKeys(p.Content) { // one entry, by the spec; sorted all the same
			if mt := p.Content[name]; mt != nil && mt.Schema != nil {
				conv.dropRootDesc = p.Description != ""
				s = conv.convert(mt.Schema)
				break
			}
		}
	}
	conv.dropRootDesc = false
	if s == nil {
		s = jsonSchema{"type": "string"}
	}
	if p.Description != "" {
		conv.setDescription(s, DescriptionMarkdown(p.Description))
	}
	if p.Deprecated {
		s["deprecated"] = true
	}
	return s
}

// queryPairs serializes one query parameter by its style and explode
// (OpenAPI 3 §4.8.12.4): form (default), spaceDelimited, pipeDelimited,
// deepObject. Returns already-escaped "k=v" pairs.
func queryPairs(p paramBinding, v any) []string {
	esc := url.QueryEscape
	name := esc(p.name)
	switch val := v.(type) {
	case []any:
		if len(val) == 0 {
			return nil
		}
		if p.explode {
			// Every style repeats the name when exploded (swagger.io's
			// serialization table; kin-openapi's decoder agrees): the
			// delimiters apply to explode=false only.
			out := make([]string, 0, len(val))
			for _, e := range val {
				out = append(out, name+"="+esc(scalar(e)))
			}
			return out
		}
		sep := ","
		switch p.style {
		case "spaceDelimited":
			sep = " "
		case "pipeDelimited":
			sep = "|"
		}
		parts := make([]string, len(val))
		for i, e := range val {
			parts[i] = scalar(e)
		}
		return []string{name + "=" + esc(strings.Join(parts, sep))}
	case map[string]any:
		keys := sortedKeys(val)
		var out []string
		switch {
		case p.style == "deepObject":
			var walk func(prefix string, m map[string]any)
			walk = func(prefix string, m map[string]any) {
				for _, k := range sortedKeys(m) {
					key := prefix + "[" + k + "]"
					switch e := m[k].(type) {
					case map[string]any:
						walk(key, e)
					case []any:
						for _, x := range e {
							out = append(out, esc(key+"[]")+"="+esc(scalar(x)))
						}
					default:
						out = append(out, esc(key)+"="+esc(scalar(e)))
					}
				}
			}
			walk(p.name, val)
		case p.explode:
			for _, k := range keys {
				out = append(out, esc(k)+"="+esc(scalar(val[k])))
			}
		default:
			parts := make([]string, 0, 2*len(keys))
			for _, k := range keys {
				parts = append(parts, k, scalar(val[k]))
			}
			out = append(out, name+"="+esc(strings.Join(parts, ",")))
		}
		return out
	default:
		return []string{name + "=" + esc(scalar(v))}
	}
}

// joinValue serializes a value in the simple style (path and header
// parameters).
func joinValue(v any, sep string, explode bool) string {
	return joinEscaped(v, sep, explode, func(s string) string { return s })
}

// joinEscaped is joinValue with each name and value escaped by esc and the
// separators left as they are, so that a separator inside a value cannot be
// read as one.
func joinEscaped(v any, sep string, explode bool, esc func(string) string) string {
	switch val := v.(type) {
	case []any:
		parts := make([]string, len(val))
		for i, e := range val {
			parts[i] = esc(scalar(e))
		}
		return strings.Join(parts, sep)
	case map[string]any:
		var parts []string
		for _, k := range sortedKeys(val) {
			if explode {
				parts = append(parts, esc(k)+"="+esc(scalar(val[k])))
			} else {
				parts = append(parts, esc(k), esc(scalar(val[k])))
			}
		}
		return strings.Join(parts, sep)
	}
	return esc(scalar(v))
}

// scalar renders a primitive argument as text. Numbers keep their exact
// decimal form; nested structures are rendered as JSON.
func scalar(v any) string {
	switch val := v.(type) {
	case nil:
		return ""
	case string:
		return val
	case json.Number:
		return val.String()
	case float64:
		return strconv.FormatFloat(val, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(val)
	default:
		raw, _ := json.Marshal(val)
		return string(raw)
	}
}
