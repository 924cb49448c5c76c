package annotations_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
)

func ptr(b bool) *bool { return &b }

// hints is the expected value of the four hints, in a comparable form.
type hints struct {
	readOnly, destructive, idempotent, openWorld bool
}

func gotHints(t *testing.T, a *mcp.ToolAnnotations) hints {
	t.Helper()
	if a == nil {
		t.Fatal("Annotations is nil")
	}
	if a.DestructiveHint == nil {
		t.Fatal("DestructiveHint is nil: the protocol default (true) would apply")
	}
	if a.OpenWorldHint == nil {
		t.Fatal("OpenWorldHint is nil: the protocol default (true) would apply")
	}
	return hints{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}
}

// prov builds a Provenance whose four hints share src, for the named sets.
func prov(src string) annotations.Provenance {
	return annotations.Provenance{ReadOnly: src, Destructive: src, Idempotent: src, OpenWorld: src}
}

// byMethod is the provenance when only the method speaks: readOnly and
// destructive from the method; idempotent from readOnly or the method.
func byMethod(method string, readOnly bool) annotations.Provenance {
	p := annotations.Provenance{ReadOnly: "method:" + method, Destructive: "method:" + method, Idempotent: "method:" + method, OpenWorld: "default"}
	if readOnly {
		p.Idempotent = "readOnly"
	}
	return p
}

