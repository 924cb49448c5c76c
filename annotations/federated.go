package annotations

import "github.com/modelcontextprotocol/go-sdk/mcp"

// ProvenanceMCPDefault is the provenance of a federated tool's hint that
// neither its server nor the configuration states: the MCP specification's
// default (readOnlyHint false, destructiveHint true, idempotentHint false,
// openWorldHint true), the most careful reading.
const ProvenanceMCPDefault = "mcp-default"

// ProvenanceUpstream is the provenance of a hint an upstream MCP server
// declared: "upstream:NAME".
func ProvenanceUpstream(name string) string { return "upstream:" + name }

// Declared gives a federated tool its hints: the configuration's override
// first ("config"), then what the upstream MCP server named upstream
// declared ("upstream:NAME"), then the specification's default
// ("mcp-default"), so that all four are explicit, each with who says so.
// A read-only tool's unstated destructive and idempotent hints are false
// and true ("readOnly"), as for REST tools: a read destroys nothing and
// repeats. title is the tool's own title when its annotations have none.
func Declared(upstream string, declared *mcp.ToolAnnotations, title string, o *Override) Derived {
	if declared == nil {
		declared = &mcp.ToolAnnotations{}
	}
	if o == nil {
		o = &Override{}
	}
	from := ProvenanceUpstream(upstream)
	var d Derived
	pick := func(override, up *bool, def bool, prov *string) bool {
		switch {
		case override != nil:
			*prov = "config"
			return *override
		case up != nil:
			*prov = from
			return *up
		}
		*prov = ProvenanceMCPDefault
		return def
	}
	p := &d.Provenance
	ro := false
	switch {
	case o.ReadOnly != nil:
		ro, p.ReadOnly = *o.ReadOnly, "config"
	case declared.ReadOnlyHint: // the wire form has no "false, stated"
		ro, p.ReadOnly = true, from
	default:
		p.ReadOnly = ProvenanceMCPDefault
	}
	destructiveDef, idempotentDef := true, false
	destructiveProvDef, idempotentProvDef := "", ""
	if ro {
		destructiveDef, idempotentDef = false, true
		destructiveProvDef, idempotentProvDef = "readOnly", "readOnly"
	}
	destructive := pick(o.Destructive, declared.DestructiveHint, destructiveDef, &p.Destructive)
	if p.Destructive == ProvenanceMCPDefault && destructiveProvDef != "" {
		p.Destructive = destructiveProvDef
	}
	idempotent := pick(o.Idempotent, boolPtrIf(declared.IdempotentHint), idempotentDef, &p.Idempotent)
	if p.Idempotent == ProvenanceMCPDefault && idempotentProvDef != "" {
		p.Idempotent = idempotentProvDef
	}
	openWorld := pick(o.OpenWorld, declared.OpenWorldHint, true, &p.OpenWorld)
	t := declared.Title
	p.Title = from
	switch {
	case o.Title != "":
		t, p.Title = o.Title, "config"
	case t == "" && title != "":
		t = title
	case t == "":
		p.Title = ""
	}
	d.Annotations = &mcp.ToolAnnotations{
		Title:           t,
		ReadOnlyHint:    ro,
		DestructiveHint: ptr(destructive),
		IdempotentHint:  idempotent,
		OpenWorldHint:   ptr(openWorld),
	}
	return d
}

// boolPtrIf reads a hint the wire form carries as a plain bool: true is a
// statement, false may be one or an absence, and is taken as an absence.
func boolPtrIf(b bool) *bool {
	if b {
		return ptr(true)
	}
	return nil
}
