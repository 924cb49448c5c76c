package catalog

import (
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/mcpgate/mcpgate/gateway/catalog/search"
)

// SearchDoc returns what search mode indexes of t (issue 23 §3): its
// name, title and description (without the notes the binding appends,
// which say how the gateway cut the tool, not what it does), its
// top-level parameters, the operation's tags, method and path, and the
// upstream's name.
//
// A parameter's description is the input schema's, else, when the size
// budget cut it from the schema (Kubernetes' tools keep only their
// arguments' names), the operation's own parameter's of that name.
func (t *Tool) SearchDoc() search.Doc {
	d := search.Doc{
		Name:     t.Tool.Name,
		Title:    t.Tool.Title,
		Method:   t.Operation.Method,
		Path:     t.Operation.Path,
		Upstream: t.Upstream,
	}
	d.Description = t.Tool.Description
	if b := t.baseDescription; b != "" && strings.HasPrefix(d.Description, b) {
		d.Description = b
	}
	var opParams map[string]string
	if op := t.Operation.Operation; op != nil {
		d.Tags = op.Tags
		opParams = paramDescriptions(t.Operation.PathItem, op)
	}
	if t.paramDescriptions != nil {
		opParams = t.paramDescriptions // from a snapshot: no path item
	}
	schema := t.Tool.InputSchema
	if b := t.Binding; b != nil {
		if in, _ := b.RawSchemas(); in != nil && b.DecodeSchemas() == nil {
			schema = b.InputSchema // from a snapshot: decoded once, for the calls too
		}
	}
	props, _ := schemaMap(schema)["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names) // a map's order is not the same twice
	for _, n := range names {
		f := search.Field{Name: n}
		if p, ok := props[n].(map[string]any); ok {
			f.Description, _ = p["description"].(string)
		}
		if f.Description == "" {
			f.Description = opParams[n]
		}
		d.Params = append(d.Params, f)
	}
	return d
}

// paramDescriptions maps the names of op's parameters (the path item's
// too, op's own first) to their descriptions.
func paramDescriptions(item *openapi3.PathItem, op *openapi3.Operation) map[string]string {
	m := map[string]string{}
	add := func(ps openapi3.Parameters) {
		for _, p := range ps {
			if p == nil || p.Value == nil || p.Value.Description == "" {
				continue
			}
			if _, ok := m[p.Value.Name]; !ok {
				m[p.Value.Name] = p.Value.Description
			}
		}
	}
	add(op.Parameters)
	if item != nil {
		add(item.Parameters)
	}
	return m
}
