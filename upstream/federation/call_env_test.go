package federation

import (
	"testing"
	"time"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name, slug string
		env        map[string]string
		want, from string
		wantErr    string
	}{
		{name: "server var", slug: "kubernetes", env: map[string]string{"MCPGATE_MCP_KUBERNETES_ENDPOINT": "http://k/mcp/", "MCPGATE_MCP_URL": "http://any/mcp"},
			want: "http://k/mcp", from: "MCPGATE_MCP_KUBERNETES_ENDPOINT"},
		{name: "noetl server var before the generic ones", slug: "kubernetes", env: map[string]string{"NOETL_MCP_KUBERNETES_ENDPOINT": "http://n/mcp", "MCPGATE_MCP_URL": "http://any/mcp"},
			want: "http://n/mcp", from: "NOETL_MCP_KUBERNETES_ENDPOINT"},
		{name: "server falls back to MCPGATE_MCP_URL", slug: "kubernetes", env: map[string]string{"MCPGATE_MCP_URL": " http://m/mcp ", "NOETL_MCP_URL": "http://n/mcp"},
			want: "http://m/mcp", from: "MCPGATE_MCP_URL"},
		{name: "then NOETL_MCP_URL", slug: "kubernetes", env: map[string]string{"NOETL_MCP_URL": "http://n/mcp/"},
			want: "http://n/mcp", from: "NOETL_MCP_URL"},
		{name: "no slug", env: map[string]string{"MCPGATE_MCP_KUBERNETES_ENDPOINT": "http://k/mcp", "NOETL_MCP_URL": "http://n/mcp"},
			want: "http://n/mcp", from: "NOETL_MCP_URL"},
		{name: "blank is unset", env: map[string]string{"MCPGATE_MCP_URL": "  ", "NOETL_MCP_URL": "http://n/mcp"},
			want: "http://n/mcp", from: "NOETL_MCP_URL"},
		{name: "none, with slug", slug: "fs",
			wantErr: `server "fs": no endpoint: set MCPGATE_MCP_FS_ENDPOINT, NOETL_MCP_FS_ENDPOINT, MCPGATE_MCP_URL or NOETL_MCP_URL`},
		{name: "none", wantErr: "no endpoint: set MCPGATE_MCP_URL or NOETL_MCP_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from, err := Endpoint(tc.slug, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Endpoint(%q) error = %v, want %q", tc.slug, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || from != tc.from {
				t.Fatalf("Endpoint(%q) = %q, %q, %v; want %q, %q", tc.slug, got, from, err, tc.want, tc.from)
			}
		})
	}
}

func TestRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    time.Duration
		ok      bool
		wantErr string
	}{
		{name: "unset"},
		{name: "mcpgate first", env: map[string]string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS": "5", "NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "9"}, want: 5 * time.Second, ok: true},
		{name: "noetl", env: map[string]string{"NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "2.5"}, want: 2500 * time.Millisecond, ok: true},
		{name: "blank is unset", env: map[string]string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS": " ", "NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "9"}, want: 9 * time.Second, ok: true},
		{name: "not a number", env: map[string]string{"MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS": "30s"},
			wantErr: `MCPGATE_MCP_REQUEST_TIMEOUT_SECONDS: "30s" is not a positive number of seconds`},
		{name: "zero", env: map[string]string{"NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "0"},
			wantErr: `NOETL_MCP_REQUEST_TIMEOUT_SECONDS: "0" is not a positive number of seconds`},
		{name: "infinite", env: map[string]string{"NOETL_MCP_REQUEST_TIMEOUT_SECONDS": "Inf"},
			wantErr: `NOETL_MCP_REQUEST_TIMEOUT_SECONDS: "Inf" is not a positive number of seconds`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := RequestTimeout(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || ok != tc.ok {
				t.Fatalf("RequestTimeout = %v, %v, %v; want %v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
