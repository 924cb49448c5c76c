package search

import (
	"math"
	"slices"
	"strings"
	"sync"
)

// Doc is one searchable tool: the texts the index reads of it.
type Doc struct {
	Name        string
	Title       string
	Description string
	// Params are the tool's top-level input properties.
	Params []Field
	Tags   []string
	// Path is the HTTP path template, e.g. /repos/{owner}/{repo}/issues;
	// "" for a tool that is not a REST operation.
	Path string
	// Method is the HTTP method, upper or lower case; "" for none.
	Method   string
	Upstream string
}

// Field is one named parameter and its description.
type Field struct {
	Name, Description string
}

// Hit is one search result: the position of the document in the slice
// given to New, and its score (higher is better; only comparable within
// one query).
type Hit struct {
	Doc   int
	Score float64
}

// Index ranks documents for free-text queries (see the package doc for
// how). It is immutable once New returns, and safe for concurrent use by
// any number of goroutines.
type Index struct {
	n        int
	terms    map[string]int32 // term → its row in postings
	postings [][]posting      // by term: the documents holding it, by doc
	idf      []float64        // by term
	scratch  sync.Pool        // *scratch, one per concurrent Search
	synonym  float64          // a synonym's weight in a query (params.synonym)
}

// posting is one document that holds a term, with the term's BM25F
// saturated weight in it (before the idf): tf/(k1+tf) over the weighted,
// length-normalised frequencies of every field. Everything but the query
// is known at build time, so a query only sums these.
type posting struct {
	doc    int32
	weight float32
}

// field is one weighted part of a document.
type field int

const (
	fName field = iota
	fTitle
	fSummary
	fBody
	fPath
	fMethod
	fTags
	fParamName
	fParamDesc
	fUpstream
	nFields
)

// params are the ranking's tunable numbers.
type params struct {
	// weight and b are BM25F's per-field weight and length normalisation.
	weight, b [nFields]float64
	// k1 is BM25's term-frequency saturation: how soon more occurrences
	// of a term stop adding to a document's score.
	k1 float64
	// synonym is what a synonym of a query word counts for, against 1 for
	// the word itself: enough to find a tool that says "remove" for a
	// query that says "delete", not enough to outrank one that says
	// "delete".
	synonym float64
}

// defaults are the numbers New uses. They were set against
// testdata/queries.yaml (see the package doc); a name or path term is worth
// several description terms, since the name and path say what a tool does
// and the description says much else besides.
var defaults = params{
	weight: [nFields]float64{
		fName:      3.0,
		fTitle:     1.0,
		fSummary:   2.0,
		fBody:      0.5,
		fPath:      1.5,
		fMethod:    0.8,
		fTags:      0.5,
		fParamName: 0.3,
		fParamDesc: 0.1,
		fUpstream:  0.5,
	},
	// A name is not normalised by its length: a longer name is a more
	// specific operation (listCoreV1PodForAllNamespaces), not a padded
	// text, and normalising it lost the all-namespaces lists.
	b: [nFields]float64{
		fName:      0,
		fTitle:     0.5,
		fSummary:   0.5,
		fBody:      0.75,
		fPath:      0.5,
		fMethod:    0,
		fTags:      0.3,
		fParamName: 0.5,
		fParamDesc: 0.75,
		fUpstream:  0,
	},
	k1:      1.2,
	synonym: 0.4,
}

// methodVerbs are the verbs an HTTP method stands for, indexed as a field
// of their own: Stripe names its operations Get…, Post… and Delete…, so
// "create" or "update" would otherwise reach its tools only through their
// descriptions. GET stands for "get" only: adding "list" to every GET
// drowned the lists that say "list" themselves.
var methodVerbs = map[string]string{
	"GET":    "get",
	"POST":   "create",
	"PUT":    "replace update",
	"PATCH":  "update",
	"DELETE": "delete",
}

// New indexes docs. The Index keeps no reference to docs; hits name them
// by position.
func New(docs []Doc) *Index {
	return build(docs, &defaults)
}

// build is New with the numbers of p.
func build(docs []Doc, p *params) *Index {
	x := &Index{n: len(docs), terms: map[string]int32{}, synonym: p.synonym}
	// Tools repeat their texts (Kubernetes gives hundreds of operations
	// the same parameter descriptions): each distinct text is tokenized
	// once.
	memo := map[string][]string{}
	tokens := func(s string) []string {
		ts, ok := memo[s]
		if !ok {
			ts = Tokens(s)
			memo[s] = ts
		}
		return ts
	}
	// First the fields' lengths, for their averages.
	lens := make([][nFields]int, len(docs))
	var avgLen [nFields]float64
	for i := range docs {
		texts := docTexts(&docs[i])
		for f := range nFields {
			for _, s := range texts[f] {
				lens[i][f] += len(tokens(s))
			}
			avgLen[f] += float64(lens[i][f])
		}
	}
	for f := range nFields {
		avgLen[f] = max(avgLen[f]/float64(max(len(docs), 1)), 1)
	}
	for i := range docs {
		// The document's terms, in a fixed order, with their pseudo
		// frequency: Σ weight·tf / (1 − b + b·len/avglen) over fields.
		freq := map[string]float64{}
		var order []string
		texts := docTexts(&docs[i])
		for f := range nFields {
			norm := 1 - p.b[f] + p.b[f]*float64(lens[i][f])/avgLen[f]
			for _, s := range texts[f] {
				for _, t := range tokens(s) {
					if _, ok := freq[t]; !ok {
						order = append(order, t)
					}
					freq[t] += p.weight[f] / norm
				}
			}
		}
		slices.Sort(order)
		for _, t := range order {
			id, ok := x.terms[t]
			if !ok {
				id = int32(len(x.postings))
				x.terms[t] = id
				x.postings = append(x.postings, nil)
			}
			tf := freq[t]
			x.postings[id] = append(x.postings[id], posting{doc: int32(i), weight: float32(tf / (p.k1 + tf))})
		}
	}
	x.idf = make([]float64, len(x.postings))
	for id, ps := range x.postings {
		df := float64(len(ps))
		x.idf[id] = math.Log(1 + (float64(len(docs))-df+0.5)/(df+0.5))
	}
	x.scratch.New = func() any { return &scratch{acc: make([]float64, x.n)} }
	return x
}

