package gateway

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSnapshotStart measures New — what `serve` waits for before it
// listens — for the largest corpus documents, from the documents (full) and
// from a snapshot `mcpgate build` wrote (snapshot). The snapshot's includes
// reading and hashing the document and the snapshot file, not the tools
// added to go-sdk's server in the background after New returns (see
// addTools), which each iteration waits for before the next.
//
//	go test ./gateway -run '^$' -bench SnapshotStart -benchmem
func BenchmarkSnapshotStart(b *testing.B) {
	for _, name := range []string{"kubernetes-swagger-2.0.json", "stripe-spec3-2022.json"} {
		path := filepath.Join(corpusDir, name)
		if _, err := os.Stat(path); err != nil {
			b.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
		}
		cfg := &Config{Upstreams: []Upstream{{OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
		snap := filepath.Join(b.TempDir(), "catalog.snap")
		f, err := os.Create(snap)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := WriteSnapshot(context.Background(), cfg, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		for _, mode := range []string{"full", "snapshot"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				opts := &Options{}
				if mode == "snapshot" {
					opts.Snapshot = snap
				}
				b.ReportAllocs()
				for b.Loop() {
					g, err := New(context.Background(), cfg, opts)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					<-g.Validated()
					<-g.sdkTools // from a snapshot, go-sdk's tools are added after New
					b.StartTimer()
				}
			})
		}
	}
}
