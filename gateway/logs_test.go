package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/internal/testaddr"
)

// hasAnySession reports whether go-sdk holds any session.
func hasAnySession(g *Gateway) bool {
	for range g.server.Sessions() {
		return true
	}
	return false
}

// records returns every JSON log record written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, rec)
	}
	return out
}

// TestCallLogs: every tool call leaves exactly one log line — info when it
// went through, warn with the cause when the upstream failed — with the
// tool, upstream, status, duration, outcome and request id; the model is
// not shown the cause's internal address; a stateless request leaves no
// session lines; and no token, cookie or argument value is logged, even at
// debug level.
func TestCallLogs(t *testing.T) {
	const token, cookie, secretArg = "tok-must-not-log", "cookie-must-not-log", "arg-must-not-log"
	deadURL := testaddr.RefusedURL(t)
	_, base := newRecorder(t)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := &Config{Upstreams: []Upstream{
		{Name: "live", OpenAPI: "front.json", Document: []byte(frontDoc), BaseURL: base, ToolPrefix: "live_", Auth: auth.Upstream{Mode: auth.ModeForward}},
		{Name: "down", OpenAPI: "front.json", Document: []byte(frontDoc), BaseURL: deadURL, ToolPrefix: "down_", Auth: auth.Upstream{Mode: auth.ModeForward}},
	}}
	g, err := New(context.Background(), cfg, &Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	defer gw.Close()
	h := http.Header{"Authorization": {"Bearer " + token}, "Cookie": {"c=" + cookie}}

	for _, tt := range []struct {
		tool, level, outcome string
		status               float64
		wantText             string
	}{
		{"live_get_thing", "DEBUG", "ok", 200, ""}, // a call that went well is a debug line
		{"down_get_thing", "WARN", "unreachable", 0, "the upstream could not be reached (502 Bad Gateway)"},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			before := len(logs.records(t))
			_, body := post(t, gw.URL+"/mcp", call(1, tt.tool, `{"id":"`+secretArg+`"}`), h)
			if tt.wantText != "" && (!strings.Contains(body, tt.wantText) || strings.Contains(body, "127.0.0.1")) {
				t.Errorf("the model sees %s, want %q and no address", body, tt.wantText)
			}
			var calls []map[string]any
			for _, r := range logs.records(t)[before:] {
				if r["msg"] == "tool call" {
					calls = append(calls, r)
				}
			}
			if len(calls) != 1 {
				t.Fatalf("%d tool call lines, want 1: %v", len(calls), calls)
			}
			c := calls[0]
			if c["level"] != tt.level || c["tool"] != tt.tool || c["outcome"] != tt.outcome || c["status"] != tt.status ||
				c["request_id"] == nil || c["elapsed"] == nil {
				t.Errorf("log line %v", c)
			}
			if tt.level == "WARN" && !strings.Contains(c["cause"].(string), "connection refused") {
				t.Errorf("cause %v, want the dial error", c["cause"])
			}
		})
	}
	// go-sdk's per-request sessions log their end as they are let go: wait
	// for that, and for both calls' access lines (written after the
	// answer), so that every line is checked.
	waitFor(t, "the requests' last log lines", func() bool {
		n := 0
		for _, r := range logs.records(t) {
			if r["msg"] == "http request" {
				n++
			}
		}
		return n >= 2 && !hasAnySession(g)
	})
	for _, r := range logs.records(t) {
		line, _ := json.Marshal(r)
		for _, secret := range []string{token, cookie, secretArg, "session"} {
			if strings.Contains(strings.ToLower(string(line)), strings.ToLower(secret)) {
				t.Errorf("log line holds %q: %s", secret, line)
			}
		}
	}
}

// TestUnverifiedWarning: a gateway without an auth section warns that it
// forwards callers' tokens unverified when it serves HTTP (Handler) and has a
// forward-mode upstream, once; not over stdio, where there is no inbound
// token, nor when no upstream forwards one.
func TestUnverifiedWarning(t *testing.T) {
	_, base := newRecorder(t)
	for _, tt := range []struct {
		name    string
		mode    string
		handler bool
		want    int
	}{
		{"HTTP, forward", auth.ModeForward, true, 1},
		{"HTTP, the default mode is forward", "", true, 1},
		{"stdio (no Handler)", auth.ModeForward, false, 0},
		{"HTTP, no upstream forwards", auth.ModeNone, true, 0},
		{"HTTP, the gateway's own credential", auth.ModeStatic, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			up := auth.Upstream{Mode: tt.mode}
			if tt.mode == auth.ModeStatic {
				up.ValueEnv = "MCPGATE_TEST_STATIC_VALUE"
				t.Setenv(up.ValueEnv, "s3cret")
			}
			cfg := &Config{Upstreams: []Upstream{{Name: "api", OpenAPI: "front.json", Document: []byte(frontDoc), BaseURL: base, Auth: up}}}
			g, err := New(t.Context(), cfg, &Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if tt.handler {
				g.Handler()
				g.Handler()
			}
			n := 0
			for _, r := range logs.records(t) {
				if msg := r["msg"].(string); strings.Contains(msg, "bearer tokens are NOT verified") && tt.mode != auth.ModeStatic ||
					strings.Contains(msg, "calls these upstreams with the gateway's own credential") && tt.mode == auth.ModeStatic {
					n++
					if r["upstreams"] != "api" {
						t.Errorf("the warning names %v, want api", r["upstreams"])
					}
				}
			}
			if n != tt.want {
				t.Errorf("%d warnings, want %d", n, tt.want)
			}
		})
	}
}
