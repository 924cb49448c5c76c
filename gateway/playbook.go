package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/internal/caller"
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

// playbookTool is what a playbook tool's handler needs.
type playbookTool struct {
	path     string
	runner   *playbook.Runner
	defaults map[string]any // the workload sent when the caller gives no value, secrets included
}

// IsPlaybook reports whether t runs a playbook rather than calling one REST
// operation: its handler is a runner that polls for minutes, sends progress
// and must not be answered by a path that skips go-sdk.
func (t *Tool) IsPlaybook() bool { return t.playbook != nil }

// playbookSet is what the NoETL-compatible endpoint reads: the exposed
// playbooks' tools and the hidden playbooks, by path.
type playbookSet struct {
	tools  map[string]*Tool
	hidden map[string]bool
}

// buildPlaybooks makes u's playbook tools. doc is nil for an engine without
// an OpenAPI document.
//
// The runner that serves the tools is made by New, with the upstream's
// serving client (see Gateway.startRunners); the catalog keeps the routes and
// options it needs. A catalog route is read here, at build time, through a
// client of its own, without credentials.
func (c *Catalog) buildPlaybooks(ctx context.Context, namer *tagging.Namer, u *Upstream, doc *upstream.Document) error {
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
		found, warnings, err := []PlaybookItem(nil), []string(nil), error(nil)
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
	}
	return nil
}

// withoutPlaybookRoutes drops from ops an engine's own playbook routes
// (execute, status, cancel, catalog: configured or marked x-mcp-playbook).
// Served as REST tools they would bypass what the playbook tools enforce:
// execute would start any playbook by path, hidden ones included, and the
// catalog would list them, secret defaults and all. The selection says why.
func (c *Catalog) withoutPlaybookRoutes(u *Upstream, doc *upstream.Document, ops []tagging.Operation) []tagging.Operation {
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
func discoverPlaybooks(ctx context.Context, client *upstream.Client, route string) ([]PlaybookItem, []string, error) {
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
		PlaybookItem
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
	out := make([]PlaybookItem, 0, len(list))
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
				it.Inputs = map[string]PlaybookInput{}
			}
			in := it.Inputs[k]
			in.Secret = true
			it.Inputs[k] = in
		}
		if src := cmp.Or(e.Content, e.Source); src != "" {
			warnings = append(warnings, applySource(&it, src)...)
		}
		out = append(out, it)
	}
	return out, warnings, nil
}

// mergeItems lays the configured items over the discovered ones (by path):
// a configured field that is set wins; a configured item the engine does
// not list is kept.
func mergeItems(found, configured []PlaybookItem) []PlaybookItem {
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
		if c.Inputs != nil {
			if d.Inputs == nil {
				d.Inputs = map[string]PlaybookInput{}
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
func playbookToolFor(namer *tagging.Namer, u *Upstream, execute playbook.Route, it PlaybookItem) (*Tool, error) {
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
		playbook:   &playbookTool{path: it.Path, defaults: maps.Clone(it.Workload)},
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
func playbookAnnotations(name string, u *Upstream, it PlaybookItem) annotations.Derived {
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
func workloadSchema(it PlaybookItem) *openapi3.Schema {
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

// playbookHandler runs t's playbook for a tools/call on /mcp (or stdio).
// Progress goes to the client when it sent a progressToken and the answer
// is a stream: SSE over HTTP (go-sdk drops it from a JSON answer), or stdio.
// Cancellation: the run is left when the handler's ctx ends — the client
// hung up (the front door), or notifications/cancelled in stateful mode and
// over stdio (go-sdk) — and cancelled upstream after the runner's linger; a
// notifications/cancelled to a stateless gateway (the front door, see
// cancel.go) cancels it upstream at once.
func (g *Gateway) playbookHandler(t *Tool) mcp.ToolHandler {
	pb := t.playbook
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil {
			var cancel context.CancelFunc
			ctx, cancel = g.calls.join(ctx, req.Extra.Header)
			defer cancel()
		}
		args, cred, err := g.startPlaybookCall(ctx, t, req, req.Params.Arguments)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		run := playbook.Request{Tool: t.Tool.Name, Path: pb.path, Workload: pb.workload(args), Cred: cred, Caller: g.callerID(req)}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			run.Progress = func(p playbook.Progress) {
				// Errors are the client's stream gone: the run carries on
				// for a re-send, so there is nothing to do.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(p.Polls), Message: progressMessage(pb.path, p),
				})
			}
		}
		out := pb.runner.Run(ctx, run)
		g.logRun(ctx, t, out)
		return out.Result, nil
	}
}

// startPlaybookCall is what every path that runs a playbook (tools/call on
// /mcp or stdio, a task, the NoETL endpoint) does first: decode and
// validate the arguments raw, then obtain the upstream credential. A call
// refused here is logged and counted as callTool counts a REST call's, and
// the error is the text for the caller.
func (g *Gateway) startPlaybookCall(ctx context.Context, t *Tool, req *mcp.CallToolRequest, raw json.RawMessage) (map[string]any, upstream.Credentials, error) {
	args, err := upstream.DecodeArguments(raw)
	if err == nil {
		err = t.Binding.Validate(args)
	}
	if err != nil {
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeInvalidArguments, Cause: err})
		return nil, upstream.Credentials{}, err
	}
	cred, err := g.credentials(ctx, t, req)
	if err != nil {
		g.logCall(ctx, t, req, upstream.Report{Outcome: upstream.OutcomeUnreachable, Cause: err})
		return nil, upstream.Credentials{}, fmt.Errorf("the gateway could not obtain a credential for upstream %s", t.Upstream)
	}
	return args, cred, nil
}