func TestDerive(t *testing.T) {
	const ext = annotations.Extension
	tests := []struct {
		name  string
		in    annotations.Input
		rules *annotations.Rules
		want  hints
		prov  annotations.Provenance
		title string
		large bool
	}{
		// Level 4: the HTTP method.
		{name: "method GET", in: annotations.Input{Method: "GET"},
			want: hints{true, false, true, false}, prov: byMethod("GET", true)},
		{name: "method HEAD", in: annotations.Input{Method: "HEAD"},
			want: hints{true, false, true, false}, prov: byMethod("HEAD", true)},
		{name: "method OPTIONS", in: annotations.Input{Method: "OPTIONS"},
			want: hints{true, false, true, false}, prov: byMethod("OPTIONS", true)},
		{name: "method lower-case get", in: annotations.Input{Method: "get"},
			want: hints{true, false, true, false}, prov: byMethod("GET", true)},
		{name: "method POST", in: annotations.Input{Method: "POST"},
			want: hints{false, false, false, false}, prov: byMethod("POST", false)},
		{name: "method PATCH", in: annotations.Input{Method: "PATCH"},
			want: hints{false, false, false, false}, prov: byMethod("PATCH", false)},
		{name: "method PUT", in: annotations.Input{Method: "PUT"},
			want: hints{false, false, true, false}, prov: byMethod("PUT", false)},
		{name: "method DELETE", in: annotations.Input{Method: "DELETE"},
			want: hints{false, true, true, false}, prov: byMethod("DELETE", false)},
		{name: "method TRACE", in: annotations.Input{Method: "TRACE"},
			want: hints{false, false, false, false}, prov: byMethod("TRACE", false)},
		{name: "unrelated tags ignored", in: annotations.Input{Method: "POST", Tags: []string{"agent-exposed", "pets", "readonly"}},
			want: hints{false, false, false, false}, prov: byMethod("POST", false)},

		// Level 3: tags, with orchestrator-core's legacy rule.
		{name: "POST agent-readonly", in: annotations.Input{Method: "POST", Tags: []string{"agent-exposed", "agent-readonly"}},
			want: hints{true, false, true, false},
			prov: annotations.Provenance{ReadOnly: "tag:agent-readonly", Destructive: "method:POST", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "PUT agent-destructive", in: annotations.Input{Method: "PUT", Tags: []string{"agent-destructive"}},
			want: hints{false, true, true, false},
			prov: annotations.Provenance{ReadOnly: "method:PUT", Destructive: "tag:agent-destructive", Idempotent: "method:PUT", OpenWorld: "default"}},
		{name: "POST agent-destructive is not idempotent", in: annotations.Input{Method: "POST", Tags: []string{"agent-destructive"}},
			want: hints{false, true, false, false},
			prov: annotations.Provenance{ReadOnly: "method:POST", Destructive: "tag:agent-destructive", Idempotent: "method:POST", OpenWorld: "default"}},
		{name: "PATCH agent-readonly", in: annotations.Input{Method: "PATCH", Tags: []string{"agent-readonly"}},
			want: hints{true, false, true, false},
			prov: annotations.Provenance{ReadOnly: "tag:agent-readonly", Destructive: "method:PATCH", Idempotent: "readOnly", OpenWorld: "default"}},
		// The legacy rule does not reconcile: DELETE stays destructive even when
		// tagged read-only (the audit flags such a tool).
		{name: "DELETE agent-readonly", in: annotations.Input{Method: "DELETE", Tags: []string{"agent-readonly"}},
			want: hints{true, true, true, false},
			prov: annotations.Provenance{ReadOnly: "tag:agent-readonly", Destructive: "method:DELETE", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "GET agent-destructive", in: annotations.Input{Method: "GET", Tags: []string{"agent-destructive"}},
			want: hints{true, true, true, false},
			prov: annotations.Provenance{ReadOnly: "method:GET", Destructive: "tag:agent-destructive", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "both tags on POST", in: annotations.Input{Method: "POST", Tags: []string{"agent-destructive", "agent-readonly"}},
			want: hints{true, true, true, false},
			prov: annotations.Provenance{ReadOnly: "tag:agent-readonly", Destructive: "tag:agent-destructive", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "custom tag names", in: annotations.Input{Method: "POST", Tags: []string{"safe", "danger"}},
			rules: &annotations.Rules{ReadOnlyTag: "safe", DestructiveTag: "danger"},
			want:  hints{true, true, true, false},
			prov:  annotations.Provenance{ReadOnly: "tag:safe", Destructive: "tag:danger", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "custom tag names replace the defaults", in: annotations.Input{Method: "POST", Tags: []string{"agent-readonly", "agent-destructive"}},
			rules: &annotations.Rules{ReadOnlyTag: "safe", DestructiveTag: "danger"},
			want:  hints{false, false, false, false}, prov: byMethod("POST", false)},
		{name: "only the read-only tag renamed", in: annotations.Input{Method: "PUT", Tags: []string{"safe", "agent-destructive"}},
			rules: &annotations.Rules{ReadOnlyTag: "safe"},
			want:  hints{true, true, true, false},
			prov:  annotations.Provenance{ReadOnly: "tag:safe", Destructive: "tag:agent-destructive", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "agent-large", in: annotations.Input{Method: "GET", Tags: []string{"agent-large"}},
			want: hints{true, false, true, false}, large: true,
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Large = "tag:agent-large"; return p }()},
		{name: "custom large tag", in: annotations.Input{Method: "GET", Tags: []string{"agent-large", "bulk"}},
			rules: &annotations.Rules{LargeTag: "bulk"},
			want:  hints{true, false, true, false}, large: true,
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Large = "tag:bulk"; return p }()},
		{name: "custom large tag replaces the default", in: annotations.Input{Method: "GET", Tags: []string{"agent-large"}},
			rules: &annotations.Rules{LargeTag: "bulk"},
			want:  hints{true, false, true, false}, prov: byMethod("GET", true)},

		// OpenWorld default.
		{name: "Rules.OpenWorld flips the default", in: annotations.Input{Method: "GET"},
			rules: &annotations.Rules{OpenWorld: true},
			want:  hints{true, false, true, true}, prov: byMethod("GET", true)},
		{name: "Rules.OpenWorld on DELETE", in: annotations.Input{Method: "DELETE"},
			rules: &annotations.Rules{OpenWorld: true},
			want:  hints{false, true, true, true}, prov: byMethod("DELETE", false)},

		// Level 2: x-mcp-annotations, named sets.
		{name: "READONLY_TOOL on POST", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: "READONLY_TOOL"}},
			want: hints{true, false, true, false}, prov: prov("x-mcp-annotations:READONLY_TOOL")},
		{name: "WRITE_TOOL on GET", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: "WRITE_TOOL"}},
			want: hints{false, false, false, false}, prov: prov("x-mcp-annotations:WRITE_TOOL")},
		{name: "IDEMPOTENT_WRITE_TOOL on POST", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: "IDEMPOTENT_WRITE_TOOL"}},
			want: hints{false, false, true, false}, prov: prov("x-mcp-annotations:IDEMPOTENT_WRITE_TOOL")},
		{name: "DESTRUCTIVE_TOOL on GET", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: "DESTRUCTIVE_TOOL"}},
			want: hints{false, true, true, false}, prov: prov("x-mcp-annotations:DESTRUCTIVE_TOOL")},
		{name: "WRITE_TOOL on DELETE", in: annotations.Input{Method: "DELETE", Extensions: map[string]any{ext: "WRITE_TOOL"}},
			want: hints{false, false, false, false}, prov: prov("x-mcp-annotations:WRITE_TOOL")},
		{name: "named set beats tags", in: annotations.Input{Method: "POST", Tags: []string{"agent-readonly", "agent-destructive"}, Extensions: map[string]any{ext: "WRITE_TOOL"}},
			want: hints{false, false, false, false}, prov: prov("x-mcp-annotations:WRITE_TOOL")},
		{name: "named set beats Rules.OpenWorld", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: "READONLY_TOOL"}},
			rules: &annotations.Rules{OpenWorld: true},
			want:  hints{true, false, true, false}, prov: prov("x-mcp-annotations:READONLY_TOOL")},
		{name: "named set with surrounding space", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: " READONLY_TOOL\n"}},
			want: hints{true, false, true, false}, prov: prov("x-mcp-annotations:READONLY_TOOL")},
		{name: "other extensions ignored", in: annotations.Input{Method: "POST", Extensions: map[string]any{"x-mcp-exposed": true, "x-other": "READONLY_TOOL"}},
			want: hints{false, false, false, false}, prov: byMethod("POST", false)},

		// Level 2: x-mcp-annotations, object form with partial fields.
		{name: "object readOnlyHint on POST", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: map[string]any{"readOnlyHint": true}}},
			want: hints{true, false, true, false},
			prov: annotations.Provenance{ReadOnly: ext, Destructive: "method:POST", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "object readOnlyHint false on GET", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: map[string]any{"readOnlyHint": false}}},
			want: hints{false, false, false, false},
			prov: annotations.Provenance{ReadOnly: ext, Destructive: "method:GET", Idempotent: "method:GET", OpenWorld: "default"}},
		{name: "object destructiveHint false on DELETE", in: annotations.Input{Method: "DELETE", Extensions: map[string]any{ext: map[string]any{"destructiveHint": false}}},
			want: hints{false, false, true, false},
			prov: annotations.Provenance{ReadOnly: "method:DELETE", Destructive: ext, Idempotent: "method:DELETE", OpenWorld: "default"}},
		{name: "object idempotentHint false on GET", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: map[string]any{"idempotentHint": false}}},
			want: hints{true, false, false, false},
			prov: annotations.Provenance{ReadOnly: "method:GET", Destructive: "method:GET", Idempotent: ext, OpenWorld: "default"}},
		{name: "object idempotentHint true on POST", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: map[string]any{"idempotentHint": true}}},
			want: hints{false, false, true, false},
			prov: annotations.Provenance{ReadOnly: "method:POST", Destructive: "method:POST", Idempotent: ext, OpenWorld: "default"}},
		{name: "object openWorldHint", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: map[string]any{"openWorldHint": true}}},
			want: hints{true, false, true, true},
			prov: annotations.Provenance{ReadOnly: "method:GET", Destructive: "method:GET", Idempotent: "readOnly", OpenWorld: ext}},
		{name: "object openWorldHint false beats Rules.OpenWorld", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: map[string]any{"openWorldHint": false}}},
			rules: &annotations.Rules{OpenWorld: true},
			want:  hints{true, false, true, false},
			prov:  annotations.Provenance{ReadOnly: "method:GET", Destructive: "method:GET", Idempotent: "readOnly", OpenWorld: ext}},
		{name: "object all four", in: annotations.Input{Method: "GET", Extensions: map[string]any{ext: map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}}},
			want: hints{false, true, false, true}, prov: prov(ext)},
		{name: "object beats tags", in: annotations.Input{Method: "POST", Tags: []string{"agent-destructive", "agent-readonly"}, Extensions: map[string]any{ext: map[string]any{"destructiveHint": false}}},
			want: hints{true, false, true, false},
			prov: annotations.Provenance{ReadOnly: "tag:agent-readonly", Destructive: ext, Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "empty object speaks for nothing", in: annotations.Input{Method: "PUT", Extensions: map[string]any{ext: map[string]any{}}},
			want: hints{false, false, true, false}, prov: byMethod("PUT", false)},
		{name: "object title only", in: annotations.Input{Method: "GET", OperationID: "list_pets", Extensions: map[string]any{ext: map[string]any{"title": "List the pets"}}},
			want: hints{true, false, true, false}, title: "List the pets",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = ext; return p }()},
		{name: "object empty title falls back to operationId", in: annotations.Input{Method: "GET", OperationID: "list_pets", Extensions: map[string]any{ext: map[string]any{"title": ""}}},
			want: hints{true, false, true, false}, title: "List Pets",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = "operationId"; return p }()},

		// Level 1: configuration override.
		{name: "config beats named set", in: annotations.Input{Method: "DELETE", Extensions: map[string]any{ext: "DESTRUCTIVE_TOOL"},
			Override: &annotations.Override{Destructive: ptr(false)}},
			want: hints{false, false, true, false},
			prov: annotations.Provenance{ReadOnly: "x-mcp-annotations:DESTRUCTIVE_TOOL", Destructive: "config", Idempotent: "x-mcp-annotations:DESTRUCTIVE_TOOL", OpenWorld: "x-mcp-annotations:DESTRUCTIVE_TOOL"}},
		{name: "config all four beats everything", in: annotations.Input{Method: "GET", OperationID: "get_pet", Tags: []string{"agent-readonly", "agent-destructive"},
			Extensions: map[string]any{ext: map[string]any{"readOnlyHint": true, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true, "title": "From extension"}},
			Override:   &annotations.Override{ReadOnly: ptr(false), Destructive: ptr(false), Idempotent: ptr(false), OpenWorld: ptr(false), Title: "From config"}},
			rules: &annotations.Rules{OpenWorld: true},
			want:  hints{false, false, false, false}, title: "From config",
			prov: annotations.Provenance{ReadOnly: "config", Destructive: "config", Idempotent: "config", OpenWorld: "config", Title: "config"}},
		{name: "config beats tags", in: annotations.Input{Method: "POST", Tags: []string{"agent-readonly"}, Override: &annotations.Override{ReadOnly: ptr(false)}},
			want: hints{false, false, false, false},
			prov: annotations.Provenance{ReadOnly: "config", Destructive: "method:POST", Idempotent: "method:POST", OpenWorld: "default"}},
		{name: "config readOnly false on GET", in: annotations.Input{Method: "GET", Override: &annotations.Override{ReadOnly: ptr(false)}},
			want: hints{false, false, false, false},
			prov: annotations.Provenance{ReadOnly: "config", Destructive: "method:GET", Idempotent: "method:GET", OpenWorld: "default"}},
		{name: "config readOnly true on POST makes it idempotent", in: annotations.Input{Method: "POST", Override: &annotations.Override{ReadOnly: ptr(true)}},
			want: hints{true, false, true, false},
			prov: annotations.Provenance{ReadOnly: "config", Destructive: "method:POST", Idempotent: "readOnly", OpenWorld: "default"}},
		{name: "config openWorld only", in: annotations.Input{Method: "PUT", Override: &annotations.Override{OpenWorld: ptr(true)}},
			want: hints{false, false, true, true},
			prov: annotations.Provenance{ReadOnly: "method:PUT", Destructive: "method:PUT", Idempotent: "method:PUT", OpenWorld: "config"}},
		{name: "config mixes with object", in: annotations.Input{Method: "POST", Extensions: map[string]any{ext: map[string]any{"idempotentHint": true}}, Override: &annotations.Override{Destructive: ptr(true)}},
			want: hints{false, true, true, false},
			prov: annotations.Provenance{ReadOnly: "method:POST", Destructive: "config", Idempotent: ext, OpenWorld: "default"}},
		{name: "empty override speaks for nothing", in: annotations.Input{Method: "DELETE", Override: &annotations.Override{}},
			want: hints{false, true, true, false}, prov: byMethod("DELETE", false)},
		{name: "config title", in: annotations.Input{Method: "GET", OperationID: "list_pets", Override: &annotations.Override{Title: "Pets"}},
			want: hints{true, false, true, false}, title: "Pets",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = "config"; return p }()},

		// Title from operationId.
		{name: "title from operationId", in: annotations.Input{Method: "GET", OperationID: "get_workflow_by_id"},
			want: hints{true, false, true, false}, title: "Get Workflow By Id",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = "operationId"; return p }()},
		{name: "camelCase operationId reads as words", in: annotations.Input{Method: "GET", OperationID: "getPetById"},
			want: hints{true, false, true, false}, title: "Get Pet By Id",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = "operationId"; return p }()},
		{name: "x-mcp-title wins over x-mcp-annotations", in: annotations.Input{Method: "GET", OperationID: "list_pets",
			Extensions: map[string]any{annotations.TitleExtension: " Pets ", ext: map[string]any{"title": "List the pets"}}},
			want: hints{true, false, true, false}, title: "Pets",
			prov: func() annotations.Provenance {
				p := byMethod("GET", true)
				p.Title = annotations.TitleExtension
				return p
			}()},
		{name: "config title wins over x-mcp-title", in: annotations.Input{Method: "GET", OperationID: "list_pets",
			Extensions: map[string]any{annotations.TitleExtension: "Pets"}, Override: &annotations.Override{Title: "Config pets"}},
			want: hints{true, false, true, false}, title: "Config pets",
			prov: func() annotations.Provenance { p := byMethod("GET", true); p.Title = "config"; return p }()},
		{name: "no title without operationId", in: annotations.Input{Method: "GET"},
			want: hints{true, false, true, false}, title: "", prov: byMethod("GET", true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := annotations.Derive(tt.in, tt.rules)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			if got := gotHints(t, d.Annotations); got != tt.want {
				t.Errorf("hints (ro, destr, idem, open) = %+v, want %+v", got, tt.want)
			}
			if d.Provenance != tt.prov {
				t.Errorf("Provenance = %+v\nwant %+v", d.Provenance, tt.prov)
			}
			if d.Annotations.Title != tt.title {
				t.Errorf("Title = %q, want %q", d.Annotations.Title, tt.title)
			}
			if d.Large != tt.large {
				t.Errorf("Large = %v, want %v", d.Large, tt.large)
			}
		})
	}
}

