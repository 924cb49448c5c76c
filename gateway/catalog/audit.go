package catalog

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
// provenance, security, hashes of its input schema, description and title,
// where the operation stands in its document, and, in a catalog built with
// Options.AuditTexts, its texts with where each comes from.
func (c *Catalog) Facts() []annotations.ToolFacts {
	out := make([]annotations.ToolFacts, 0, len(c.Tools))
	for _, t := range c.Tools {
		op := t.Operation
		f := annotations.ToolFacts{
			Name:               t.Tool.Name,
			SourceName:         t.SourceName,
			Mangled:            t.Mangled,
			Upstream:           t.Upstream,
			Method:             op.Method,
			Path:               op.Path,
			OperationID:        op.Operation.OperationID,
			Description:        strings.TrimSpace(op.Operation.Description + " " + op.Operation.Summary),
			Tags:               op.Operation.Tags,
			Annotations:        t.Tool.Annotations,
			Provenance:         t.Derived.Provenance,
			Large:              t.Derived.Large,
			Security:           []annotations.SecurityAlternative{},
			Source:             t.Source,
			NameTakenBy:        t.NameTakenBy,
			DescriptionSHA256:  t.descriptionSHA,
			TitleSHA256:        t.titleSHA,
			OutputSchemaSHA256: t.outputSHA,
			SanitizeText:       c.sanitized,
		}
		if b := t.Binding; b != nil {
			f.InputSchemaSHA256, f.RefusedHeaders, f.Location = b.DeclaredInputSHA256(), b.RefusedHeaders, operationPointer(op)
		} else if fd := t.Federated; fd != nil {
			f.InputSchemaSHA256, f.Location = schemaSHA256(fd.declared), "tools/"+pointerEscape(fd.Name)
		}
		from, to := 0, 0
		if o := op.Operation.Origin; o != nil && o.Key != nil {
			f.Line = o.Key.Line
			from, to = o.Key.Line, o.Key.EndLine
		}
		if t.texts != nil {
			src := c.sources[t.Upstream]
			if src != nil {
				f.OwnHosts = src.hosts
			}
			f.Texts = t.textsWithSources(src, from, to)
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

// textsWithSources returns t's texts, each with the document's strings it
// comes from (see textSource.sources); the operation spans lines [from, to].
// A tool's description joins its operation's summary and description; a
// title made of the operationId comes from it.
func (t *Tool) textsWithSources(src *textSource, from, to int) []annotations.Text {
	out := slices.Clone(t.texts)
	op := t.Operation.Operation
	for i := range out {
		x := &out[i]
		switch x.Field {
		case "/description":
			for _, raw := range []string{op.Summary, op.Description} {
				if raw == "" {
					continue
				}
				srcs := src.sources(raw, false, from, to)
				if len(srcs) == 0 {
					srcs = []annotations.TextSource{{Raw: raw}}
				}
				x.Sources = append(x.Sources, srcs...)
			}
		case "/title", "/annotations/title":
			x.Sources = src.sources(x.Value, false, from, to)
			if x.Sources == nil && t.Derived.Provenance.Title == "operationId" && op.OperationID != "" {
				x.Sources = src.sources(op.OperationID, false, from, to)
			}
		default:
			x.Sources = src.sources(x.Value, x.Name, from, to)
		}
	}
	return out
}
