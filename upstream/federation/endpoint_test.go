package federation

import "testing"

func TestServerEndpoint(t *testing.T) {
	for _, tc := range []struct {
		slug    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{slug: "kubernetes", env: map[string]string{"MCPGATE_MCP_KUBERNETES_ENDPOINT": "http://k/mcp/"}, want: "http://k/mcp"},
		{slug: "kubernetes", env: map[string]string{"NOETL_MCP_KUBERNETES_ENDPOINT": "http://n/mcp"}, want: "http://n/mcp"},
		{slug: "kubernetes", env: map[string]string{"MCPGATE_MCP_KUBERNETES_ENDPOINT": "http://m/mcp", "NOETL_MCP_KUBERNETES_ENDPOINT": "http://n/mcp"}, want: "http://m/mcp"},
		{slug: "my-fs.v2", env: map[string]string{"NOETL_MCP_MY_FS_V2_ENDPOINT": " http://f/mcp// "}, want: "http://f/mcp"},
		{slug: "kubernetes", env: map[string]string{"MCPGATE_MCP_KUBERNETES_ENDPOINT": "  "}, wantErr: `server "kubernetes": no endpoint: set MCPGATE_MCP_KUBERNETES_ENDPOINT (or NOETL_MCP_KUBERNETES_ENDPOINT)`},
		{slug: "", wantErr: "server: the slug is empty"},
		{slug: "ünï", env: map[string]string{"MCPGATE_MCP__N__ENDPOINT": "http://u"}, want: "http://u"},
	} {
		got, err := ServerEndpoint(tc.slug, func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ServerEndpoint(%q) error = %v, want %q", tc.slug, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ServerEndpoint(%q) = %q, %v; want %q", tc.slug, got, err, tc.want)
		}
	}
}
