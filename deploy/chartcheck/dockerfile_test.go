package chartcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// repoRoot is the repository's root, from this module's folder.
var repoRoot = filepath.Join("..", "..")

// instruction is one Dockerfile instruction: its keyword (lower case), its
// flags (--from=build) and its arguments, and whether it was written in the
// JSON (exec) form.
type instruction struct {
	cmd   string
	flags []string
	args  []string
	json  bool
	line  int
}

type stage struct {
	from, name   string
	instructions []instruction
}

// parseDockerfile parses the repository's Dockerfile with BuildKit's own
// parser into its stages.
func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	var stages []stage
	for _, n := range res.AST.Children {
		in := instruction{cmd: strings.ToLower(n.Value), flags: n.Flags, json: n.Attributes["json"], line: n.StartLine}
		for a := n.Next; a != nil; a = a.Next {
			in.args = append(in.args, a.Value)
		}
		if in.cmd == "from" {
			s := stage{from: in.args[0]}
			if len(in.args) == 3 && strings.EqualFold(in.args[1], "as") {
				s.name = in.args[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "arg" {
				t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
	}
	return stages
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// TestDockerfile holds the Dockerfile to what the image promises: a static
// binary built by the Go toolchain in one stage, and a last stage holding
// only that binary, run as a numeric non-root user (so Kubernetes'
// runAsNonRoot can check it), with nothing to write (a read-only root file
// system) and the entrypoint and command the docs and the chart use.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2 (build, runtime)", len(stages))
	}
	build, final := stages[0], stages[1]
	if !strings.HasPrefix(build.from, "golang:1.26") || build.name == "" {
		t.Errorf("build stage FROM %s AS %q, want golang:1.26… with a name", build.from, build.name)
	}

	// The build: CGO off (a static binary: the runtime image has no libc),
	// -trimpath, the gateway's main package, and the output path the last
	// stage copies.
	var out string
	for _, run := range build.all("run") {
		cmd := strings.Join(run.args, " ")
		if !strings.Contains(cmd, "go build") {
			continue
		}
		for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/mcpgate"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("line %d: go build without %s: %s", run.line, want, cmd)
			}
		}
		if m := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(cmd); m != nil {
			out = m[1]
		}
	}
	if out == "" {
		t.Fatal("no `go build -o FILE` in the build stage")
	}

	switch {
	case final.from == "scratch":
	case regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:nonroot(@sha256:[0-9a-f]{64})?$`).MatchString(final.from):
	default:
		t.Errorf("runtime stage FROM %s, want distroless static (nonroot) or scratch", final.from)
	}
	// Only the binary (and CA certificates, which distroless static already
	// has) enters the runtime image; nothing runs in it (it has no shell).
	for _, in := range final.instructions {
		switch in.cmd {
		case "copy":
			src := in.args[:len(in.args)-1]
			if !slices.Contains(in.flags, "--from="+build.name) {
				t.Errorf("line %d: COPY %v not from the build stage", in.line, in.args)
			}
			for _, s := range src {
				if s != out && s != "/etc/ssl/certs/ca-certificates.crt" {
					t.Errorf("line %d: the runtime stage copies %s: only the binary %s (and CA certificates) belong there", in.line, s, out)
				}
			}
		case "user", "expose", "entrypoint", "cmd", "label", "env":
		default:
			t.Errorf("line %d: %s in the runtime stage: it holds the binary only", in.line, strings.ToUpper(in.cmd))
		}
	}
	copies := final.all("copy")
	if len(copies) == 0 || copies[0].args[len(copies[0].args)-1] != "/mcpgate" {
		t.Errorf("the binary is not copied to /mcpgate: %+v", copies)
	}

	users := final.all("user")
	if len(users) != 1 {
		t.Fatalf("%d USER instructions in the runtime stage, want 1", len(users))
	}
	if m := regexp.MustCompile(`^(\d+)(:\d+)?$`).FindStringSubmatch(users[0].args[0]); m == nil || m[1] == "0" {
		t.Errorf("USER %s: want a numeric non-root uid (runAsNonRoot cannot check a name)", users[0].args[0])
	}
	for _, tt := range []struct {
		cmd  string
		want []string
	}{
		{"entrypoint", []string{"/mcpgate"}},
		{"cmd", []string{"serve", "--addr", "0.0.0.0:8080"}},
		{"expose", []string{"8080"}},
	} {
		got := final.all(tt.cmd)
		if len(got) != 1 || !slices.Equal(got[0].args, tt.want) {
			t.Errorf("%s: %+v, want %q", strings.ToUpper(tt.cmd), got, tt.want)
			continue
		}
		if tt.cmd != "expose" && !got[0].json {
			t.Errorf("%s is in shell form: the image has no shell; use the JSON form", strings.ToUpper(tt.cmd))
		}
	}
}

// TestDockerignore: the build context keeps every file the binary's build
// reads (each package's folder under the repository, go.mod, go.sum) and
// leaves out .git and the tests' node_modules.
func TestDockerignore(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	ignored := func(rel string) bool {
		m, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, rel := range []string{".git", "test/e2e/node_modules", "deploy"} {
		if !ignored(rel) {
			t.Errorf(".dockerignore keeps %s in the build context", rel)
		}
	}

	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	// The main module's packages the binary is built from, and their
	// files (embedded ones included): go list reads them from the tree.
	cmd := exec.Command("go", "list", "-deps", "-f", `{{$d := .Dir}}{{$p := .}}{{with .Module}}{{if eq .Path "github.com/mcpgate/mcpgate"}}{{range $p.GoFiles}}{{$d}}/{{.}}
{{end}}{{range $p.EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, "./cmd/mcpgate")
	cmd.Dir = root
	outb, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list in the main module: %v\n%s", err, stderr)
	}
	files := append(strings.Fields(string(outb)), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"))
	if len(files) < 50 {
		t.Fatalf("go list named %d files: %v", len(files), files)
	}
	for _, file := range files {
		rel, err := filepath.Rel(root, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s is outside the repository", file)
		}
		if ignored(rel) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", rel)
		}
	}
}
