package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuild: `mcpgate build` writes a snapshot that `stdio --snapshot`
// serves from, and says what is wrong, on one line, when it cannot.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "catalog.snapshot")
	code, stdout, stderr := runCLI(t, context.Background(), "build", "--openapi", petstore, "--all", "-o", out)
	if code != 0 || stdout != "" || stderr != "mcpgate: wrote "+out+" (19 tools, 0 resources)\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(data), `{"format":"mcpgate-snapshot/2"`) {
		t.Fatalf("%v: %.80s", err, data)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".catalog.snapshot.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	// stdio serves from it: the tools are listed, and the log says where
	// they came from.
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	var so, se syncBuffer
	// The collector is off while a start from a snapshot builds the
	// gateway (newGateway), and back as it was once it is built.
	defer debug.SetGCPercent(debug.SetGCPercent(137))
	code = run(context.Background(), []string{"stdio", "--openapi", petstore, "--all", "--snapshot", out}, strings.NewReader(in), &so, &se)
	if code != 0 || !strings.Contains(se.String(), `msg="catalog from snapshot"`) || !strings.Contains(so.String(), `"name":"findPetsByStatus"`) {
		t.Fatalf("stdio --snapshot: exit %d, stdout %.300q, stderr %q", code, so.String(), se.String())
	}
	if gc := debug.SetGCPercent(137); gc != 137 && os.Getenv("GOGC") == "" {
		t.Errorf("GC percent %d after a start from a snapshot, want it back at 137", gc)
	}
	// And after one whose snapshot is not used (another document).
	var so2, se2 syncBuffer
	code = run(context.Background(), []string{"stdio", "--openapi", petstore, "--snapshot", out}, strings.NewReader(in), &so2, &se2)
	if code != 0 || !strings.Contains(se2.String(), "snapshot not used") {
		t.Fatalf("stdio with a snapshot of other tools: exit %d, stderr %q", code, se2.String())
	}
	if gc := debug.SetGCPercent(137); gc != 137 && os.Getenv("GOGC") == "" {
		t.Errorf("GC percent %d after a snapshot not used, want it back at 137", gc)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--openapi", petstore, "--all"}, "mcpgate build: name the snapshot file: -o FILE; see mcpgate build --help\n"},
		{[]string{"--all", "-o", out}, "mcpgate: name an API: --openapi SRC or --config FILE\n"},
		{[]string{"--openapi", filepath.Join(dir, "absent.json"), "-o", out}, "mcpgate: --openapi: open " + filepath.Join(dir, "absent.json") + ": no such file or directory\n"},
		{[]string{"--openapi", petstore, "--all", "-o", filepath.Join(dir, "no", "such", "dir")}, "mcpgate: -o: open " + filepath.Join(dir, "no", "such") + "/.dir."},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), append([]string{"build"}, tc.args...)...)
			if code != 2 || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}