// TestDeriveLegacyRule checks orchestrator-core's tag rule over every
// combination of method and tags: readOnly = GET or agent-readonly;
// destructive = DELETE or agent-destructive; idempotent = readOnly or PUT or
// DELETE; openWorld = false.
func TestDeriveLegacyRule(t *testing.T) {
	for _, method := range []string{"GET", "PUT", "POST", "DELETE", "PATCH"} {
		for _, ro := range []bool{false, true} {
			for _, destr := range []bool{false, true} {
				var tags []string
				if ro {
					tags = append(tags, "agent-readonly")
				}
				if destr {
					tags = append(tags, "agent-destructive")
				}
				d, err := annotations.Derive(annotations.Input{Method: method, Tags: tags}, nil)
				if err != nil {
					t.Fatalf("%s %v: %v", method, tags, err)
				}
				wantRO := method == "GET" || ro
				want := hints{
					readOnly:    wantRO,
					destructive: method == "DELETE" || destr,
					idempotent:  wantRO || method == "PUT" || method == "DELETE",
					openWorld:   false,
				}
				if got := gotHints(t, d.Annotations); got != want {
					t.Errorf("%s %v: hints = %+v, want %+v", method, tags, got, want)
				}
			}
		}
	}
}

// TestDeriveNamedSets checks orchestrator-core's four sets whatever the method
// and tags: READONLY (ro, idem), WRITE (none), IDEMPOTENT_WRITE (idem),
// DESTRUCTIVE (idem, destr); openWorld false in all.
func TestDeriveNamedSets(t *testing.T) {
	sets := map[string]hints{
		"READONLY_TOOL":         {readOnly: true, idempotent: true},
		"WRITE_TOOL":            {},
		"IDEMPOTENT_WRITE_TOOL": {idempotent: true},
		"DESTRUCTIVE_TOOL":      {destructive: true, idempotent: true},
	}
	for set, want := range sets {
		for _, method := range []string{"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"} {
			for _, tags := range [][]string{nil, {"agent-readonly"}, {"agent-destructive"}} {
				in := annotations.Input{Method: method, Tags: tags, Extensions: map[string]any{annotations.Extension: set}}
				d, err := annotations.Derive(in, &annotations.Rules{OpenWorld: true})
				if err != nil {
					t.Fatalf("%s %s %v: %v", set, method, tags, err)
				}
				if got := gotHints(t, d.Annotations); got != want {
					t.Errorf("%s %s %v: hints = %+v, want %+v", set, method, tags, got, want)
				}
				if p := prov("x-mcp-annotations:" + set); d.Provenance != p {
					t.Errorf("%s %s %v: Provenance = %+v, want %+v", set, method, tags, d.Provenance, p)
				}
			}
		}
	}
}

