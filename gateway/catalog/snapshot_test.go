package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/config"
)

// snapshotCorpus are the corpus documents the snapshot is checked over: the
// three largest, and smaller ones with path-level parameters, resources,
// 3.1 and YAML.
var snapshotCorpus = []string{
	"stripe-spec3-2022.json", "kubernetes-swagger-2.0.json", "github-api-2020.json",
	"swagger-petstore-3.0.yaml", "readme-parameters-common-3.0.json", "swagger-petstore-3.1.json",
}

func snapshotConfig(t testing.TB, path string) *config.Config {
	t.Helper()
	cfg := &config.Config{Upstreams: []config.Upstream{{
		Name: "api", OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1",
		Resources: []string{"GET *"},
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSnapshotCatalogsIdentical builds each corpus document's catalog from
// the document (as serve does) and from its snapshot, and compares what is
// served and audited: every tool's JSON (schemas, hints, _meta with
// provenance), its search document, the lock facts, the resources, the
// warnings, the selection, and the snapshot each writes.
func TestSnapshotCatalogsIdentical(t *testing.T) {
	for _, name := range snapshotCorpus {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(corpusDir, name)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s: the shared corpus is not beside this clone", path)
			}
			cfg := snapshotConfig(t, path)
			var file bytes.Buffer
			full, err := WriteSnapshot(context.Background(), cfg, &file, &SnapshotOptions{Build: "test"})
			if err != nil {
				t.Fatal(err)
			}
			var fullWarnings []string
			done := make(chan struct{})
			snap, err := LoadSnapshot(context.Background(), cfg, file.Bytes(), &SnapshotOptions{Build: "test"},
				&Options{Validated: func(ws []string) { fullWarnings = ws; close(done) }})
			if err != nil {
				t.Fatal(err)
			}
			<-done
			if len(full.Tools) == 0 || len(full.Tools) != len(snap.Tools) {
				t.Fatalf("%d tools from the document, %d from the snapshot", len(full.Tools), len(snap.Tools))
			}
			for i, ft := range full.Tools {
				st := snap.Tools[i]
				fj, _ := json.Marshal(ft.Tool)
				sj, _ := json.Marshal(st.Tool)
				if !bytes.Equal(fj, sj) {
					t.Fatalf("tool %s differs:\n%s\n%s", ft.Tool.Name, firstDiff(fj, sj), "")
				}
				if !reflect.DeepEqual(ft.SearchDoc(), st.SearchDoc()) {
					t.Errorf("tool %s: search documents differ", ft.Tool.Name)
				}
			}
			full.DropDocuments() // what serving does before it reads the facts again
			if f, s := mustJSON(t, full.Facts()), mustJSON(t, snap.Facts()); !bytes.Equal(f, s) {
				t.Errorf("lock facts differ: %s", firstDiff(f, s))
			}
			if f, s := mustJSON(t, full.LockedResources()), mustJSON(t, snap.LockedResources()); !bytes.Equal(f, s) {
				t.Errorf("resources differ: %s", firstDiff(f, s))
			}
			if len(full.Resources) != len(snap.Resources) {
				t.Errorf("%d resources from the document, %d from the snapshot", len(full.Resources), len(snap.Resources))
			}
			for i := range min(len(full.Resources), len(snap.Resources)) {
				fr, sr := full.Resources[i], snap.Resources[i]
				if f, s := mustJSON(t, []any{fr.Resource, fr.Template, fr.URI(), fr.args}), mustJSON(t, []any{sr.Resource, sr.Template, sr.URI(), sr.args}); !bytes.Equal(f, s) {
					t.Errorf("resource %d differs: %s", i, firstDiff(f, s))
				}
			}
			for _, pair := range [][2]any{{full.Warnings, snap.Warnings}, {full.Selection, snap.Selection}, {full.Upstreams, snap.Upstreams}, {full.Skipped, snap.Skipped}} {
				if f, s := mustJSON(t, pair[0]), mustJSON(t, pair[1]); !bytes.Equal(f, s) {
					t.Errorf("catalog differs: %s", firstDiff(f, s))
				}
			}
			// What the snapshot's catalog would write again is what was
			// written: nothing was lost on the way back.
			again, err := snap.snapshotPayload(fullWarnings)
			if err != nil {
				t.Fatal(err)
			}
			payload := file.Bytes()[bytes.IndexByte(file.Bytes(), '\n')+1:]
			if a, err := marshalPayload(again); err != nil || !bytes.Equal(a, payload) {
				t.Errorf("the snapshot's catalog writes another snapshot: %s", firstDiff(payload, a))
			}
			t.Logf("%d tools, %d resources, snapshot %d KiB", len(snap.Tools), len(snap.Resources), file.Len()>>10)
		})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// firstDiff shows where a and b first differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-80, 0)
	return "…" + string(a[from:min(i+80, len(a))]) + "\n   vs …" + string(b[from:min(i+80, len(b))])
}

// TestSnapshotMismatch: a snapshot is used only by the build that wrote it,
// for the configuration and documents it was written from; any other hash
// is a *SnapshotError naming what differs.
func TestSnapshotMismatch(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "pets.yaml")
	if err := os.WriteFile(doc, []byte(resourcesDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "petstore", OpenAPI: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &file, &SnapshotOptions{Build: "v1"}); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	headerEnd := bytes.IndexByte(good, '\n')
	changed := func(f func(c *config.Config)) *config.Config {
		c := *cfg
		c.Upstreams = append([]config.Upstream(nil), cfg.Upstreams...)
		f(&c)
		return &c
	}
	otherDoc := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(otherDoc, []byte(strings.Replace(resourcesDoc, "operationId: odd", "operationId: odder", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   *config.Config
		build string
		data  []byte
		what  string
		says  string
	}{
		{"same", cfg, "v1", good, "", ""},
		{"another build", cfg, "v2", good, "build", "written by mcpgate v1, this is v2"},
		{"config changed", changed(func(c *config.Config) { c.Upstreams[0].ToolPrefix = "p_" }), "v1", good, "config", "configuration's hash differs"},
		{"name style changed", changed(func(c *config.Config) { c.NameStyle = "spec" }), "v1", good, "config", "configuration's hash differs"},
		{"serving setting changed", changed(func(c *config.Config) { c.Listen = "0.0.0.0:9000"; c.MaxSessions = 7 }), "v1", good, "", ""},
		{"upstream serving setting changed", changed(func(c *config.Config) {
			c.Upstreams[0].Timeout, c.Upstreams[0].MaxConcurrent = 3*time.Second, 9
			c.Upstreams[0].Auth.Mode = "none"
		}), "v1", good, "", ""},
		{"base URL changed", changed(func(c *config.Config) { c.Upstreams[0].BaseURL = "http://127.0.0.1:2" }), "v1", good, "config", "configuration's hash differs"},
		{"another document", changed(func(c *config.Config) { c.Upstreams[0].OpenAPI = otherDoc }), "v1", good, "config", "configuration's hash differs"},
		{"empty file", cfg, "v1", nil, "format", "no header line"},
		{"foreign file", cfg, "v1", []byte("{\"openapi\":\"3.0.0\"}\n{}"), "format", "not a snapshot"},
		{"other format", cfg, "v1", bytes.Replace(good, []byte(SnapshotFormat), []byte("mcpgate-snapshot/9"), 1), "format", `format "mcpgate-snapshot/9"`},
		{"truncated", cfg, "v1", good[:len(good)-10], "payload", "does not match its hash"},
		{"header only", cfg, "v1", good[:headerEnd+1], "payload", "does not match its hash"},
		{"altered", cfg, "v1", bytes.Replace(good, []byte(`"method":"GET"`), []byte(`"method":"PUT"`), 1), "payload", "does not match its hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := LoadSnapshot(context.Background(), tc.cfg, tc.data, &SnapshotOptions{Build: tc.build}, nil)
			if tc.what == "" {
				if err != nil || len(cat.Tools) == 0 {
					t.Fatalf("not used: %v", err)
				}
				return
			}
			var se *SnapshotError
			if !errors.As(err, &se) || se.What != tc.what || !strings.Contains(se.Error(), tc.says) {
				t.Fatalf("got %v, want a %s error saying %q", err, tc.what, tc.says)
			}
		})
	}
	// The document's bytes changed under the same path.
	if err := os.WriteFile(doc, []byte(resourcesDoc+"\n# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSnapshot(context.Background(), cfg, good, &SnapshotOptions{Build: "v1"}, nil)
	var se *SnapshotError
	if !errors.As(err, &se) || se.What != "document" || !strings.Contains(err.Error(), "upstream petstore: the hash of document") {
		t.Fatalf("document edited: got %v", err)
	}
}
