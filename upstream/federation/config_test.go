package federation

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"command", Config{Command: []string{"srv", "-x"}}, ""},
		{"url", Config{URL: "https://mcp.example.com/mcp"}, ""},
		{"url sse", Config{URL: "http://localhost:8080/sse", Transport: "sse"}, ""},
		{"server", Config{Server: "fs", Transport: "streamable"}, ""},
		{"none", Config{}, "mcp: set one of command, url or server"},
		{"two", Config{URL: "http://a", Server: "fs"}, "mcp: set only one of command, url or server"},
		{"three", Config{Command: []string{"x"}, URL: "http://a", Server: "fs"}, "mcp: set only one of command, url or server"},
		{"empty program", Config{Command: []string{" "}}, "mcp.command: the program (first element) is empty"},
		{"transport with command", Config{Command: []string{"x"}, Transport: "sse"}, `mcp.transport: "sse" applies to url or server, not command`},
		{"unknown transport", Config{URL: "http://a", Transport: "websocket"}, `mcp.transport: "websocket" is not one of streamable, sse`},
		{"env without command", Config{URL: "http://a", Env: map[string]string{"A": "1"}}, "mcp.env: applies to command only"},
		{"bad env name", Config{Command: []string{"x"}, Env: map[string]string{"A=B": "1"}}, `mcp.env: "A=B" is not a variable name`},
		{"scheme", Config{URL: "ftp://a/mcp"}, `mcp.url: "ftp://a/mcp": the scheme must be http or https`},
		{"relative", Config{URL: "/mcp"}, `mcp.url: "/mcp": the scheme must be http or https`},
		{"no host", Config{URL: "http:///mcp"}, `mcp.url: "http:///mcp" has no host`},
		{"unparsable", Config{URL: "http://a b/"}, `mcp.url: "http://a b/" does not parse`},
		{"user info", Config{URL: "https://u:secret@a/mcp?k=v"}, `mcp.url: "https://a/mcp" carries user info`},
		{"blank server", Config{Server: "  "}, "mcp.server: the slug is blank"},
		{"negative timeout", Config{URL: "http://a", Timeout: -time.Second}, "mcp.timeout: -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cfg
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("error: %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
			if tc.cfg.Transport != before.Transport || tc.cfg.Timeout != before.Timeout {
				t.Error("Validate changed the config")
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	c := Config{URL: "http://a"}.WithDefaults()
	if c.Timeout != 30*time.Second || c.Refresh != 5*time.Minute || c.Transport != "streamable" {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{Command: []string{"x"}, Timeout: time.Second, Refresh: -1}.WithDefaults()
	if c.Timeout != time.Second || c.Refresh != -1 || c.Transport != "" {
		t.Errorf("kept: %+v", c)
	}
}

func TestNewServerSlug(t *testing.T) {
	env := map[string]string{"NOETL_MCP_MY_FS_ENDPOINT": "http://fs:8080/mcp/ "}
	u, err := New(Config{Server: "my-fs"}, &Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if u.endpoint != "http://fs:8080/mcp" {
		t.Errorf("endpoint %q", u.endpoint)
	}
	_, err = New(Config{Server: "other"}, &Options{Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.Contains(err.Error(), "MCPGATE_MCP_OTHER_ENDPOINT") {
		t.Errorf("error: %v", err)
	}
	env["MCPGATE_MCP_BAD_ENDPOINT"] = "fs:8080"
	_, err = New(Config{Server: "bad"}, &Options{Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.Contains(err.Error(), `mcp.server "bad"`) {
		t.Errorf("error: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	u := &Upstream{backoffMin: time.Second, backoffMax: 30 * time.Second, healthyReset: time.Minute}
	s := newSlot(u, "")
	var got []time.Duration
	for _, ran := range []time.Duration{0, time.Second, time.Second, time.Second, time.Second, time.Second, time.Second, 2 * time.Minute, 0} {
		got = append(got, s.nextBackoff(ran))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 1, 2}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("backoffs %v, want %v seconds", got, want)
		}
	}
}

func TestBoundedLines(t *testing.T) {
	var got []string
	boundedLines(strings.NewReader("ab\n"+strings.Repeat("x", 10)+"\ntail"), 4, func(line string, cut bool) {
		if cut {
			line += "…"
		}
		got = append(got, line)
	})
	if strings.Join(got, "|") != "ab|xxxx…|tail" {
		t.Errorf("lines: %q", got)
	}
}

func TestCredentialKey(t *testing.T) {
	if Credential("").key() != "" || Credential("Bearer a").key() == Credential("Bearer b").key() {
		t.Error("keys")
	}
	c := Credential("Bearer secret")
	if strings.Contains(c.key(), "secret") || strings.Contains(fmt.Sprint(c), "secret") {
		t.Error("the credential shows")
	}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "cred", c)
	if strings.Contains(b.String(), "secret") {
		t.Errorf("logged: %s", b.String())
	}
}