func TestDeriveErrors(t *testing.T) {
	tests := []struct {
		name string
		ext  any
		want []string // substrings of the error
	}{
		{"unknown set", "READ_ONLY", []string{"x-mcp-annotations", "unknown set", `"READ_ONLY"`}},
		{"set name is case-sensitive", "readonly_tool", []string{"unknown set", `"readonly_tool"`}},
		{"empty set name", "", []string{"unknown set", `""`}},
		{"non-bool readOnlyHint", map[string]any{"readOnlyHint": "yes"}, []string{"x-mcp-annotations.readOnlyHint", "must be a boolean"}},
		{"non-bool destructiveHint", map[string]any{"destructiveHint": 1.0}, []string{"destructiveHint", "must be a boolean"}},
		{"non-bool idempotentHint", map[string]any{"idempotentHint": "true"}, []string{"idempotentHint", "must be a boolean"}},
		{"null openWorldHint", map[string]any{"openWorldHint": nil}, []string{"openWorldHint", "must be a boolean"}},
		{"non-string title", map[string]any{"title": 3.0}, []string{"x-mcp-annotations.title", "must be a string"}},
		{"unknown field", map[string]any{"readOnly": true}, []string{"x-mcp-annotations", "unknown field", `"readOnly"`}},
		{"unknown field among good ones", map[string]any{"readOnlyHint": true, "dangerous": true}, []string{"unknown field", `"dangerous"`}},
		{"list", []any{"READONLY_TOOL"}, []string{"x-mcp-annotations", "must be a set name or an object", "[]interface {}"}},
		{"bool", true, []string{"must be a set name or an object", "bool"}},
		{"number", 1.0, []string{"must be a set name or an object", "float64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := annotations.Input{Method: "GET", OperationID: "op", Extensions: map[string]any{annotations.Extension: tt.ext}}
			d, err := annotations.Derive(in, nil)
			if err == nil {
				t.Fatalf("Derive succeeded with %+v, want an error", d.Annotations)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "annotations: ") {
				t.Errorf("error %q lacks the \"annotations: \" prefix", msg)
			}
			for _, s := range tt.want {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
			if d.Annotations != nil {
				t.Errorf("Annotations = %+v on error, want nil", d.Annotations)
			}
		})
	}
}

// TestDeriveJSON checks the wire form: every hint is present, whatever its
// value, because the protocol defaults destructive and openWorld to true.
func TestDeriveJSON(t *testing.T) {
	if strings.Contains(os.Getenv("MCPGODEBUG"), "hintomitempty=1") {
		t.Skip("MCPGODEBUG=hintomitempty=1 restores go-sdk's omission of false readOnly/idempotent hints")
	}
	inputs := []annotations.Input{
		{Method: "POST"}, // all four false
		{Method: "GET"},
		{Method: "DELETE", OperationID: "delete_pet"},
		{Method: "PUT", Extensions: map[string]any{annotations.Extension: "WRITE_TOOL"}},
		{Method: "PATCH", Override: &annotations.Override{OpenWorld: ptr(true)}},
	}
	for _, in := range inputs {
		d, err := annotations.Derive(in, nil)
		if err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
		h := gotHints(t, d.Annotations)
		b, err := json.Marshal(d.Annotations)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"readOnlyHint": h.readOnly, "destructiveHint": h.destructive, "idempotentHint": h.idempotent, "openWorldHint": h.openWorld}
		for k, v := range want {
			got, ok := m[k]
			if !ok {
				t.Errorf("%s %s: key %q missing from %s", in.Method, in.OperationID, k, b)
				continue
			}
			if got != v {
				t.Errorf("%s: %q = %v, want %v", b, k, got, v)
			}
		}
		// Marshal through a Tool too, as tools/list does.
		tb, err := json.Marshal(&mcp.Tool{Name: "t", Annotations: d.Annotations})
		if err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if !strings.Contains(string(tb), `"`+k+`":`) {
				t.Errorf("tool JSON %s lacks %q", tb, k)
			}
		}
	}
}

