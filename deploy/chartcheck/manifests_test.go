package chartcheck

import (
	"flag"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/manifests from the chart's default render")

// manifestsDir holds the plain manifests: `kubectl apply -f deploy/manifests/`.
var manifestsDir = filepath.Join("..", "manifests")

// manifestHeader opens every file of deploy/manifests.
const manifestHeader = `# Rendered from deploy/helm/mcpgate with its default values (release "mcpgate"):
# do not edit; change the chart and run (cd deploy/chartcheck && go test -run TestManifests -update).
# The Secret is not here: its task key must be yours, not one in this repository.
# Create it before applying (docs/deploy.md):
#   kubectl create secret generic mcpgate --from-literal=task-key="$(openssl rand -base64 32)"
`

// TestManifests keeps deploy/manifests equal to the chart rendered with its
// default values, one file per template, minus the Secret (whose generated
// task key differs on every render, and would be a key every user of the
// manifests shares).
func TestManifests(t *testing.T) {
	rendered, err := renderChart(loadChart(t), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(rendered); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for source, text := range rendered {
		name := path.Base(source)
		if name == "NOTES.txt" || name == "secret.yaml" || strings.TrimSpace(text) == "" {
			continue
		}
		want[name] = manifestHeader + strings.TrimLeft(text, "\n")
	}
	if *update {
		if err := os.RemoveAll(manifestsDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(manifestsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range want {
			if err := os.WriteFile(filepath.Join(manifestsDir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	entries, err := os.ReadDir(manifestsDir)
	if err != nil {
		t.Fatalf("%v: run go test -run TestManifests -update", err)
	}
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
		got, err := os.ReadFile(filepath.Join(manifestsDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[e.Name()]
		switch {
		case !ok:
			t.Errorf("deploy/manifests/%s: the chart renders no such file", e.Name())
		case string(got) != w:
			t.Errorf("deploy/manifests/%s differs from the chart's render: run go test -run TestManifests -update\n--- got\n%s\n--- want\n%s", e.Name(), got, w)
		}
	}
	for name := range want {
		if !slices.Contains(have, name) {
			t.Errorf("deploy/manifests/%s is missing: run go test -run TestManifests -update", name)
		}
	}
}
