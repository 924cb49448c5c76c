package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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

// TestDegradeInputIsEveryStepWhole compares degradeInput, which converts a
// step under the budget and gives it up once it cannot fit, and converts the
// description-trimming steps once, with the steps taken one after another,
// each converted whole: for an operation whose body nests seven components
// deep and whose arguments carry long descriptions, at every budget from
// 200 bytes to more than the schema, the schema and the note must be the
// same.
func TestDegradeInputIsEveryStepWhole(t *testing.T) {
	var b strings.Builder
	long := strings.Repeat("A long sentence about this field that goes on. ", 6)
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"deep","version":"1"},"paths":{"/things/{id}":{"post":{"operationId":"deep",
	"parameters":[{"name":"id","in":"path","required":true,"description":"` + long + `","schema":{"type":"string"}},
	              {"name":"q","in":"query","description":"` + long + `","schema":{"type":"string","description":"` + long + `"}},
	              {"name":"r","in":"query","description":"Short.","schema":{"type":"string","description":"` + strings.Repeat(long, 30) + `"}}],
	"requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object","properties":{
	  "a":{"$ref":"#/components/schemas/L1"},"b":{"type":"array","items":{"$ref":"#/components/schemas/L2"}},"c":{"type":"string","description":"` + long + `"}}}}}},
	"responses":{"204":{"description":"done"}}}}},"components":{"schemas":{`)
	for i := 1; i <= 7; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"L%d":{"type":"object","description":"Level %d. %s","properties":{"name":{"type":"string","description":"%s"},"n":{"type":"integer"}`, i, i, long, long)
		if i < 7 {
			fmt.Fprintf(&b, `,"next":{"$ref":"#/components/schemas/L%d"}`, i+1)
		}
		b.WriteString("}}")
	}
	b.WriteString("}}}")
	doc, err := ParseDocument(context.Background(), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Find("/things/{id}")
	var args []toolArg
	testHookArgs = func(a []toolArg) { args = a }
	defer func() { testHookArgs = nil }()
	full, err := Bind("POST", "/things/{id}", item, item.Post, &BindOptions{NoOutputSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	whole := newStepsWhole(args, full.InputSchema)
	steps := map[string]bool{}
	for budget := 200; budget <= whole.sizes[0]+100; budget += 97 {
		got, err := Bind("POST", "/things/{id}", item, item.Post, &BindOptions{NoOutputSchema: true, SchemaBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		wantNote := whole.check(t, got, budget)
		steps[wantNote] = true
	}
	// The document is built to pass through each step; say so if it stops.
	if len(steps) < len(degradeSteps)+1 {
		t.Errorf("the budgets reached %d of the %d outcomes (steps and none): %v", len(steps), len(degradeSteps)+1, steps)
	}
}

// stepsWhole is what degradeInput is held to: an input schema unbounded
// (steps[0]) and at each of degradeSteps (steps[i+1]), each converted whole
// from the tool's arguments as Bind did before degradeInput, with its size.
type stepsWhole struct {
	name  string // the operation, for a failure's message
	steps []jsonSchema
	sizes []int
}

func newStepsWhole(args []toolArg, full jsonSchema) *stepsWhole {
	w := &stepsWhole{steps: []jsonSchema{full}}
	for _, step := range degradeSteps {
		s := inputSchema(args, step.refDepth)
		if step.descLimit != 0 {
			trimDescriptions(s, step.descLimit)
		}
		w.steps = append(w.steps, s)
	}
	for _, s := range w.steps {
		w.sizes = append(w.sizes, jsonSize(s))
	}
	return w
}

// budgets are the budgets where a choice turns: each step's size, and one
// byte less.
func (w *stepsWhole) budgets() []int {
	var out []int
	for _, n := range w.sizes {
		for _, b := range []int{n, n - 1} {
			if b >= 1 && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// check checks got, bound at budget, against the steps taken one after
// another until one fits (the last whatever its size). It returns the note
// of the step taken ("" for none).
func (w *stepsWhole) check(t testing.TB, got *Binding, budget int) string {
	t.Helper()
	want, wantSize, wantNote := w.steps[0], w.sizes[0], ""
	for i, step := range degradeSteps {
		if wantSize <= budget {
			break
		}
		if n := w.sizes[i+1]; n <= budget || step.last {
			want, wantSize = w.steps[i+1], n
			wantNote = fmt.Sprintf("input schema %s to fit the size budget of %s", step.what, budgetSize(budget))
		}
	}
	var notes []string
	for _, n := range got.Degraded {
		if strings.HasPrefix(n, "input schema ") {
			notes = append(notes, n)
		}
	}
	gotNote := strings.Join(notes, "; ")
	gj, _ := json.Marshal(got.InputSchema)
	wj, _ := json.Marshal(want)
	if gotNote != wantNote || string(gj) != string(wj) {
		t.Fatalf("%s budget %d: got %q and %d bytes, want %q and %d bytes", w.name, budget, gotNote, len(gj), wantNote, len(wj))
	}
	return wantNote
}

// TestTrimLeavesValuesAlone: cutting descriptions to fit a budget touches
// the schema's own descriptions, never data that happens to have a
// "description" key (an enum value, a default, an example), which is the
// document's, shared with every tool that uses it.
func TestTrimLeavesValuesAlone(t *testing.T) {
	long := strings.Repeat("A long sentence about this parameter. ", 20)
	doc, err := ParseDocument(context.Background(), []byte(`{"openapi":"3.0.3","info":{"title":"t","version":"1"},
	"paths":{"/things":{"get":{"operationId":"list","parameters":[{"name":"filter","in":"query","description":"`+long+`",
	  "schema":{"type":"object","description":"`+long+`","enum":[{"description":"Keep. All of this."}],"default":{"description":"Keep. All of this."},
	  "example":{"description":"Keep. All of this."},"properties":{"x":{"type":"string","description":"`+long+`"}}}}],
	"responses":{"204":{"description":"done"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Find("/things")
	b, err := Bind("GET", "/things", item, item.Get, &BindOptions{NoOutputSchema: true, SchemaBudget: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Degraded) == 0 {
		t.Fatalf("not cut: %v", b.InputSchema)
	}
	s := item.Get.Parameters[0].Value.Schema.Value
	for what, v := range map[string]any{"enum": s.Enum[0], "default": s.Default, "example": s.Example} {
		if m, _ := v.(map[string]any); m["description"] != "Keep. All of this." {
			t.Errorf("the document's %s is now %v", what, v)
		}
	}
	got, _ := json.Marshal(b.InputSchema)
	if !strings.Contains(string(got), `"default":{"description":"Keep. All of this."}`) {
		t.Errorf("the tool's default was changed: %s", got)
	}
}

// TestTupleOutputCountsWhatStays: an output schema is loosened (see loosen),
// which drops a tuple's prefixItems and items; what they held must not count
// against the budget, or an output schema that fits is left out.
func TestTupleOutputCountsWhatStays(t *testing.T) {
	long := strings.Repeat("A long sentence about one element of the pair. ", 40)
	doc, err := ParseDocument(context.Background(), []byte(`{"openapi":"3.1.0","info":{"title":"t","version":"1"},
	"paths":{"/pair":{"get":{"operationId":"pair","responses":{"200":{"description":"ok","content":{"application/json":{"schema":
	  {"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string","description":"`+long+`"}],"items":{"description":"`+long+`"}}}}}}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	item := doc.T.Paths.Find("/pair")
	full, err := Bind("GET", "/pair", item, item.Get, nil)
	if err != nil || full.OutputSchema == nil {
		t.Fatalf("unbounded: %v, %v", full, err)
	}
	budget := jsonSize(full.InputSchema) + jsonSize(full.OutputSchema)
	b, err := Bind("GET", "/pair", item, item.Get, &BindOptions{SchemaBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	if b.OutputSchema == nil || len(b.Degraded) > 0 {
		t.Errorf("a %d-byte output schema left out at a budget of %d: %v", jsonSize(full.OutputSchema), budget, b.Degraded)
	}
}