// TestDeriveFromDocument reads x-mcp-annotations the way kin-openapi decodes
// them from YAML, so the type switch matches the loader's value types.
func TestDeriveFromDocument(t *testing.T) {
	const doc = `
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /pets:
    post:
      operationId: create_pet
      tags: [agent-exposed, agent-readonly]
      x-mcp-annotations: IDEMPOTENT_WRITE_TOOL
      responses: {"200": {description: ok}}
    get:
      operationId: list_pets
      x-mcp-annotations:
        openWorldHint: true
        title: Every pet
      responses: {"200": {description: ok}}
  /pets/{id}:
    delete:
      operationId: delete_pet
      tags: [agent-exposed]
      x-mcp-annotations:
        destructiveHint: false
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
    put:
      operationId: put_pet
      x-mcp-annotations:
        readOnlyHint: "no"
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
`
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	derive := func(path, method string) (annotations.Derived, error) {
		op := d.Paths.Value(path).GetOperation(method)
		return annotations.Derive(annotations.Input{Method: method, OperationID: op.OperationID, Tags: op.Tags, Extensions: op.Extensions}, nil)
	}

	got, err := derive("/pets", "POST")
	if err != nil {
		t.Fatal(err)
	}
	if h := gotHints(t, got.Annotations); h != (hints{idempotent: true}) {
		t.Errorf("POST /pets hints = %+v", h)
	}
	if got.Provenance.ReadOnly != "x-mcp-annotations:IDEMPOTENT_WRITE_TOOL" || got.Annotations.Title != "Create Pet" {
		t.Errorf("POST /pets: provenance %+v, title %q", got.Provenance, got.Annotations.Title)
	}

	got, err = derive("/pets", "GET")
	if err != nil {
		t.Fatal(err)
	}
	if h := gotHints(t, got.Annotations); h != (hints{true, false, true, true}) {
		t.Errorf("GET /pets hints = %+v", h)
	}
	if got.Provenance.OpenWorld != "x-mcp-annotations" || got.Annotations.Title != "Every pet" || got.Provenance.Title != "x-mcp-annotations" {
		t.Errorf("GET /pets: provenance %+v, title %q", got.Provenance, got.Annotations.Title)
	}

	got, err = derive("/pets/{id}", "DELETE")
	if err != nil {
		t.Fatal(err)
	}
	if h := gotHints(t, got.Annotations); h != (hints{idempotent: true}) {
		t.Errorf("DELETE /pets/{id} hints = %+v", h)
	}

	if _, err := derive("/pets/{id}", "PUT"); err == nil || !strings.Contains(err.Error(), "readOnlyHint must be a boolean") {
		t.Errorf("PUT /pets/{id}: err = %v, want readOnlyHint must be a boolean", err)
	}
}

