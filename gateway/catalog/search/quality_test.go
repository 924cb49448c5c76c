package search_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mcpgate/mcpgate/gateway/catalog"
	"github.com/mcpgate/mcpgate/gateway/catalog/search"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// corpusDir holds the real public OpenAPI documents (../shared/corpus from
// the repository), beside the clone.
const corpusDir = "../../../../shared/corpus"

// corpora are the catalogs the query set is written against, by the
// name its entries give in `catalog:`.
var corpora = map[string]string{
	"github":     "github-api-2020.json",
	"stripe":     "stripe-spec3-2022.json",
	"kubernetes": "kubernetes-swagger-2.0.json",
}

// catalogOrder is the order results are reported in.
var catalogOrder = []string{"github", "stripe", "kubernetes"}

// recallAt is the cut-off of recall: search_tools' default limit.
const recallAt = 8

var verbose = flag.Bool("search.misses", false, "TestRecall: log every query whose expected tool is not first")

// corpusIndex is one catalog built from the corpus, and its index.
type corpusIndex struct {
	names []string // tool names, by document
	docs  []search.Doc
	index *search.Index
	err   error
}

var (
	indexOnce = map[string]*sync.Once{}
	indexes   = map[string]*corpusIndex{}
)

func init() {
	for name := range corpora {
		indexOnce[name] = new(sync.Once)
	}
}

// loadIndex builds the named corpus catalog (ExposeAll, as a gateway in
// search mode fronting the whole API would) and indexes it, once per test
// binary: a catalog build takes seconds. It skips when the shared corpus
// is not beside the clone.
func loadIndex(tb testing.TB, name string) *corpusIndex {
	tb.Helper()
	path := filepath.Join(corpusDir, corpora[name])
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("no %s: the shared corpus is not beside this clone", path)
	}
	indexOnce[name].Do(func() {
		ci := &corpusIndex{}
		indexes[name] = ci
		cfg := &config.Config{Upstreams: []config.Upstream{{Name: name, OpenAPI: path, ExposeAll: true, BaseURL: "http://127.0.0.1:1"}}}
		if err := cfg.Validate(); err != nil {
			ci.err = err
			return
		}
		// Validation only adds warnings, never changes the tools: a
		// closed ValidateAfter abandons it, which saves seconds under -race.
		never := make(chan bool)
		close(never)
		cat, err := catalog.Build(context.Background(), cfg, &catalog.Options{Validated: func([]string) {}, ValidateAfter: never})
		if err != nil {
			ci.err = err
			return
		}
		for _, t := range cat.Tools {
			ci.names = append(ci.names, t.Tool.Name)
			ci.docs = append(ci.docs, t.SearchDoc())
		}
		ci.index = search.New(ci.docs)
	})
	ci := indexes[name]
	if ci.err != nil {
		tb.Fatalf("build the %s catalog: %v", name, ci.err)
	}
	return ci
}

// query is one entry of testdata/queries.yaml.
type query struct {
	Catalog string   `yaml:"catalog"`
	Query   string   `yaml:"query"`
	Expect  []string `yaml:"expect"`
}

// loadQueries reads the query set; loadQueriesFile reads file of testdata.
func loadQueries(tb testing.TB) []query {
	tb.Helper()
	return loadQueriesFile(tb, "queries.yaml")
}

func loadQueriesFile(tb testing.TB, file string) []query {
	tb.Helper()
	path := filepath.Join("testdata", file)
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var qs []query
	if err := yaml.Unmarshal(raw, &qs); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	for i, q := range qs {
		if _, ok := corpora[q.Catalog]; !ok || q.Query == "" || len(q.Expect) == 0 {
			tb.Fatalf("%s entry %d (%q): needs a catalog of %v, a query and an expected tool", path, i, q.Query, catalogOrder)
		}
	}
	return qs
}

// TestRecall measures the ranking against the query set: recall@8 (the
// share of queries with an expected tool among the first eight hits) and
// MRR (the mean of 1/rank of the first expected tool, 0 when it is not in
// the first 100), per catalog and overall. It fails under the quality
// floor of issue 23 §3, overall recall@8 ≥ 0.9. It reports the same for
// the held-out requests (testdata/holdout.yaml), which the ranking was
// never tuned against, without a floor.
func TestRecall(t *testing.T) {
	recall, n := measure(t, loadQueries(t))
	if n < 60 {
		t.Errorf("the query set has %d queries; issue 23 asks for at least 60", n)
	}
	if recall < 0.9 {
		t.Errorf("overall recall@%d is %.3f, under the 0.9 floor", recallAt, recall)
	}
	t.Run("holdout", func(t *testing.T) {
		measure(t, loadQueriesFile(t, "holdout.yaml"))
	})
}

// measure logs recall@8 and MRR of qs, per catalog and overall, and
// returns the overall recall and the number of queries.
func measure(t *testing.T, qs []query) (float64, int) {
	t.Helper()
	type tally struct {
		n, found int
		rr       float64
	}
	per := map[string]*tally{}
	var all tally
	for _, c := range catalogOrder {
		per[c] = &tally{}
	}
	for _, q := range qs {
		ci := loadIndex(t, q.Catalog)
		for _, e := range q.Expect {
			if !slices.Contains(ci.names, e) {
				t.Errorf("%s: query %q expects %s, which is no tool of the catalog", q.Catalog, q.Query, e)
			}
		}
		hits := ci.index.Search(q.Query, 100, nil)
		rank := 0
		for i, h := range hits {
			if slices.Contains(q.Expect, ci.names[h.Doc]) {
				rank = i + 1
				break
			}
		}
		tl := per[q.Catalog]
		tl.n++
		all.n++
		if rank > 0 {
			tl.rr += 1 / float64(rank)
			all.rr += 1 / float64(rank)
			if rank <= recallAt {
				tl.found++
				all.found++
			}
		}
		if *verbose && rank != 1 {
			var top []string
			for _, h := range hits[:min(len(hits), 5)] {
				top = append(top, fmt.Sprintf("%s(%.2f)", ci.names[h.Doc], h.Score))
			}
			t.Logf("%s rank %d: %q wants %v; top: %s", q.Catalog, rank, q.Query, q.Expect, strings.Join(top, " "))
		}
	}
	for _, c := range catalogOrder {
		tl := per[c]
		if tl.n > 0 {
			t.Logf("%-10s %3d queries  recall@%d %.3f  MRR %.3f", c, tl.n, recallAt, float64(tl.found)/float64(tl.n), tl.rr/float64(tl.n))
		}
	}
	recall := float64(all.found) / float64(max(all.n, 1))
	t.Logf("%-10s %3d queries  recall@%d %.3f  MRR %.3f", "overall", all.n, recallAt, recall, all.rr/float64(max(all.n, 1)))
	return recall, all.n
}