// docTexts returns each field's texts of d.
func docTexts(d *Doc) [nFields][]string {
	var t [nFields][]string
	t[fName] = []string{d.Name}
	t[fTitle] = []string{d.Title}
	summary, body, _ := strings.Cut(strings.TrimSpace(d.Description), "\n\n")
	t[fSummary] = []string{summary}
	t[fBody] = []string{body}
	t[fPath] = []string{d.Path}
	t[fMethod] = []string{methodVerbs[strings.ToUpper(d.Method)]}
	t[fTags] = d.Tags
	for _, p := range d.Params {
		t[fParamName] = append(t[fParamName], p.Name)
		t[fParamDesc] = append(t[fParamDesc], p.Description)
	}
	t[fUpstream] = []string{d.Upstream}
	return t
}

// scratch is one Search's working memory, pooled so that a query
// allocates nothing per document.
type scratch struct {
	acc     []float64 // score by document; 0: not reached
	reached []int32   // the documents acc holds a score for
}

// queryTerm is one term of a query, with its weight: 1 for the query's
// own words (however often they occur), params.synonym for a synonym's.
type queryTerm struct {
	id     int32
	weight float64
}

// Search returns at most limit hits for query, best first, only of
// documents for which keep returns true (every document when keep is
// nil); keep is called at most once for each document the query matches,
// from the calling goroutine, and for no other. A blank query, or one of
// nothing but stopwords and unknown words, has no hits; so does a limit
// below 1: the result is then nil, never an error. Equal scores rank by
// document position, so the same query always gives the same hits.
func (x *Index) Search(query string, limit int, keep func(doc int) bool) []Hit {
	if limit < 1 || x.n == 0 {
		return nil
	}
	terms := x.queryTerms(query)
	if len(terms) == 0 {
		return nil
	}
	// Not deferred: a scratch that a panicking keep left half-cleared
	// must not go back to the pool.
	s := x.scratch.Get().(*scratch)
	for _, qt := range terms {
		w := qt.weight * x.idf[qt.id]
		for _, p := range x.postings[qt.id] {
			if s.acc[p.doc] == 0 {
				s.reached = append(s.reached, p.doc)
			}
			s.acc[p.doc] += w * float64(p.weight)
		}
	}
	hits := make([]Hit, 0, min(limit, len(s.reached)))
	for _, d := range s.reached {
		score := s.acc[d]
		s.acc[d] = 0
		if keep != nil && !keep(int(d)) {
			continue
		}
		h := Hit{Doc: int(d), Score: score}
		if len(hits) == limit && !better(h, hits[limit-1]) {
			continue
		}
		// Insert in order; hits is short (limit), so a shift is cheaper
		// than a heap.
		at := len(hits)
		for at > 0 && better(h, hits[at-1]) {
			at--
		}
		if len(hits) < limit {
			hits = append(hits, Hit{})
		}
		copy(hits[at+1:], hits[at:len(hits)-1])
		hits[at] = h
	}
	s.reached = s.reached[:0]
	x.scratch.Put(s)
	return hits
}

// better reports whether a ranks before b: a higher score, or the same
// score and an earlier document.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Doc < b.Doc
}

// queryTerms returns the indexed terms of query, with their weights, in
// the order they first appear (so that scores sum in a fixed order).
func (x *Index) queryTerms(query string) []queryTerm {
	var out []queryTerm
	add := func(t string, w float64) {
		id, ok := x.terms[t]
		if !ok {
			return
		}
		for i := range out {
			if out[i].id == id {
				out[i].weight = max(out[i].weight, w)
				return
			}
		}
		out = append(out, queryTerm{id: id, weight: w})
	}
	var words []string
	eachWord(query, func(w string) { words = append(words, w) })
	for _, w := range words {
		if t := term(w); t != "" {
			add(t, 1)
		}
	}
	for _, w := range words {
		for _, syn := range synonyms[w] {
			if t := term(syn); t != "" {
				add(t, x.synonym)
			}
		}
		for _, e := range expansions[w] {
			add(term(e), 1)
		}
	}
	return out
}

// synonyms are the few generic equivalences of API verbs and nouns a
// person uses for one another; each query word brings its synonyms in
// at params.synonym. The table is kept small and generic on purpose: it
// names no API's resources, only how people phrase requests.
var synonyms = map[string][]string{}

func init() {
	groups := [][]string{
		{"delete", "remove", "destroy", "erase"},
		{"create", "add", "new", "make"},
		{"get", "read", "retrieve", "fetch", "show"},
		{"update", "modify", "edit", "change"},
		{"search", "find", "lookup", "query"},
		{"cancel", "abort", "stop"},
	}
	for _, g := range groups {
		for _, w := range g {
			for _, o := range g {
				if o != w {
					synonyms[w] = append(synonyms[w], o)
				}
			}
		}
	}
	// A question about which things there are asks for a list.
	for _, w := range []string{"which", "what", "who"} {
		synonyms[w] = []string{"list"}
	}
}

// expansions are abbreviations that stand for more than one word; they
// count as the words themselves.
var expansions = map[string][]string{
	"pr":  {"pull", "request"},
	"prs": {"pull", "request"},
}
