package search_test

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/catalog/search"
)

// BenchmarkSearch measures search_tools' ranking (issue 23 §3: p50 ≤ 1 ms
// over Kubernetes' 1123 tools) with the query set's requests for each
// catalog, round-robin, limit 8. Besides ns/op (the mean) it reports the
// median and 99th percentile of single queries, p50-ns and p99-ns.
// Building the catalog is not measured.
func BenchmarkSearch(b *testing.B) {
	qs := loadQueries(b)
	for _, name := range []string{"kubernetes", "github"} {
		b.Run(name, func(b *testing.B) {
			ci := loadIndex(b, name)
			var queries []string
			for _, q := range qs {
				if q.Catalog == name {
					queries = append(queries, q.Query)
				}
			}
			var took []time.Duration
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				ci.index.Search(queries[i%len(queries)], recallAt, nil)
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkNew measures building the index of Kubernetes' catalog from
// its documents: what search mode adds to a gateway's start.
func BenchmarkNew(b *testing.B) {
	ci := loadIndex(b, "kubernetes")
	b.ReportAllocs()
	for b.Loop() {
		search.New(ci.docs)
	}
}
