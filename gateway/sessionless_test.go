package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newProtocolMeta is the per-request _meta of protocol 2026-07-28: the
// version and the client's capabilities travel with each request.
const newProtocolMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`

// TestStatefulSessionlessVersions: a --stateful gateway answers a request
// of protocol 2026-07-28 as the stateless one does — no session opened, the
// version server/discover offers honoured — whether the request says its
// version in the header, in _meta only, or is server/discover; the versions
// with sessions keep them.
func TestStatefulSessionlessVersions(t *testing.T) {
	var g *Gateway
	_, url := startGatewayOn(t, Config{Stateful: true}, nil, func(gg *Gateway, _ *http.Server) { g = gg })
	_, statelessURL := startGateway(t, Config{})
	sessions := func() int {
		n := 0
		for range g.server.Sessions() {
			n++
		}
		return n
	}
	newHeader := func(method, name string) http.Header {
		h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}}
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		return h
	}
	for _, c := range []struct {
		name string
		body string
		h    http.Header
		want string // in the answer, which is the stateless gateway's
	}{
		{"discover", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + newProtocolMeta + `}}`, newHeader("server/discover", ""), `"2026-07-28"`},
		{"discover, no header", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + newProtocolMeta + `}}`, nil, `Mcp-Protocol-Version header is required`},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + newProtocolMeta + `}}`, newHeader("tools/list", ""), `"get_thing"`},
		{"tools/list, _meta only", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + newProtocolMeta + `}}`, nil, `Mcp-Protocol-Version header is required`},
		{"tools/call", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_thing","arguments":{"id":"a"},` + newProtocolMeta + `}}`, newHeader("tools/call", "get_thing"), `"resultType":"complete"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, url, c.body, c.h)
			sresp, sbody := post(t, statelessURL, c.body, c.h)
			// The one difference: a stateful gateway's tools may change
			// with a reload while it serves (follow.go), and it says so.
			sbody = strings.Replace(sbody, `"tools":{}`, `"tools":{"listChanged":true}`, 1)
			if resp.StatusCode != sresp.StatusCode || body != sbody {
				t.Errorf("stateful: %d %s\nstateless: %d %s", resp.StatusCode, body, sresp.StatusCode, sbody)
			}
			if !strings.Contains(body, c.want) {
				t.Errorf("%d %s, want %s in it", resp.StatusCode, body, c.want)
			}
			if id := resp.Header.Get(sessionIDHeader); id != "" {
				t.Errorf("a 2026-07-28 request got session %q", id)
			}
			// go-sdk closes a request's ephemeral session once it has
			// answered: what must not stay is a session of its own.
			waitFor(t, "no session open after a 2026-07-28 request", func() bool { return sessions() == 0 })
		})
	}

	// Discovery and the answer agree: every version server/discover offers
	// is one a request can use.
	_, body := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+newProtocolMeta+`}}`, newHeader("server/discover", ""))
	var disc struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(sseData(body)), &disc); err != nil || len(disc.Result.SupportedVersions) == 0 {
		t.Fatalf("server/discover: %v %s", err, body)
	}
	for _, v := range disc.Result.SupportedVersions {
		if v < sessionlessVersion {
			continue
		}
		meta := strings.Replace(newProtocolMeta, "2026-07-28", v, 1)
		h := newHeader("tools/list", "")
		h.Set("Mcp-Protocol-Version", v)
		if resp, body := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta+`}}`, h); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"get_thing"`) {
			t.Errorf("discover offered %s; tools/list at it: %d %s", v, resp.StatusCode, body)
		}
	}

	// The versions with sessions keep them.
	resp, body := post(t, url, initialize, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(sessionIDHeader) == "" {
		t.Fatalf("initialize at 2025-06-18: %d %s, no session", resp.StatusCode, body)
	}

	// go-sdk's client, with its defaults (it picks 2026-07-28), lists and
	// calls without a session on the stateful gateway.
	before := sessions()
	s := connect(t, url, nil)
	if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("go-sdk's client negotiated %s", v)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_thing", Arguments: map[string]any{"id": "a"}})
	if err != nil || res.IsError {
		t.Fatalf("go-sdk client's call: %v %+v", err, res)
	}
	// The call's ephemeral session may still be closing as its answer
	// arrives; a session of its own would stay.
	waitFor(t, "go-sdk's 2026-07-28 client to have opened no session", func() bool { return sessions() == before })
}

// sseData is the data of a one-event SSE body, or the body when it is JSON.
func sseData(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return d
		}
	}
	return body
}
