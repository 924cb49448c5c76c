package catalog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// Federated is what a federated tool's calls need: the tool is an upstream
// MCP server's, served under the gateway's name for it.
type Federated struct {
	// Name is the tool's name on its upstream.
	Name string
	// Arguments checks a call's arguments before anything is sent: against
	// the input schema the upstream declared (cleaned as the served one is),
	// not the normalised one a client is shown, so that a flattened oneOf
	// still holds.
	Arguments *upstream.ArgumentSchema
	// TrustHints: the upstream's trust_hints. Without it, the gateway's
	// own policy (read-only tokens, step-up) takes a tool whose hints come
	// from the upstream as destructive, unless the reviewed lockfile holds
	// it unchanged.
	TrustHints bool

	declared map[string]any // the input schema as declared, for Arguments
}

// MCPServer is what an MCP upstream offered when it was listed, under the
// gateway's names: its tools are in Catalog.Tools; its prompts and
// resources are here, for serving.
type MCPServer struct {
	Upstream string
	Listing  *federation.Listing
}

// listMCP lists u through o.ListMCP, or connects, lists and disconnects.
func (o *Options) listMCP(ctx context.Context, u *config.Upstream) (*federation.Listing, error) {
	if o.ListMCP != nil {
		return o.ListMCP(ctx, u)
	}
	up, err := federation.New(*u.MCP, &federation.Options{Name: u.Name})
	if err != nil {
		return nil, err
	}
	defer up.Close()
	return up.List(ctx)
}

// addFederated makes the tools of MCP upstream u from its listing (see
// federatedTools). A name another tool holds is an error naming both:
// federated names are never hashed apart, since a served one must not
// change under its clients.
func (c *Catalog) addFederated(namer *tagging.Namer, u *config.Upstream, l *federation.Listing) error {
	byName := make(map[string]*Tool, len(c.Tools))
	for _, t := range c.Tools {
		byName[t.Tool.Name] = t
	}
	var clash error
	mine := map[string]string{} // names this upstream's tools took: the upstream's own name
	tools, notes := federatedTools(namer, u, l, func(name, own string) bool {
		if holder := byName[name]; holder != nil || !namer.Reserve(name) {
			by := "an earlier tool"
			switch {
			case holder != nil:
				by = fmt.Sprintf("%s (%s)", holder.Upstream, describeOp(holder))
			case mine[name] != "":
				by = fmt.Sprintf("%s (tool %s)", u.Name, mine[name])
			}
			clash = cmp.Or(clash, fmt.Errorf("tool name %q is declared by %s and by %s (tool %s): rename one (rename or tool_prefix)", name, by, u.Name, own))
			return false
		}
		mine[name] = own
		return true
	}, func(sel Selection) { c.Selection = append(c.Selection, sel) })
	if clash != nil {
		return clash
	}
	c.Warnings = append(c.Warnings, notes...)
	c.Tools = append(c.Tools, tools...)
	c.MCP = append(c.MCP, &MCPServer{Upstream: u.Name, Listing: l})
	return nil
}

// federatedTools makes the tools of MCP upstream u from its listing: the
// include and exclude globs pick them by their own names, rename or the
// prefix names them (then the namer's client-safe rule), the
// configuration's annotations win over the declared hints, and schemas are
// normalised where strict clients would drop them. claim takes a name for
// the upstream's tool own, or reports it taken (the tool is then not
// made); selected hears what --explain says of each tool. notes are the
// warnings of what was normalised.
func federatedTools(namer *tagging.Namer, u *config.Upstream, l *federation.Listing, claim func(name, own string) bool, selected func(Selection)) (tools []*Tool, notes []string) {
	for _, ut := range l.Tools {
		if ut == nil {
			continue
		}
		reason, ok := selectedName(u, ut.Name)
		sel := Selection{Upstream: u.Name, OperationID: ut.Name, Selected: ok, Reason: reason}
		src := cmp.Or(u.Rename[ut.Name], u.ToolPrefix+ut.Name)
		name := namer.Clean(src)
		if ok && claim(name, ut.Name) {
			t, n := federatedTool(u, ut, name, src)
			for _, note := range n {
				notes = append(notes, fmt.Sprintf("%s: tool %s: %s", u.Name, ut.Name, note))
			}
			tools = append(tools, t)
			sel.Tool = name
		}
		selected(sel)
	}
	return tools, notes
}