func TestTitle(t *testing.T) {
	// Expectations computed with CPython 3.11 on the words Title cuts
	// (separators and camelCase boundaries become spaces, see splitWords):
	//   python3 -c 'print(words.title())'
	tests := []struct {
		in, want string
	}{
		{in: "get_workflow_by_id", want: "Get Workflow By Id"},
		{in: "list_OAuth_clients", want: "List Oauth Clients"},
		{in: "v2items", want: "V2Items"},
		{in: "get_2fa_codes", want: "Get 2Fa Codes"},
		{in: "HTTPServer", want: "Http Server"},
		{in: "getUserByID", want: "Get User By Id"},
		{in: "repos/list-for-org", want: "Repos List For Org"},
		{in: "getPetById", want: "Get Pet By Id"},
		{in: "repos/get", want: "Repos Get"},
		{in: "listCoreV1NamespacedPod", want: "List Core V1 Namespaced Pod"},
		{in: "OAuthToken", want: "Oauth Token"},
		{in: "getAPIKey", want: "Get Api Key"},
		{in: "IOError", want: "Io Error"},
		{in: "get_v1_API_keys_v2", want: "Get V1 Api Keys V2"},
		{in: "élan_vital", want: "Élan Vital"},
		{in: "straße", want: "Straße"},
		{in: "数据_export", want: "数据 Export"},
		{in: "mixed数据Export", want: "Mixed数据Export"},
		{in: "日本語", want: "日本語"},
		{in: "", want: ""},
		{in: "_", want: " "},
		{in: "___", want: "   "},
		{in: "_leading", want: " Leading"},
		{in: "trailing_", want: "Trailing "},
		{in: "__double__under__", want: "  Double  Under  "},
		{in: "a__b", want: "A  B"},
		{in: "get_v1_API_keys", want: "Get V1 Api Keys"},
		{in: "x", want: "X"},
		{in: "X", want: "X"},
		{in: "already Title", want: "Already Title"},
		{in: "ALL_CAPS_NAME", want: "All Caps Name"},
		{in: "123", want: "123"},
		{in: "123abc", want: "123Abc"},
		{in: "abc123def", want: "Abc123Def"},
		{in: "a1b2c3", want: "A1B2C3"},
		{in: "1st_place", want: "1St Place"},
		{in: "o'neil_test", want: "O'Neil Test"},
		{in: "don't", want: "Don'T"},
		{in: "files.get.v2", want: "Files Get V2"},
		{in: "user-id", want: "User Id"},
		{in: "tab\tseparated", want: "Tab\tSeparated"},
		{in: "Ünïcödé_ÄÖÜ", want: "Ünïcödé Äöü"},
		{in: "σοφία", want: "Σοφία"},
		{in: "İstanbul", want: "İstanbul"},
		{in: "i\u0307x", want: "I\u0307X"}, // combining dot above is uncased
		{in: "ǆemal", want: "ǅemal"},       // digraph: title case, not upper case
		{in: "ǅemal", want: "ǅemal"},
		{in: "ǉubljana", want: "ǈubljana"},
		{in: "read_workflow_by_id_api_workflows__workflow_id__get", want: "Read Workflow By Id Api Workflows  Workflow Id  Get"},

		// CPython uses full case mappings (SpecialCasing.txt), final-sigma
		// rules and the Unicode "Cased" property; so must Title.
		{in: "ßeta", want: "Sseta"},
		{in: "ß", want: "Ss"},
		{in: "ﬁle_name", want: "File Name"},
		{in: "ﬀ", want: "Ff"},
		{in: "ΟΔΟΣ_test", want: "Οδος Test"},
		{in: "aİb", want: "A İb"},
		{in: "ʰello", want: "ʰello"},
		{in: "ªb", want: "ªb"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := annotations.Title(tt.in)
			if got != tt.want {
				t.Errorf("Title(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
