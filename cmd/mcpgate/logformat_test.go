package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogFormat: serve logs JSON lines with --log-format json or the
// config's log_format: json, the flag winning over the file; text (key=value)
// otherwise; a format that is neither is a usage error naming the choices.
func TestLogFormat(t *testing.T) {
	dir := t.TempDir()
	jsonCfg := filepath.Join(dir, "json.yaml")
	textCfg := filepath.Join(dir, "text.yaml")
	doc, err := filepath.Abs(petstore)
	if err != nil {
		t.Fatal(err)
	}
	up := "upstreams: [{openapi: " + doc + ", base_url: http://127.0.0.1:9}]\n"
	os.WriteFile(jsonCfg, []byte("log_format: json\n"+up), 0o600)
	os.WriteFile(textCfg, []byte("log_format: text\n"+up), 0o600)
	for _, c := range []struct {
		name string
		args []string
		json bool
	}{
		{"flag json", []string{"--openapi", petstore, "--upstream", "http://127.0.0.1:9", "--log-format", "json"}, true},
		{"config json", []string{"--config", jsonCfg}, true},
		{"flag over config", []string{"--config", jsonCfg, "--log-format", "text"}, false},
		{"config text", []string{"--config", textCfg}, false},
		{"default", []string{"--openapi", petstore, "--upstream", "http://127.0.0.1:9"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // serve starts, logs, and shuts down at once
			code, _, stderr := runCLI(t, ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			logged := 0
			for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
				isText, isJSON := strings.HasPrefix(l, "time="), strings.HasPrefix(l, `{"time":`)
				if !isText && !isJSON {
					continue // the command's own lines (listening, the client snippets)
				}
				if isJSON != c.json {
					t.Errorf("line %q: JSON %v, want %v", l, isJSON, c.json)
				}
				var rec map[string]any
				if isJSON && (json.Unmarshal([]byte(l), &rec) != nil || rec["level"] == nil || rec["msg"] == nil) {
					t.Errorf("not a JSON log record: %q", l)
				}
				logged++
			}
			if logged == 0 {
				t.Fatalf("no log line on stderr: %q", stderr)
			}
		})
	}
	code, _, stderr := runCLI(t, context.Background(), "serve", "--log-format", "yaml")
	if want := `mcpgate serve: --log-format: "yaml" is not text or json; see mcpgate serve --help` + "\n"; code != 2 || stderr != want {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
	}
}
