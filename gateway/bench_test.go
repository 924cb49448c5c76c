package gateway

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// corpusDir is the shared corpus of real OpenAPI documents, beside the repo.
const corpusDir = "../../shared/corpus"

// BenchmarkCatalog measures load + validate + catalog for the large real
// documents: the cost of a gateway start or reload.
//
//	go test ./gateway -run '^$' -bench Catalog -benchmem
func BenchmarkCatalog(b *testing.B) {
	for _, name := range []string{"github-api-2020.json", "kubernetes-swagger-2.0.json", "stripe-spec3-2022.json", "twilio-api-v2010.json", "asana-3.0.yaml"} {
		b.Run(name, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil {
				b.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				cfg := &Config{Upstreams: []Upstream{{OpenAPI: name, Document: data, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
				if err := cfg.Validate(); err != nil {
					b.Fatal(err)
				}
				if _, err := BuildCatalog(context.Background(), cfg, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkServeStart measures what `serve` waits for before it listens: the
// catalog without waiting for the documents' validation (which goes on in
// the background, see CatalogOptions.Validated) and the serving state. Each
// iteration waits for the previous one's validation to end first, so that
// they do not pile up on the cores.
//
//	go test ./gateway -run '^$' -bench ServeStart -benchmem
func BenchmarkServeStart(b *testing.B) {
	for _, name := range []string{"github-api-2020.json", "kubernetes-swagger-2.0.json", "stripe-spec3-2022.json"} {
		b.Run(name, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil {
				b.Skipf("corpus document not found (%v): the shared corpus is not beside this clone", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				cfg := &Config{Upstreams: []Upstream{{OpenAPI: name, Document: data, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
				g, err := New(context.Background(), cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				<-g.Validated()
				b.StartTimer()
			}
		})
	}
}
