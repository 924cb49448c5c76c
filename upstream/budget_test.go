package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

func TestSchemaBudget(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	var op *openapi3.Operation
	var item *openapi3.PathItem
	for path, it := range doc.Paths.Map() {
		if path == "/items/{id}" {
			item, op = it, it.Get
		}
	}
	full, err := Bind("GET", "/items/{id}", item, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	if full.OutputSchema == nil || len(full.Degraded) != 0 {
		t.Fatalf("unbounded: output %v, degraded %v", full.OutputSchema, full.Degraded)
	}
	inSize := jsonSize(full.InputSchema)
	// Room for the input schema only: the output schema goes first.
	b, _ := Bind("GET", "/items/{id}", item, op, &BindOptions{SchemaBudget: inSize})
	if b.OutputSchema != nil || len(b.Degraded) != 1 || !strings.Contains(b.Degraded[0], "outputSchema") {
		t.Errorf("output not dropped first: %v", b.Degraded)
	}
	if jsonSize(b.InputSchema) != inSize {
		t.Errorf("input schema cut although it fit")
	}
	// Less room: the input schema is cut too, and still compiles and validates.
	b, _ = Bind("GET", "/items/{id}", item, op, &BindOptions{SchemaBudget: 300})
	if len(b.Degraded) != 2 || !strings.Contains(b.Degraded[1], "input schema") {
		t.Errorf("degraded = %v", b.Degraded)
	}
	if err := b.Validate(map[string]any{"id__path": "1", "limit": json.Number("5")}); err != nil {
		t.Errorf("degraded schema rejects a valid call: %v", err)
	}
}

// TestSizeOf checks the budget's byte count against encoding/json.
func TestSizeOf(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	for _, op := range []string{"getItem", "putItem", "postForm", "upload", "listThings"} {
		b := bindOp(t, doc, op)
		for _, s := range []map[string]any{b.InputSchema, b.OutputSchema} {
			if s == nil {
				continue
			}
			s["description"] = "a <b> & \"c\"\n\x01"
			raw, _ := json.Marshal(s)
			if got := jsonSize(s); got != len(raw) {
				t.Errorf("%s: jsonSize = %d, json.Marshal gives %d", op, got, len(raw))
			}
			if got := jsonSizeUpTo(s, 10); got <= 10 {
				t.Errorf("%s: jsonSizeUpTo(10) = %d", op, got)
			}
		}
	}
}
