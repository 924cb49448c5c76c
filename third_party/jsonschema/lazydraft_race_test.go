package jsonschema

import (
	"strings"
	"sync"
	"testing"
)

// TestLazyDraftsConcurrentCompile: two compilers at once, at the process's
// first use of the metaschemas. One triggers initDrafts (getSchema); the
// other compiles a schema under a custom metaschema with $vocabulary, whose
// loading reads Draft2020.allVocabs (getVocabs) outside draftsOnce while
// initDrafts writes that map. Run with -race, alone in its process.
func TestLazyDraftsConcurrentCompile(t *testing.T) {
	meta := `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"http://example.com/meta",
	 "$vocabulary":{"https://json-schema.org/draft/2020-12/vocab/core":true,"https://json-schema.org/draft/2020-12/vocab/applicator":true,"https://json-schema.org/draft/2020-12/vocab/validation":true}}`
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			c := NewCompiler()
			if i%2 == 1 {
				doc, err := UnmarshalJSON(strings.NewReader(meta))
				if err != nil {
					t.Error(err)
					return
				}
				if err := c.AddResource("http://example.com/meta", doc); err != nil {
					t.Error(err)
					return
				}
				doc2, _ := UnmarshalJSON(strings.NewReader(`{"$schema":"http://example.com/meta","type":"object"}`))
				if err := c.AddResource("s.json", doc2); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Compile("s.json"); err != nil {
					t.Error(err)
				}
				return
			}
			doc, _ := UnmarshalJSON(strings.NewReader(`{"type":"object"}`))
			c.AddResource("p.json", doc)
			if _, err := c.Compile("p.json"); err != nil {
				t.Error(err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
}
