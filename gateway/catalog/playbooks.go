package catalog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// PlaybookExtension is the OpenAPI operation extension that marks an
// engine's routes: execute, status, cancel or catalog.
const PlaybookExtension = "x-mcp-playbook"

// provPlaybook is the provenance of a playbook tool's hints: a playbook is a
// write (it starts a run), not idempotent (each call is a run), in the
// engine's closed world.
const provPlaybook = "playbook"

// Playbook is what a playbook tool's calls run: the playbook's path on the
// engine and the workload's defaults.
type Playbook struct {
	Path string
	// TaskRequired: a call must be a task where the protocol has tasks
	// (config.PlaybookItem.Task "required").
	TaskRequired bool
	defaults     map[string]any // the workload sent when the caller gives no value, secrets included
}

// IsPlaybook reports whether t runs a playbook rather than calling one REST
// operation: its handler is a runner that polls for minutes, sends progress
// and must not be answered by a path that skips go-sdk.
func (t *Tool) IsPlaybook() bool { return t.Playbook != nil }

// Playbook returns the tool that serves the playbook at path, or nil when
// no exposed playbook has that path (the NoETL-compatible endpoint's
// lookup).
func (c *Catalog) Playbook(path string) *Tool { return c.playbooks.tools[path] }

// Engine returns the routes and options of the playbook engine upstream
// name, or nil when it has no playbooks: the serving state makes its
// runner from them.
func (c *Catalog) Engine(name string) *playbook.Options { return c.engines[name] }

// playbookSet is what the NoETL-compatible endpoint reads: the exposed
// playbooks' tools and the hidden playbooks, by path.
type playbookSet struct {
	tools  map[string]*Tool
	hidden map[string]bool
}

// buildPlaybooks makes u's playbook tools. doc is nil for an engine without
// an OpenAPI document.
//
// The runner that serves the tools is made by gateway.New, with the upstream's
// serving client (see Gateway.startRunners); the catalog keeps the routes and
// options it needs. A catalog route is read here, at build time, through a
// client of its own, without credentials.
func (c *Catalog) buildPlaybooks(ctx context.Context, namer *tagging.Namer, u *config.Upstream, doc *upstream.Document) error {
	p := u.Playbooks
	routes, err := p.Routes()
	if err != nil {
		return err
	}
	catalogRoute := p.Catalog
	if doc != nil {
		marked := markedRoutes(doc.T)
		for _, r := range []struct {
			role string
			to   *playbook.Route
		}{{"execute", &routes.Execute}, {"status", &routes.Status}, {"cancel", &routes.Cancel}} {
			if r.to.IsZero() {
				*r.to = marked[r.role]
			}
		}
		if catalogRoute == "" && !marked["catalog"].IsZero() {
			catalogRoute = marked["catalog"].String()
		}
	}
	if routes.Execute.IsZero() || routes.Status.IsZero() {
		return errNoPlaybookRoutes
	}
	engine := &playbook.Options{
		Routes:           routes,
		PollInterval:     p.PollInterval,
		Timeout:          p.Timeout,
		MaxRuns:          p.MaxRuns,
		MaxRunsPerCaller: p.MaxRunsPerCaller,
		DedupWindow:      p.DedupWindow,
		Terminal:         p.Terminal,
	}
	if err := engine.Check(); err != nil {
		return err
	}
	if c.engines == nil {
		c.engines = map[string]*playbook.Options{}
	}
	c.engines[u.Name] = engine
	items := slices.Clone(p.Items)
	if catalogRoute != "" {
		found, warnings, err := []config.PlaybookItem(nil), []string(nil), error(nil)
		client, cerr := newClient(u, c.bases[u.Name], nil)
		if cerr != nil {
			err = cerr
		} else {
			found, warnings, err = discoverPlaybooks(ctx, client, catalogRoute)
		}
		for _, w := range warnings {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: playbook catalog %s: %s", u.Name, catalogRoute, w))
		}
		if err != nil {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: playbook catalog %s: %v; serving only the configured items", u.Name, catalogRoute, err))
		}
		items = mergeItems(found, items)
	}
	if c.playbooks.tools == nil {
		c.playbooks = playbookSet{tools: map[string]*Tool{}, hidden: map[string]bool{}}
	}
	for _, it := range items {
		if _, dup := c.playbooks.tools[it.Path]; dup || c.playbooks.hidden[it.Path] {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: playbook %s is served by an earlier upstream already; skipped", u.Name, it.Path))
			continue
		}
		if !it.Exposed() {
			c.playbooks.hidden[it.Path] = true
			continue
		}
		t, err := playbookToolFor(namer, u, routes.Execute, it)
		if err != nil {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: playbook %s: skipped: %v", u.Name, it.Path, err))
			continue
		}
		c.Tools = append(c.Tools, t)
		c.playbooks.tools[it.Path] = t
		c.addPlaybookMCP(u, t, it, c.sanitized)
	}
	return nil
}