// workload is the defaults with the caller's arguments over them.
func (pb *playbookTool) workload(args map[string]any) map[string]any {
	w := maps.Clone(pb.defaults)
	if w == nil {
		w = map[string]any{}
	}
	maps.Copy(w, args)
	return w
}

// callerID names who makes a call for the playbook runner's dedup table
// and per-caller run cap (playbook.Request.Caller): caller.Caller.RunKey
// over HTTP ("" for a caller with no credential at all, whose calls are
// never merged); over stdio, the one client at the other end of the pipe.
func (g *Gateway) callerID(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.Header == nil {
		return "stdio"
	}
	return caller.Of(req.Extra.TokenInfo, req.Extra.Header).RunKey()
}

// progressMessage is what a client shows while a run goes on.
func progressMessage(path string, p playbook.Progress) string {
	return fmt.Sprintf("playbook %s running (poll %d)", path, p.Polls) + progressDetail(p)
}

// progressDetail is what the engine said of a run's progress, for a message:
// ", 40%" (a fraction up to 1 is read as one of 1, else as percent) and
// ": its own words", each when it said them.
func progressDetail(p playbook.Progress) string {
	var msg string
	if p.Fraction != nil {
		f := *p.Fraction
		if f <= 1 {
			f *= 100
		}
		msg += fmt.Sprintf(", %.0f%%", f)
	}
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// logRun writes the line a playbook call leaves: never the workload.
//
// It also counts the run in mcpgate_playbook_runs_total, so that both front
// ends (/mcp and the NoETL endpoint) are counted.
func (g *Gateway) logRun(ctx context.Context, t *Tool, out *playbook.Outcome) {
	g.metrics.playbookRun(t.Tool.Name, string(out.State))
	// A busy refusal is info, not a warning: a caller over its cap could
	// flood the log at warn level; mcpgate_playbook_runs_total{outcome="busy"}
	// counts them.
	level := slog.LevelInfo
	if out.State == playbook.TimedOut || out.State == playbook.NotStarted && out.HTTPStatus >= 500 {
		level = slog.LevelWarn
	}
	g.logger.LogAttrs(ctx, level, "playbook call",
		slog.String("tool", t.Tool.Name), slog.String("upstream", t.Upstream),
		slog.String("execution_id", out.ExecutionID), slog.String("outcome", string(out.State)),
		slog.Int("polls", out.Polls), slog.Bool("attached", out.Attached), slog.String("upstream_cancel", upstreamCancel(out)))
}

// upstreamCancel says on a call's log line what became of its run upstream:
// "sent" (this call's outcome cancelled it), "planned" (the call left a run
// still going, which the runner cancels at once or after its linger, and
// logs on its own "playbook run" line), or "none".
func upstreamCancel(out *playbook.Outcome) string {
	switch {
	case out.CancelSent:
		return "sent"
	case out.CancelPlanned:
		return "planned"
	}
	return "none"
}

var errNoPlaybookRoutes = errors.New("no execute and status routes: set playbooks.execute and playbooks.status, or mark the engine's operations x-mcp-playbook: execute|status")