// selectedName applies an MCP upstream's include and exclude globs to one
// of its tool names, and says why, as --explain prints it.
func selectedName(u *config.Upstream, name string) (string, bool) {
	match := func(globs []string) string {
		for _, g := range globs {
			if tagging.Glob(strings.TrimSpace(g), name) {
				return g
			}
		}
		return ""
	}
	if g := match(u.Exclude); g != "" {
		return fmt.Sprintf("excluded by glob `%s` of upstream %s", g, u.Name), false
	}
	if len(u.Include) == 0 {
		return "served: a tool of MCP upstream " + u.Name, true
	}
	if g := match(u.Include); g != "" {
		return fmt.Sprintf("included by glob `%s` of upstream %s", g, u.Name), true
	}
	return "excluded: matches no include glob of upstream " + u.Name, false
}

// federatedTool makes one federated tool; notes say what was normalised.
func federatedTool(u *config.Upstream, ut *mcp.Tool, name, src string) (*Tool, []string) {
	declaredIn := schemaMap(ut.InputSchema)
	in, notes := normaliseInput(declaredIn)
	out, outNote := normaliseOutput(schemaMap(ut.OutputSchema))
	if outNote != "" {
		notes = append(notes, outNote)
	}
	var o *annotations.Override
	if ov, ok := u.Annotations[ut.Name]; ok {
		o = &ov
	} else if ov, ok := u.Annotations[name]; ok {
		o = &ov
	}
	d := annotations.Declared(u.Name, ut.Annotations, ut.Title, o)
	title := d.Annotations.Title
	if title == "" {
		title = annotations.Title(ut.Name)
		d.Annotations.Title, d.Provenance.Title = title, "name"
	}
	meta := mcp.Meta{MetaProvenance: d.Provenance}
	maps.Copy(meta, ut.Meta)
	meta[MetaProvenance] = d.Provenance // the upstream's _meta cannot speak for the gateway
	tool := &mcp.Tool{
		Name:        name,
		Title:       title,
		Description: ut.Description,
		InputSchema: in,
		Annotations: d.Annotations,
		Meta:        meta,
		Icons:       ut.Icons,
	}
	if out != nil && !u.NoOutputSchema {
		tool.OutputSchema = out
	}
	t := &Tool{
		Tool:     tool,
		Upstream: u.Name,
		// A federated tool has no HTTP operation: its "operation" names
		// the tool on its upstream, for messages, the audit and the lock.
		Operation: tagging.Operation{Operation: &openapi3.Operation{
			OperationID: ut.Name, Description: ut.Description, Summary: ut.Title,
		}},
		Derived:    d,
		Mangled:    name != src,
		SourceName: src,
		Source:     mcpSource(u),
		Federated: &Federated{
			Name:       ut.Name,
			Arguments:  upstream.NewArgumentSchema(declaredIn),
			TrustHints: u.MCP.TrustHints,
			declared:   declaredIn,
		},
		baseDescription: ut.Description,
	}
	t.size = toolSize(tool)
	// bind, which hashes a REST tool's output schema for the lock, is not
	// run for a federated tool: hash the served one here (before
	// sanitizing, as bind's), so that an upstream's change to it drifts.
	t.outputHashed = true
	if tool.OutputSchema != nil {
		t.outputSHA = schemaSHA256(tool.OutputSchema)
	}
	return t, notes
}

// Relist builds the tools of MCP upstream u anew from a fresh listing, as
// Build would have: for the gateway to serve what an upstream now offers
// (after notifications/tools/list_changed, a periodic re-list, or its
// first answer when it was unreachable at start-up). taken reports whether
// a tool of another upstream holds a name: such a tool is not made, and a
// warning says so (a served name is never taken from its holder). The
// tools come with their texts hashed and, when the catalog sanitizes,
// cleaned; the catalog itself is not changed.
func (c *Catalog) Relist(u *config.Upstream, l *federation.Listing, nameStyle string, taken func(name string) bool) (tools []*Tool, warnings []string) {
	style := tagging.StrictNames
	if nameStyle == "spec" {
		style = tagging.SpecNames
	}
	namer := tagging.NewNamer(style)
	fresh := &Catalog{sanitized: c.sanitized}
	var withheld []string
	tools, notes := federatedTools(namer, u, l, func(name, own string) bool {
		if taken(name) || !namer.Reserve(name) {
			withheld = append(withheld, fmt.Sprintf("%s: tool %s is not served: its name %q is another tool's", u.Name, own, name))
			return false
		}
		return true
	}, func(Selection) {})
	fresh.Tools = tools
	fresh.finishTexts(false)
	return fresh.Tools, append(withheld, notes...)
}

