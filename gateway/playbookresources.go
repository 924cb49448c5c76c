package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/upstream"
)

// A playbook's http GET resources (its mcp: section's, see the catalog's
// playbookmcp.go) are served as resources whose URI is the URL itself,
// each {{ input.x }} placeholder a template variable {x}. A read sends the
// GET to that URL:
//
//   - with no credential at all: the URL's origin is the playbook's, not
//     the configured upstream's, and a caller's token goes nowhere else;
//   - under the engine upstream's bounds (timeout, concurrency, response
//     cap, the response budget), never following a redirect;
//   - each value put in as RFC 6570 simple expansion does (everything but
//     unreserved characters percent-encoded: no '/', '?', '&' or '#' of a
//     caller's reaches the URL as such), a value that decodes to "." or
//     ".." refused;
//   - answered as an OpenAPI resource's read is (resourceContents): 404 is
//     -32002 with the URI, another status an error naming it.
type playbookResource struct {
	r      *catalog.PlaybookHTTPResource
	client *upstream.Client // for the URL's origin
	origin *url.URL
}

// addPlaybookResources serves the catalog's playbook resources, but those
// Options.Lock withholds. One whose URI another resource holds is left out
// with a warning (the catalog has made it a finding when it saw both):
// an engine's catalog must not decide whether the gateway starts.
func (g *Gateway) addPlaybookResources(held map[string]string) error {
	clients := map[string]*upstream.Client{}
	for _, r := range g.catalog.PlaybookResources {
		origin, err := url.Parse(r.Parts[0].Text)
		if err != nil || origin.Host == "" {
			g.logger.Warn("playbook resource: its URL does not parse; not served", "playbook", r.Playbook, "resource", r.Name)
			continue
		}
		origin = &url.URL{Scheme: origin.Scheme, Host: origin.Host}
		client := clients[origin.String()]
		if client == nil {
			u := g.cfg.UpstreamNamed(r.Upstream)
			client, err = upstream.NewRemote(origin.String(), &upstream.ClientOptions{
				Timeout: u.Timeout, Name: u.Name, MaxConcurrent: u.MaxConcurrent, QueueTimeout: u.QueueTimeout,
				ResponseBudget: g.budget, Transport: g.remoteTransport("playbook resource", origin.String(), origin.String(), true),
			})
			if err != nil {
				return fmt.Errorf("playbook %s: resource %s: %v", r.Playbook, r.Name, err)
			}
			clients[origin.String()] = client
		}
		pr := &playbookResource{r: r, client: client, origin: origin}
		uri, vars := pr.uriTemplate()
		kind := "resource"
		if vars {
			kind = "resource template"
		}
		if by, ok := held[kind+" "+uri]; ok {
			// What an engine's catalog says must not decide whether the
			// gateway starts: the playbook's resource is the one left out.
			g.logger.Warn("playbook resource: its URI is served already; not served", "playbook", r.Playbook, "resource", r.Name, "served_by", by)
			continue
		}
		held[kind+" "+uri] = "playbook " + r.Playbook
		if g.heldResources[uri] {
			g.logger.Warn("lock: not serving a resource that is not in the lock unchanged", "resource", uri)
			continue
		}
		if vars {
			g.addSDKTemplate(&mcp.ResourceTemplate{URITemplate: uri, Name: r.Name, Description: r.Description, MIMEType: r.MimeType}, g.readPlaybookResource(pr))
		} else {
			g.addSDKResource(&mcp.Resource{URI: uri, Name: r.Name, Description: r.Description, MIMEType: r.MimeType}, g.readPlaybookResource(pr))
		}
	}
	return nil
}

// uriTemplate is the resource's URI (template); vars says it has
// variables.
func (p *playbookResource) uriTemplate() (string, bool) { return p.r.URI() }

// target is the URL a read of uri sends the GET to: uri matched against
// the template part by part, each value decoded and escaped again as
// simple expansion does. An error names what does not match.
func (p *playbookResource) target(uri string) (string, error) {
	rest := uri
	var b strings.Builder
	parts := p.r.Parts
	for i, part := range parts {
		if part.Arg == "" {
			if !strings.HasPrefix(rest, part.Text) {
				return "", fmt.Errorf("the URI does not match %s", p.template())
			}
			rest = rest[len(part.Text):]
			b.WriteString(part.Text)
			continue
		}
		// A value runs to the next literal part (or the end).
		end := len(rest)
		if i+1 < len(parts) {
			end = strings.Index(rest, parts[i+1].Text)
			if end < 0 {
				return "", fmt.Errorf("the URI does not match %s", p.template())
			}
		}
		raw := rest[:end]
		rest = rest[end:]
		v, err := url.PathUnescape(raw)
		if err != nil || strings.ContainsAny(raw, "/?#&=") {
			return "", fmt.Errorf("%s: %q is not one percent-encoded value", part.Arg, raw)
		}
		switch v {
		case "":
			return "", fmt.Errorf("%s: a value is required", part.Arg)
		case ".", "..":
			return "", fmt.Errorf("%s: %q is not a value the gateway sends", part.Arg, v)
		}
		b.WriteString(escapeUnreserved(v))
	}
	if rest != "" {
		return "", fmt.Errorf("the URI does not match %s", p.template())
	}
	return b.String(), nil
}

func (p *playbookResource) template() string {
	t, _ := p.uriTemplate()
	return t
}

// escapeUnreserved percent-encodes all but RFC 3986's unreserved
// characters: RFC 6570's simple string expansion.
func escapeUnreserved(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// readPlaybookResource answers a resources/read of p.
func (g *Gateway) readPlaybookResource(p *playbookResource) mcp.ResourceHandler {
	return g.resourceReader(func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, int, error) {
		return g.fetchPlaybookResource(ctx, p, req.Params.URI)
	}, "resource", p.template(), "playbook", p.r.Playbook)
}

func (g *Gateway) fetchPlaybookResource(ctx context.Context, p *playbookResource, uri string) (*mcp.ReadResourceResult, int, error) {
	target, err := p.target(uri)
	if err != nil {
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/read %s: %v", uri, err)}
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != p.origin.Scheme || u.Host != p.origin.Host {
		// Not reached: the origin is the template's first literal part.
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/read %s: not a URL of %s", uri, p.origin)}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	a, err := p.client.SendQuery(ctx, "GET", path, u.RawQuery, nil, upstream.Credentials{})
	if err != nil {
		var se *upstream.SendError
		msg := "the resource's server could not be reached"
		if errors.As(err, &se) {
			msg = se.Msg
		}
		return nil, 0, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("resources/read %s: %s", uri, msg)}
	}
	if e := answerError(uri, "its server", a); e != nil {
		return nil, a.Status, e
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{resourceContents(uri, p.r.MimeType, a)}}, a.Status, nil
}
