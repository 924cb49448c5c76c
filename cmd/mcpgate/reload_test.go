package main

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
)

// TestRestartOnly: a reload names each listener setting the file changed,
// and keepRestartOnly gives the new gateway the running values, so that
// "the running values are kept" is what happens.
func TestRestartOnly(t *testing.T) {
	running := &gateway.Config{Listen: "127.0.0.1:8080", BodyTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, LogFormat: "text"}
	for _, tc := range []struct {
		name   string
		change func(*gateway.Config)
		want   []string
	}{
		{"nothing", func(*gateway.Config) {}, nil},
		{"listen", func(c *gateway.Config) { c.Listen = "0.0.0.0:9" }, []string{"listen"}},
		{"metrics.listen", func(c *gateway.Config) { c.Metrics.Listen = "127.0.0.1:9" }, []string{"metrics.listen"}},
		{"stateful", func(c *gateway.Config) { c.Stateful = true }, []string{"stateful"}},
		{"timeouts and format", func(c *gateway.Config) {
			c.BodyTimeout, c.WriteTimeout, c.LogFormat = time.Second, time.Second, "json"
		}, []string{"body_timeout", "write_timeout", "log_format"}},
		{"a reloadable setting", func(c *gateway.Config) { c.MaxSessions = 7 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *running
			tc.change(&cfg)
			if got := restartOnly(running, &cfg); !slices.Equal(got, tc.want) {
				t.Errorf("restartOnly = %v, want %v", got, tc.want)
			}
			keepRestartOnly(&cfg, running)
			if got := restartOnly(running, &cfg); got != nil {
				t.Errorf("after keepRestartOnly: %v still differ", got)
			}
		})
	}
}
