package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// echoAPI answers every request with what it received: method, path, query,
// content type and body. The same call through two gateways must reach it
// the same.
func echoAPI(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"method": r.Method, "path": r.URL.EscapedPath(), "query": r.URL.RawQuery,
			"contentType": r.Header.Get("Content-Type"), "body": string(body),
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// snapshotPair serves cfg twice — from its documents, and from a snapshot
// written for it — and returns both /mcp URLs.
func snapshotPair(t *testing.T, cfg *Config) (full, snap *Gateway, fullURL, snapURL string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.snapshot")
	var b bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	full, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err = New(context.Background(), cfg, &Options{Snapshot: path, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.fromSnapshot {
		t.Fatalf("the snapshot was not used: %s", log.String())
	}
	serve := func(g *Gateway) string {
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(srv.Close)
		return srv.URL + "/mcp"
	}
	return full, snap, serve(full), serve(snap)
}

// TestSnapshotCallsDifferential calls tools of the large corpus documents
// through a gateway that loaded the documents and one that loaded a
// snapshot: valid calls (path, query, deepObject, form and JSON bodies, a
// merge patch), invalid ones (the validation's wording) and a missing
// argument must give the same answers and send the same requests; and
// tools/list and an initialize (go-sdk's side) must match too.
func TestSnapshotCallsDifferential(t *testing.T) {
	api := echoAPI(t)
	for _, tc := range []struct {
		doc   string
		calls [][2]string // tool, arguments
	}{
		{"stripe-spec3-2022.json", [][2]string{
			{"GetCustomersCustomer", `{"customer":"cus 1/2","expand":["default_source","sources"]}`},
			{"GetCustomers", `{"limit":3,"created":{"gte":5,"lt":9},"email":"a@b.c"}`},
			{"PostCustomers", `{"name":"Ann","address":{"city":"Oslo","line1":"x"},"metadata":{"k":"v"},"balance":-12}`},
			{"PostCustomers", `{"name":7}`},
			{"GetCustomers", `{"limit":"three"}`},
			{"DeleteCustomersCustomer", `{}`},
			{"GetCustomersCustomer", `{"customer":"c","nope":1}`},
		}},
		{"kubernetes-swagger-2.0.json", [][2]string{
			{"readCoreV1NamespacedConfigMap", `{"namespace":"default","name":"cm"}`},
			{"listCoreV1NamespacedPod", `{"namespace":"kube-system","labelSelector":"app=x","limit":10,"watch":false}`},
			{"patchCoreV1NamespacedConfigMap", `{"namespace":"default","name":"cm","body":{"data":{"a":"b"}},"dryRun":"All"}`},
			{"patchCoreV1NamespacedConfigMap", `{"namespace":"default"}`},
			{"listCoreV1NamespacedPod", `{"namespace":"x","limit":-1.5}`},
		}},
		{"swagger-petstore-3.0.yaml", [][2]string{
			{"addPet", `{"name":"rex","photoUrls":["u"],"status":"available","category":{"id":1,"name":"dogs"}}`},
			{"findPetsByStatus", `{"status":"sold"}`},
			{"findPetsByTags", `{"tags":["a","b c"]}`},
			{"addPet", `{"name":"rex","status":"lost"}`},
		}},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			path := filepath.Join(corpusDir, tc.doc)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s: the shared corpus is not beside this clone", path)
			}
			cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: api}}}
			full, snap, fullURL, snapURL := snapshotPair(t, cfg)
			if full.Served() != snap.Served() {
				t.Fatalf("%d tools served from the document, %d from the snapshot", full.Served(), snap.Served())
			}
			same := func(what, body string) string {
				t.Helper()
				r1, a1 := post(t, fullURL, body, nil)
				r2, a2 := post(t, snapURL, body, nil)
				if r1.StatusCode != r2.StatusCode || a1 != a2 {
					t.Fatalf("%s: the gateways answer apart:\nfrom the document (%d): %.600s\nfrom the snapshot (%d): %.600s", what, r1.StatusCode, a1, r2.StatusCode, a2)
				}
				return a1
			}
			same("tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
			same("initialize", initialize) // go-sdk's, once its tools are added
			for i, c := range tc.calls {
				answer := same(c[0]+" "+c[1], call(i+2, c[0], c[1]))
				if strings.Contains(answer, `"code":-32602`) && strings.Contains(answer, "unknown tool") {
					t.Fatalf("%s: no such tool in %s: %s", c[0], tc.doc, answer)
				}
			}
			// go-sdk's own tools/list, through a session (not the fast path).
			l1, err := connect(t, fullURL, nil).ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			l2, err := connect(t, snapURL, nil).ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			j1, _ := json.Marshal(l1)
			j2, _ := json.Marshal(l2)
			if !bytes.Equal(j1, j2) {
				t.Fatal("go-sdk's tools/list differs between the gateways")
			}
		})
	}
}

