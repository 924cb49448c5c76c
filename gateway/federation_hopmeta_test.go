package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestFederationHopMetaNotSentOn: a 2026-07-28 caller's requests for a
// federated prompt, resource or completion reach an upstream that
// negotiated an older version (a stateful go-sdk server speaks up to
// 2025-11-25) without the caller's reserved _meta, as tools/call always
// did. They were sent on with it, and the upstream refused each with
// -32022 "protocol version "2026-07-28" is not supported" (the alpha
// conformance suite's prompts-get-*, resources-read-*, completion-complete
// and caching scenarios at 2026-07-28, docs/conformance.md).
func TestFederationHopMetaNotSentOn(t *testing.T) {
	up := newFedUpstream(t)
	up.swap(true) // stateful: it negotiates 2025-11-25 and refuses 2026-07-28
	_, url := fedGateway(t, up, false, nil)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct {
		method, name, params, want string
	}{
		{"prompts/get", "fs_greet", `{"name":"fs_greet","arguments":{"who":"ann"},` + meta + `}`, "Hello, ann"},
		{"resources/read", "fs+file:///motd", `{"uri":"fs+file:///motd",` + meta + `}`, "be kind"},
		{"completion/complete", "", `{"ref":{"type":"ref/prompt","name":"fs_greet"},"argument":{"name":"who","value":"a"},` + meta + `}`, "ref/prompt greet who=a"},
		{"tools/call", "fs_echo", `{"name":"fs_echo","arguments":{"text":"hi"},` + meta + `}`, `hi`},
	} {
		t.Run(tc.method, func(t *testing.T) {
			h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {tc.method}}
			if tc.name != "" {
				h["Mcp-Name"] = []string{tc.name}
			}
			a := sendRaw(t, url, rpc("1", tc.method, tc.params), h)
			if len(a.Messages) != 1 {
				t.Fatalf("%d %s: %+v", a.Status, a.Type, a)
			}
			msg, _ := json.Marshal(a.Messages[0])
			if strings.Contains(string(msg), `"error"`) || !strings.Contains(string(msg), tc.want) {
				t.Errorf("got %s, want a result holding %q", msg, tc.want)
			}
		})
	}
}
