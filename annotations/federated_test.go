package annotations

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestDeclared(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name     string
		declared *mcp.ToolAnnotations
		title    string
		o        *Override
		want     mcp.ToolAnnotations
		prov     Provenance
	}{
		{"nothing declared: the spec's defaults", nil, "", nil,
			mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes},
			Provenance{ReadOnly: "mcp-default", Destructive: "mcp-default", Idempotent: "mcp-default", OpenWorld: "mcp-default"}},
		{"read-only declared", &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Read"}, "", nil,
			mcp.ToolAnnotations{Title: "Read", ReadOnlyHint: true, DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &yes},
			Provenance{ReadOnly: "upstream:fs", Destructive: "readOnly", Idempotent: "readOnly", OpenWorld: "mcp-default", Title: "upstream:fs"}},
		{"destructive false and closed world declared", &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no, IdempotentHint: true}, "Move", nil,
			mcp.ToolAnnotations{Title: "Move", DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no},
			Provenance{ReadOnly: "mcp-default", Destructive: "upstream:fs", Idempotent: "upstream:fs", OpenWorld: "upstream:fs", Title: "upstream:fs"}},
		{"config wins", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, "", &Override{ReadOnly: &no, Destructive: &yes, Title: "Move it"},
			mcp.ToolAnnotations{Title: "Move it", DestructiveHint: &yes, OpenWorldHint: &yes},
			Provenance{ReadOnly: "config", Destructive: "config", Idempotent: "mcp-default", OpenWorld: "mcp-default", Title: "config"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Declared("fs", tt.declared, tt.title, tt.o)
			a := d.Annotations
			if a.Title != tt.want.Title || a.ReadOnlyHint != tt.want.ReadOnlyHint || *a.DestructiveHint != *tt.want.DestructiveHint ||
				a.IdempotentHint != tt.want.IdempotentHint || *a.OpenWorldHint != *tt.want.OpenWorldHint {
				t.Errorf("annotations %+v (destructive %v, open %v), want %+v", a, *a.DestructiveHint, *a.OpenWorldHint, tt.want)
			}
			if d.Provenance != tt.prov {
				t.Errorf("provenance %+v, want %+v", d.Provenance, tt.prov)
			}
		})
	}
}