// TestSnapshotFallback: a snapshot that does not match (another
// configuration, another document, another build, a corrupt or missing
// file) leaves one warning naming what differs, Options.SnapshotNotUsed
// hears why once, and the gateway serves what a full load gives.
func TestSnapshotFallback(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "things.json")
	if err := os.WriteFile(doc, []byte(testDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: doc, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
	var b bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &b); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := *cfg
	other.Upstreams = []Upstream{cfg.Upstreams[0]}
	other.Upstreams[0].ToolPrefix = "x_"
	for _, tc := range []struct {
		name, path string
		cfg        *Config
		reason     string
	}{
		{"used", write("good", good), cfg, ""},
		{"config changed", write("good2", good), &other, "configuration's hash differs"},
		{"another build", write("build", bytes.Replace(good, []byte(snapshotBuild()), []byte("v9.9.9"), 1)), cfg, "written by mcpgate v9.9.9"},
		{"truncated", write("trunc", good[:len(good)/2]), cfg, "does not match its hash"},
		{"garbage", write("junk", []byte("\x00\x01 not a snapshot")), cfg, "no header line"},
		{"missing", filepath.Join(dir, "absent"), cfg, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			var notUsed []error // what Options.SnapshotNotUsed was told, before the documents' load
			g, err := New(context.Background(), tc.cfg, &Options{Snapshot: tc.path, Logger: slog.New(slog.NewTextHandler(&log, nil)),
				SnapshotNotUsed: func(err error) { notUsed = append(notUsed, err) }})
			if err != nil {
				t.Fatal(err)
			}
			<-g.Validated()
			if tc.reason == "" && len(notUsed) != 0 || tc.reason != "" && (len(notUsed) != 1 || !strings.Contains(notUsed[0].Error(), tc.reason)) {
				t.Fatalf("SnapshotNotUsed was called with %v; want it once, saying %q, for a snapshot not used", notUsed, tc.reason)
			}
			if g.Served() == 0 {
				t.Fatal("no tools served")
			}
			lines := strings.Count(log.String(), "snapshot not used")
			switch {
			case tc.reason == "" && (lines != 0 || !g.fromSnapshot):
				t.Fatalf("the snapshot was not used: %s", log.String())
			case tc.reason != "" && (lines != 1 || g.fromSnapshot || !strings.Contains(log.String(), tc.reason)):
				t.Fatalf("want one line saying %q, got: %s", tc.reason, log.String())
			}
			if tc.cfg == &other && g.Catalog().Tools[0].Tool.Name[:2] != "x_" {
				t.Fatalf("the changed configuration is not what is served: %s", g.Catalog().Tools[0].Tool.Name)
			}
		})
	}
}

// TestSnapshotUnsupported: a configuration whose tools are read from a live
// upstream at every start (here: in process) cannot be snapshotted.
func TestSnapshotUnsupported(t *testing.T) {
	cfg := &Config{Upstreams: []Upstream{{OpenAPI: "things.json", Document: []byte(testDoc), Handler: http.NotFoundHandler()}}}
	_, err := WriteSnapshot(context.Background(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "upstream api is served in process") {
		t.Fatalf("got %v", err)
	}

}