// mcpSource names an MCP upstream's server in the catalog (Tool.Source):
// its URL, its slug, or its command's first word.
func mcpSource(u *config.Upstream) string {
	switch m := u.MCP; {
	case m.URL != "":
		return m.URL
	case m.Server != "":
		return "server:" + m.Server
	case len(m.Command) > 0:
		return "command:" + m.Command[0]
	}
	return "mcp"
}

// schemaMap is a schema as a JSON object: what go-sdk's client decoded
// (any), re-read as maps; nil when it is not an object.
func schemaMap(s any) map[string]any {
	switch v := s.(type) {
	case nil:
		return nil
	case map[string]any:
		return v
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// rootCombinators are the root keywords strict clients drop or refuse
// (the official TS client, Claude Code): a root schema is to be a plain
// object schema.
var rootCombinators = []string{"allOf", "anyOf", "oneOf", "if", "then", "else", "not"}

// normaliseInput returns the input schema a client is shown: a root
// `type: object`, and no root combinator. A root allOf of object schemas
// is flattened (its properties and required lists merged); any other root
// combinator is taken off, its branches' properties offered as optional,
// and the note says the gateway still checks calls against the declared
// schema. schema itself is not changed.
func normaliseInput(schema map[string]any) (map[string]any, []string) {
	var notes []string
	out := map[string]any{}
	maps.Copy(out, schema)
	if t, ok := out["type"]; ok && t != "object" {
		notes = append(notes, fmt.Sprintf("input schema type %v is not object: served as an object schema", t))
	}
	out["type"] = "object"
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	required := requiredOf(out)
	for _, k := range rootCombinators {
		v, ok := out[k]
		if !ok {
			continue
		}
		delete(out, k)
		branches, _ := v.([]any)
		if m, isMap := v.(map[string]any); isMap {
			branches = []any{m}
		}
		for _, b := range branches {
			bm, _ := b.(map[string]any)
			bp, _ := bm["properties"].(map[string]any)
			for name, p := range bp {
				if props == nil {
					props = map[string]any{}
				}
				if _, has := props[name]; !has {
					props[name] = p
				}
			}
			if k == "allOf" {
				required = append(required, requiredOf(bm)...)
			}
		}
		if k == "allOf" {
			notes = append(notes, "its root allOf is flattened into one object schema, which strict clients accept")
		} else {
			notes = append(notes, fmt.Sprintf("its root %s is taken off the served input schema (strict clients drop such a schema); calls are still checked against the declared one", k))
		}
	}
	if props != nil {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = dedupe(required)
	}
	return out, notes
}

// normaliseOutput keeps an output schema whose root is an object schema;
// any other is left out (structuredContent is an object), with a note.
func normaliseOutput(schema map[string]any) (map[string]any, string) {
	if schema == nil {
		return nil, ""
	}
	if t, ok := schema["type"]; ok && t != "object" {
		return nil, fmt.Sprintf("output schema type %v is not object: left out", t)
	}
	for _, k := range rootCombinators {
		if _, ok := schema[k]; ok {
			return nil, fmt.Sprintf("output schema has a root %s, which strict clients refuse: left out", k)
		}
	}
	out := maps.Clone(schema)
	out["type"] = "object"
	return out, ""
}

func requiredOf(s map[string]any) []string {
	var out []string
	list, _ := s["required"].([]any)
	for _, r := range list {
		if name, ok := r.(string); ok {
			out = append(out, name)
		}
	}
	if rs, ok := s["required"].([]string); ok {
		out = append(out, rs...)
	}
	return out
}

func dedupe(list []string) []any {
	seen := map[string]bool{}
	var out []any
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// schemaSHA256 is the hex SHA-256 of a schema's JSON (encoding/json sorts
// object keys, so equal schemas hash alike).
func schemaSHA256(s any) string {
	raw, _ := json.Marshal(s)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
