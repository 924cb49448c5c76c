package gateway

import (
	"maps"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/tagging"
)

// operationPointer is the JSON pointer of op in its document.
func operationPointer(op tagging.Operation) string {
	return "/paths/" + pointerEscape(op.Path) + "/" + strings.ToLower(op.Method)
}

// Facts describes every tool for the audit: its operation, hints and their
// provenance, security, a hash of its input schema, and where the operation
// stands in its document.
func (c *Catalog) Facts() []annotations.ToolFacts {
	out := make([]annotations.ToolFacts, 0, len(c.Tools))
	for _, t := range c.Tools {
		op := t.Operation
		f := annotations.ToolFacts{
			Name:              t.Tool.Name,
			SourceName:        t.SourceName,
			Mangled:           t.Mangled,
			Upstream:          t.Upstream,
			Method:            op.Method,
			Path:              op.Path,
			OperationID:       op.Operation.OperationID,
			Description:       strings.TrimSpace(op.Operation.Description + " " + op.Operation.Summary),
			Tags:              op.Operation.Tags,
			Annotations:       t.Tool.Annotations,
			Provenance:        t.Derived.Provenance,
			Large:             t.Derived.Large,
			Security:          []annotations.SecurityAlternative{},
			InputSchemaSHA256: t.Binding.DeclaredInputSHA256(),
			Source:            t.Source,
			Location:          operationPointer(op),
			RefusedHeaders:    t.Binding.RefusedHeaders,
			NameTakenBy:       t.NameTakenBy,
		}
		if o := op.Operation.Origin; o != nil && o.Key != nil {
			f.Line = o.Key.Line
		}
		for _, req := range t.Security {
			alt := annotations.SecurityAlternative{}
			for _, name := range slices.Sorted(maps.Keys(req)) {
				alt = append(alt, annotations.SecurityRequirement{Scheme: name, Scopes: req[name]})
			}
			f.Security = append(f.Security, alt)
		}
		out = append(out, f)
	}
	return out
}

// pointerEscape escapes a JSON pointer token (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
