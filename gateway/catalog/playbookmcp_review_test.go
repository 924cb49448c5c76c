package catalog

import (
	"strings"
	"testing"
)

// TestReviewPlaybookHTTPResourceUserinfo: httpResource accepts a URL with
// userinfo ("https://user:secret@kb.example.com/..."). The gateway then
// (a) publishes the URL, password included, as the resource template's URI
// to every client in resources/templates/list, in explain's PlaybookParts
// and in logs; and (b) silently drops the userinfo when it builds the origin
// (url.URL{Scheme, Host}), so the read goes out without it anyway — the
// resource cannot work as written, while its secret leaks. Attack: an engine
// catalog (semi-trusted) or a careless playbook author embeds basic-auth
// credentials in an mcp.resources url. Fix: in httpResource, url.Parse the
// literal head and refuse a URL whose User is set ("its url carries
// credentials: the gateway reads a playbook resource with none"), as it
// refuses a placeholder in the host.
func TestReviewPlaybookHTTPResourceUserinfo(t *testing.T) {
	for _, raw := range []string{
		"https://user:secret@kb.example.com/pages/{{ input.id }}",
		"https://token@kb.example.com/pages/{{ input.id }}",
		"https://user:secret@kb.example.com/static",
	} {
		r, reason := httpResource(mcpEntry{Type: "http", Spec: map[string]any{"method": "GET", "url": raw}})
		if r != nil {
			t.Errorf("%s: served as a resource (URI template %q): its credentials are listed to every client", raw, r.URL)
		} else if !strings.Contains(reason, "credential") && !strings.Contains(reason, "userinfo") {
			t.Logf("%s: refused: %s", raw, reason)
		}
	}
}