// withoutPlaybookRoutes drops from ops an engine's own playbook routes
// (execute, status, cancel, catalog: configured or marked x-mcp-playbook).
// Served as REST tools they would bypass what the playbook tools enforce:
// execute would start any playbook by path, hidden ones included, and the
// catalog would list them, secret defaults and all. The selection says why.
func (c *Catalog) withoutPlaybookRoutes(u *config.Upstream, doc *upstream.Document, ops []tagging.Operation) []tagging.Operation {
	routes := map[string]bool{}
	configured, _ := u.Playbooks.Routes() // checked by Config.Validate
	for _, r := range []playbook.Route{configured.Execute, configured.Status, configured.Cancel} {
		if !r.IsZero() {
			routes[r.String()] = true
		}
	}
	if cr, err := playbook.ParseRoute(u.Playbooks.Catalog); err == nil {
		routes[cr.String()] = true
	}
	for _, r := range markedRoutes(doc.T) {
		routes[r.String()] = true
	}
	kept := ops[:0]
	for _, op := range ops {
		if routes[op.Method+" "+op.Path] {
			c.skipSelection(u.Name, op, errors.New("a playbook route of this upstream: its playbooks are served as playbook tools, and the route itself is not a tool"))
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// markedRoutes finds the operations marked x-mcp-playbook, by role.
func markedRoutes(doc *openapi3.T) map[string]playbook.Route {
	out := map[string]playbook.Route{}
	if doc == nil || doc.Paths == nil {
		return out
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if role, ok := op.Extensions[PlaybookExtension].(string); ok {
				out[role] = playbook.Route{Method: strings.ToUpper(method), Path: path}
			}
		}
	}
	return out
}

// discoverPlaybooks reads the engine's catalog: {"playbooks": [...]},
// {"items": [...]} or a bare list of {path, description, workload,
// metadata: {exposes_as_mcp}, secrets, content}. content (or source) is the
// playbook's YAML, whose # ui: directives refine its inputs (directives.go);
// the warnings say which were ignored.
func discoverPlaybooks(ctx context.Context, client *upstream.Client, route string) ([]config.PlaybookItem, []string, error) {
	rt, err := playbook.ParseRoute(route)
	if err != nil {
		return nil, nil, err
	}
	a, err := client.Send(ctx, rt.Method, rt.Path, nil, upstream.Credentials{})
	if err != nil {
		return nil, nil, err
	}
	if a.Status != http.StatusOK {
		return nil, nil, fmt.Errorf("the engine answered HTTP %d", a.Status)
	}
	type entry struct {
		config.PlaybookItem
		Metadata *struct {
			ExposesAsMCP *bool `json:"exposes_as_mcp"`
		} `json:"metadata"`
		Secrets []string `json:"secrets"`
		Content string   `json:"content"`
		Source  string   `json:"source"`
	}
	var list []entry
	var wrapped struct {
		Playbooks []entry `json:"playbooks"`
		Items     []entry `json:"items"`
	}
	if err := json.Unmarshal(a.Body, &list); err != nil {
		if err := json.Unmarshal(a.Body, &wrapped); err != nil {
			return nil, nil, fmt.Errorf("the answer is not a list of playbooks")
		}
		list = append(wrapped.Playbooks, wrapped.Items...)
	}
	out := make([]config.PlaybookItem, 0, len(list))
	var warnings []string
	for _, e := range list {
		it := e.PlaybookItem
		if it.Path == "" {
			continue
		}
		if e.Metadata != nil && e.Metadata.ExposesAsMCP != nil {
			it.ExposesAsMCP = e.Metadata.ExposesAsMCP
		}
		for _, k := range e.Secrets {
			if it.Inputs == nil {
				it.Inputs = map[string]config.PlaybookInput{}
			}
			in := it.Inputs[k]
			in.Secret = true
			it.Inputs[k] = in
		}
		if src := cmp.Or(e.Content, e.Source); src != "" {
			warnings = append(warnings, applySource(&it, src)...)
			it.Source = src
		}
		out = append(out, it)
	}
	return out, warnings, nil
}

// mergeItems lays the configured items over the discovered ones (by path):
// a configured field that is set wins; a configured item the engine does
// not list is kept.
func mergeItems(found, configured []config.PlaybookItem) []config.PlaybookItem {
	byPath := map[string]int{}
	out := slices.Clone(found)
	for i, it := range out {
		byPath[it.Path] = i
	}
	for _, c := range configured {
		i, ok := byPath[c.Path]
		if !ok {
			out = append(out, c)
			continue
		}
		d := &out[i]
		if c.Name != "" {
			d.Name = c.Name
		}
		if c.Description != "" {
			d.Description = c.Description
		}
		if c.Workload != nil {
			d.Workload = c.Workload
		}
		if c.ExposesAsMCP != nil {
			d.ExposesAsMCP = c.ExposesAsMCP
		}
		d.Destructive = d.Destructive || c.Destructive
		if c.Task != "" {
			d.Task = c.Task
		}
		if c.Inputs != nil {
			if d.Inputs == nil {
				d.Inputs = map[string]config.PlaybookInput{}
			}
			maps.Copy(d.Inputs, c.Inputs)
		}
	}
	return out
}

// playbookToolFor makes one playbook's tool. Its Operation is synthesized —
// the execute route, with the workload as its JSON body — so that the
// catalog's machinery (binding, validation, size budget, audit, lockfile)
// treats it like any other tool.
func playbookToolFor(namer *tagging.Namer, u *config.Upstream, execute playbook.Route, it config.PlaybookItem) (*Tool, error) {
	desc := it.Description
	if desc == "" {
		desc = "Runs playbook " + it.Path + "."
	}
	schema := workloadSchema(it)
	responses := openapi3.NewResponses()
	op := &openapi3.Operation{
		OperationID: "playbook:" + it.Path,
		Summary:     desc,
		Tags:        []string{"playbook"},
		RequestBody: &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithJSONSchema(schema)},
		Responses:   responses,
	}
	top := tagging.Operation{Method: execute.Method, Path: execute.Path, PathItem: &openapi3.PathItem{}, Operation: op}
	src := it.Name
	if src == "" {
		src = u.ToolPrefix + it.Path
	}
	name, mangled := namer.Name(top, src)
	d := playbookAnnotations(name, u, it)
	meta := mcp.Meta{MetaProvenance: d.Provenance, MetaPlaybook: it.Path}
	t := &Tool{
		Tool: &mcp.Tool{
			Name:        name,
			Title:       d.Annotations.Title,
			Description: desc + "\n\nStarts a run of the playbook and waits for its result; long runs report progress.",
			Annotations: d.Annotations,
			Meta:        meta,
		},
		Upstream:   u.Name,
		Operation:  top,
		Derived:    d,
		Mangled:    mangled,
		SourceName: src,
		Source:     "playbook " + it.Path,
		Playbook:   &Playbook{Path: it.Path, TaskRequired: it.Task == "required", defaults: maps.Clone(it.Workload)},
	}
	nu := *u
	nu.NoOutputSchema = true // a run's result has no declared shape
	if err := t.bind(&nu, u.MaxToolBytes); err != nil {
		return nil, err
	}
	return t, nil
}

// MetaPlaybook is the tool _meta key naming a playbook tool's path.
const MetaPlaybook = "mcpgate/playbook"

// playbookAnnotations sets all four hints explicitly: not read-only, not
// idempotent, not open-world, destructive only when configured; the
// upstream's annotations override wins, as for any tool.
func playbookAnnotations(name string, u *config.Upstream, it config.PlaybookItem) annotations.Derived {
	f := false
	ro, idem, ow, destr := f, f, f, it.Destructive
	p := annotations.Provenance{ReadOnly: provPlaybook, Idempotent: provPlaybook, OpenWorld: provPlaybook, Destructive: provPlaybook, Title: "name"}
	if it.Destructive {
		p.Destructive = "config"
	}
	title := annotations.Title(name)
	if o := overrideFor(u, name, "playbook:"+it.Path); o != nil {
		for _, h := range []struct {
			v    *bool
			to   *bool
			prov *string
		}{{o.ReadOnly, &ro, &p.ReadOnly}, {o.Idempotent, &idem, &p.Idempotent}, {o.OpenWorld, &ow, &p.OpenWorld}, {o.Destructive, &destr, &p.Destructive}} {
			if h.v != nil {
				*h.to, *h.prov = *h.v, "config"
			}
		}
		if o.Title != "" {
			title, p.Title = o.Title, "config"
		}
	}
	return annotations.Derived{
		Annotations: &mcp.ToolAnnotations{Title: title, ReadOnlyHint: ro, IdempotentHint: idem, OpenWorldHint: &ow, DestructiveHint: &destr},
		Provenance:  p,
	}
}

// workloadSchema is the input schema of a playbook: one optional property
// per workload key, typed after its default. A null or empty default is an
// unconstrained value (never {"type": "null"}, which NoETL emits and which
// refuses every real value); a secret's default is never shown.
func workloadSchema(it config.PlaybookItem) *openapi3.Schema {
	s := openapi3.NewObjectSchema()
	for _, k := range slices.Sorted(maps.Keys(it.Workload)) {
		v := it.Workload[k]
		in := it.Inputs[k]
		p := &openapi3.Schema{}
		switch x := v.(type) {
		case string:
			if x != "" {
				p.Type = &openapi3.Types{openapi3.TypeString}
			}
		case bool:
			p.Type = &openapi3.Types{openapi3.TypeBoolean}
		case int, int64, uint64:
			p.Type = &openapi3.Types{openapi3.TypeInteger}
		case float64:
			if x == float64(int64(x)) {
				p.Type = &openapi3.Types{openapi3.TypeInteger}
			} else {
				p.Type = &openapi3.Types{openapi3.TypeNumber}
			}
		case []any:
			if len(x) > 0 {
				p.Type = &openapi3.Types{openapi3.TypeArray}
			}
		case map[string]any:
			if len(x) > 0 {
				p.Type = &openapi3.Types{openapi3.TypeObject}
			}
		}
		if p.Type != nil && !in.Secret {
			p.Default = v
		}
		p.Description = in.Description
		if in.Secret {
			p.Description = strings.TrimSpace(p.Description + " (secret: its default is configured and not shown)")
		}
		if len(in.Enum) > 0 {
			p.Enum = in.Enum
		}
		s.WithProperty(k, p)
	}
	return s
}

// Workload is the defaults with the caller's arguments over them: what a
// run is sent.
func (pb *Playbook) Workload(args map[string]any) map[string]any {
	w := maps.Clone(pb.defaults)
	if w == nil {
		w = map[string]any{}
	}
	maps.Copy(w, args)
	return w
}

var errNoPlaybookRoutes = errors.New("no execute and status routes: set playbooks.execute and playbooks.status, or mark the engine's operations x-mcp-playbook: execute|status")
