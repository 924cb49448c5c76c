package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestProtocolErrorsAreJSONRPC: what go-sdk refuses in plain text reaches the
// client as a JSON-RPC error body, with go-sdk's HTTP status and words, in
// both modes; answers that are not errors are untouched.
func TestProtocolErrorsAreJSONRPC(t *testing.T) {
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	tests := []struct {
		name   string
		body   string
		header http.Header
		status int
		code   int64
		id     string
		words  string
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"no/such"}`, nil, 400, -32601, "3", "no/such"},
		{"Accept without event-stream", list, http.Header{"Accept": {"application/json"}}, 400, -32600, "7", "Accept"},
		{"Content-Type not JSON", list, http.Header{"Content-Type": {"text/plain"}}, 415, -32600, "7", "Content-Type"},
		{"unsupported protocol version", list, http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}, 400, -32600, "7", "protocol version"},
		{"string id kept", `{"jsonrpc":"2.0","id":"abc","method":"no/such"}`, nil, 400, -32601, `"abc"`, "no/such"},
	}
	for _, stateful := range []bool{false, true} {
		_, url := startGateway(t, Config{Stateful: stateful})
		h := http.Header{}
		if stateful {
			h = sessionHeader(openSession(t, url, ""), "")
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				hh := h.Clone()
				for k, v := range tt.header {
					hh[k] = v
				}
				resp, body := post(t, url, tt.body, hh)
				if resp.StatusCode != tt.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
					t.Fatalf("stateful=%v: %d %s %q, want %d and a JSON body", stateful, resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.status)
				}
				var e struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct {
						Code    int64  `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code != tt.code ||
					string(e.ID) != tt.id || !strings.Contains(e.Error.Message, tt.words) {
					t.Errorf("stateful=%v: %s, want code %d, id %s, a message naming %q", stateful, body, tt.code, tt.id, tt.words)
				}
			})
		}
	}
}
