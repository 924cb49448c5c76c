package search_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/catalog/search"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"snake", "list_open_issues", []string{"list", "open", "issu"}},
		{"kebab and underscore", "repos_list-for-org", []string{"repo", "list", "org"}},
		{"camel", "listNamespacedPod", []string{"list", "namespac", "pod"}},
		{"pascal", "PostCustomersCustomerSources", []string{"post", "customer", "customer", "sourc"}},
		{"acronym", "getHTTPServer", []string{"get", "http", "server"}},
		{"acronym at the end", "readCoreV1APIResources", []string{"read", "cor", "v1", "api", "resourc"}},
		{"path", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", []string{"repo", "owner", "repo", "pull", "pull", "number", "merg"}},
		{"dots", "io.k8s.api.core.v1.Pod", []string{"io", "k8s", "api", "cor", "v1", "pod"}},
		{"punctuation and stopwords", "Delete a pod, (please)!", []string{"delet", "pod"}},
		{"plural -ies", "policies", []string{"policy"}},
		{"plural -es", "branches statuses", []string{"branch", "status"}},
		{"-ing and -ed", "running starred", []string{"run", "star"}},
		{"-tion", "eviction", []string{"evict"}},
		{"inflections meet", "create created creating creation", []string{"creat", "creat", "creat", "creat"}},
		{"status keeps its s", "status", []string{"status"}},
		{"abbreviations fold", "repository organizations", []string{"repo", "org"}},
		{"blank", "  \t ", nil},
		{"non-ASCII letters", "Größe_ändern", []string{"größ", "ändern"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := search.Tokens(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// toyDocs are a few tools, two of them identical so that they tie.
var toyDocs = []search.Doc{
	{Name: "issues_create", Description: "Create an issue", Method: "POST", Path: "/repos/{owner}/{repo}/issues"},
	{Name: "issues_list", Description: "List issues of a repository", Method: "GET", Path: "/repos/{owner}/{repo}/issues"},
	{Name: "pulls_list", Description: "List pull requests", Method: "GET", Path: "/repos/{owner}/{repo}/pulls"},
	{Name: "twin", Description: "Delete a widget", Method: "DELETE"},
	{Name: "twin", Description: "Delete a widget", Method: "DELETE"},
	{Name: "listCoreV1NamespacedPod", Description: "list or watch objects of kind Pod", Method: "GET", Tags: []string{"core_v1"},
		Params: []search.Field{{Name: "namespace", Description: "object name and auth scope"}}},
}

func TestSearchRanks(t *testing.T) {
	x := search.New(toyDocs)
	tests := []struct {
		query string
		first int
	}{
		{"open a new issue", 0},
		{"list issues in a repository", 1},
		{"list pull requests", 2},
		{"remove a widget", 3}, // a synonym; the twins tie and the first wins
		{"pods in a namespace", 5},
	}
	for _, tt := range tests {
		hits := x.Search(tt.query, 3, nil)
		if len(hits) == 0 || hits[0].Doc != tt.first {
			t.Errorf("Search(%q) = %v, want doc %d first", tt.query, hits, tt.first)
		}
	}
}

func TestSearchDeterministic(t *testing.T) {
	x := search.New(toyDocs)
	first := x.Search("delete widget issue", 10, nil)
	for range 20 {
		if again := x.Search("delete widget issue", 10, nil); !slices.Equal(first, again) {
			t.Fatalf("same query, other hits: %v then %v", first, again)
		}
	}
	// The twins tie: the earlier document ranks first.
	if len(first) < 2 || first[0].Doc != 3 || first[1].Doc != 4 || first[0].Score != first[1].Score {
		t.Errorf("twins: hits %v, want docs 3 then 4 at one score", first)
	}
}

func TestSearchKeepAndLimit(t *testing.T) {
	x := search.New(toyDocs)
	all := x.Search("list issues pulls pods", 10, nil)
	if len(all) < 3 {
		t.Fatalf("hits %v: want at least 3", all)
	}
	if got := x.Search("list issues pulls pods", 2, nil); !slices.Equal(got, all[:2]) {
		t.Errorf("limit 2: %v, want the first two of %v", got, all)
	}
	onlyGET := func(i int) bool { return toyDocs[i].Method == "GET" }
	kept := x.Search("list issues pulls pods", 10, onlyGET)
	var want []search.Hit
	for _, h := range all {
		if onlyGET(h.Doc) {
			want = append(want, h)
		}
	}
	if !slices.Equal(kept, want) {
		t.Errorf("keep GET: %v, want %v", kept, want)
	}
	if got := x.Search("list issues", 10, func(int) bool { return false }); len(got) != 0 {
		t.Errorf("keep nothing: %v", got)
	}
	for _, limit := range []int{0, -1} {
		if got := x.Search("list issues", limit, nil); got != nil {
			t.Errorf("limit %d: %v, want nil", limit, got)
		}
	}
	for _, q := range []string{"", "   ", "the of a", "zzzunknown"} {
		if got := x.Search(q, 10, nil); got != nil {
			t.Errorf("query %q: %v, want nil", q, got)
		}
	}
	if got := search.New(nil).Search("anything", 10, nil); got != nil {
		t.Errorf("empty index: %v", got)
	}
}

// TestSearchConcurrent runs queries from several goroutines at once
// (under -race, the pooled scratch must not be shared).
func TestSearchConcurrent(t *testing.T) {
	x := search.New(toyDocs)
	want := x.Search("list issues pulls", 10, nil)
	done := make(chan []search.Hit)
	for range 8 {
		go func() {
			var last []search.Hit
			for range 200 {
				last = x.Search("list issues pulls", 10, nil)
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Errorf("concurrent: %v, want %v", got, want)
		}
	}
}

func FuzzSearch(f *testing.F) {
	for _, s := range []string{"list issues", "", "getHTTPServer", "/repos/{owner}", "ÄÖÜ ß", "\xff\xfe", "a_b-c.d/e{f}", "pr prs delete remove"} {
		f.Add(s, 5)
	}
	x := search.New(toyDocs)
	f.Fuzz(func(t *testing.T, query string, limit int) {
		limit %= 20
		hits := x.Search(query, limit, nil)
		if len(hits) > max(limit, 0) {
			t.Fatalf("%d hits over limit %d", len(hits), limit)
		}
		for i, h := range hits {
			if h.Doc < 0 || h.Doc >= len(toyDocs) || math.IsNaN(h.Score) || h.Score <= 0 {
				t.Fatalf("bad hit %+v", h)
			}
			if i > 0 && (h.Score > hits[i-1].Score || h.Score == hits[i-1].Score && h.Doc < hits[i-1].Doc) {
				t.Fatalf("hits out of order: %v", hits)
			}
		}
		_ = search.Tokens(query)
	})
}

// TestSearchKeepPanics: a keep that panics leaves the index as it was for
// the next query (its working memory is not reused half-cleared).
func TestSearchKeepPanics(t *testing.T) {
	x := search.New(toyDocs)
	want := x.Search("list issues pulls", 10, nil)
	func() {
		defer func() { _ = recover() }()
		x.Search("list issues pulls", 10, func(int) bool { panic("keep") })
	}()
	for range 5 {
		if got := x.Search("list issues pulls", 10, nil); !slices.Equal(got, want) {
			t.Fatalf("after a panicking keep: %v, want %v", got, want)
		}
	}
}
