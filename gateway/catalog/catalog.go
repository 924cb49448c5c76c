// Package catalog is the gateway's pure description of what it serves: the
// tools built from each upstream (OpenAPI operations, playbooks), why each
// operation is or is not a tool (explain), the listing that `mcpgate tools`
// prints and the facts that `mcpgate audit` checks. It needs no HTTP server:
// building reads documents (and a playbook engine's catalog route), and
// serving is package gateway's, which makes its clients and runners from
// what a Catalog holds (Client, Engine, Playbook).
package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/gateway/internal/parallel"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
	"github.com/mcpgate/mcpgate/upstream/federation"
	"github.com/mcpgate/mcpgate/upstream/playbook"
)

// MetaProvenance is the tool _meta key holding the provenance of each hint.
const MetaProvenance = "mcpgate/provenance"

// MetaLarge is the tool _meta key set on tools that may return many records.
const MetaLarge = "mcpgate/large"

// Tool is one entry of the catalog: the MCP tool and the binding that turns
// its arguments into a request. The client that sends it is the serving
// state's (one per upstream, made by gateway.New), not the catalog's.
type Tool struct {
	Tool       *mcp.Tool
	Binding    *upstream.Binding
	Upstream   string // the upstream's name
	Operation  tagging.Operation
	Derived    annotations.Derived
	Mangled    bool   // the name had to be changed to be valid
	SourceName string // what the name was derived from
	// NameTakenBy is the tool that holds the name SourceName asked for
	// ("upstream/name"), when it took it first; empty otherwise.
	NameTakenBy string
	// Security is the operation's effective security requirement: its own,
	// else the document's. Empty means none declared.
	Security openapi3.SecurityRequirements
	// OAuthScopes are Security's oauth2 and openIdConnect scopes, one list
	// per alternative (see auth.OAuthScopes): the scopes calling the tool
	// needs when the gateway verifies tokens.
	OAuthScopes [][]string
	// Source is the document the tool came from, as configured.
	Source string

	// Playbook is set on playbook tools: what their calls run (see
	// playbooks.go). The runner is the serving state's, by Upstream.
	Playbook *Playbook
	// Federated is set on an upstream MCP server's tools (see
	// federated.go); they have no Binding.
	Federated *Federated

	baseDescription string // the description before binding notes
	size            int    // bytes of the tool's JSON in tools/list
	// descriptionSHA and titleSHA hash the base description and the title
	// before sanitizing (see finishTexts): what the lockfile records.
	descriptionSHA, titleSHA string
	// outputSHA hashes the output schema as the tool's own binding made it
	// (the first bind: before the catalog's size budget re-binds it, which
	// depends on the other tools, and before sanitizing); "" without one.
	outputSHA    string
	outputHashed bool
	// texts are the tool's texts before sanitizing, for the audit
	// (Options.AuditTexts); nil otherwise.
	texts []annotations.Text
	// paramDescriptions, on a tool read from a snapshot, stand in for its
	// operation's parameters (SearchDoc), which the snapshot does not keep.
	paramDescriptions map[string]string
	// wire, on a tool read from a snapshot, is its JSON as the snapshot
	// holds it (see Wire).
	wire *ToolWire
}

// Wire returns the tool's JSON in pieces, for tools/list, when it was read
// from a snapshot (which holds it marshalled); nil otherwise.
func (t *Tool) Wire() *ToolWire { return t.wire }

// Catalog is the set of tools the gateway serves, built once from the
// configuration. It is immutable after Build (but for DropDocuments).
type Catalog struct {
	Tools []*Tool
	// Prompts are the prompts of the configuration (`prompts:`), in its
	// order, then those of playbooks' mcp sections (playbookmcp.go).
	Prompts []*Prompt
	// PlaybookParts are the entries of playbooks' mcp sections, and what
	// became of each (`--explain`).
	PlaybookParts []PlaybookPart
	// PlaybookResources are playbooks' http GET resources, served as
	// resource templates.
	PlaybookResources []*PlaybookHTTPResource
	// resourceURIs are the resource URIs (and templates) taken while
	// building, OpenAPI and playbook ones alike: who serves each.
	resourceURIs map[string]string
	// Resources are the OpenAPI operations served as MCP resources (see
	// resources.go), by upstream in configuration order, then in
	// document order.
	Resources []*Resource
	Warnings  []string
	// NotLoaded are the upstreams left out for now (see
	// Options.DeferUnavailable), in configuration order.
	NotLoaded []NotLoaded
	// Skipped are the selected operations that could not be made tools, as
	// audit findings (each is also a warning).
	Skipped []annotations.Finding
	// Selection is every operation of every upstream's document, in
	// catalog order, and why it is or is not a tool (`--explain`).
	Selection []Selection
	// playbooks are the playbook tools and hidden playbooks, by path, for
	// the NoETL-compatible endpoint.
	playbooks playbookSet
	// bases is where each upstream's calls go, by name; an upstream without
	// one can be listed and audited but not served.
	bases map[string]baseURL
	// engines are the playbook routes and options of each upstream that has
	// playbooks, by name: gateway.New makes each one's runner.
	engines map[string]*playbook.Options
	// Upstreams says, per upstream in configuration order, how many
	// operations its document has and how many passed the gate: with none,
	// the CLI explains why it serves no tools.
	Upstreams []UpstreamCount
	// sources are, per upstream, what the audit's text rules read besides
	// the tools (Options.AuditTexts): the document's strings and the
	// API's own hosts.
	sources map[string]*textSource
	// sanitized says the tools' texts are served sanitized
	// (Config.SanitizeText).
	sanitized bool
	// MCP are the MCP upstreams listed, in configuration order: their
	// prompts and resources, for serving.
	MCP []*MCPServer
}

// UpstreamCount is how many of an upstream's operations became candidates.
type UpstreamCount struct {
	Name       string
	Source     string   // the document, as configured
	ExposeTags []string // the gate tags in force (empty with ExposeAll)
	ExposeAll  bool
	Operations int  // operations in the document
	Selected   int  // operations that passed the gate (before any was skipped)
	Include    bool // the upstream selects by include rules, not by tags
	// Playbooks: the upstream is a playbook engine, whose tools are its
	// playbooks (its routes are never REST tools), so no REST tool is no
	// surprise.
	Playbooks bool
	// MCP: the upstream is an MCP server; Operations counts its tools.
	MCP bool
}

// Options configures Build. The zero value is Build's.
type Options struct {
	// IncludeOrigin records where each operation stands in its source (OpenAPI
	// 3 documents), so audit findings can name lines. It costs load time.
	IncludeOrigin bool
	// AuditTexts keeps every text of every tool a client reads as the
	// document gives it, before sanitizing, with what finds its source and
	// line (the document's strings, with IncludeOrigin) and the API's own
	// hosts: what Facts hands the audit's text rules (MCPG012–MCPG018). It
	// costs memory; only the audit sets it.
	AuditTexts bool

	// Validated, when set, lets the catalog be returned before kin-openapi
	// has finished validating the documents (about a second of CPU for
	// Stripe's, re-walking shared schemas once per response): validation
	// goes on in the background and Validated is called once, from another
	// goroutine, with every document's warnings (prefixed by upstream).
	// Nothing validation finds changes the tools, only what is reported;
	// so `serve` starts sooner, while `tools` and `audit`, which print the
	// warnings, leave it nil and wait.
	Validated func(warnings []string)
	// ValidateAfter, with Validated, holds the validation back until it
	// receives: true starts it, false (or a close) abandons it, and
	// Validated is never called. gateway.New sends true once the serving state is
	// built, so that validation (and the garbage it makes) takes nothing
	// from start-up, and false when it fails, so that a gateway that never
	// served does not validate and log. Nil starts validation as soon as
	// the catalog is built.
	ValidateAfter <-chan bool

	// ListMCP lists an MCP upstream (config.Upstream.MCP) for the build;
	// gateway.New passes its live upstreams', so that listing and calls
	// share their sessions. An error from it is a warning: the upstream's
	// tools are left out, to arrive when it answers. Nil: Build connects
	// to each MCP upstream itself, lists it and disconnects, and an error
	// is Build's (`tools` and `audit` must not pass over an upstream they
	// could not read).
	ListMCP func(ctx context.Context, u *config.Upstream) (*federation.Listing, error)

	// sources are documents already read, by upstream name: WriteSnapshot
	// builds from the very bytes it hashes.
	sources map[string]fetchedSource
	// DeferUnavailable leaves out an upstream whose remote document could
	// not be fetched in a way a retry may mend (upstream.Unavailable: no
	// connection, a timeout, 5xx, 429, 408), recording it in
	// Catalog.NotLoaded and a warning, rather than failing the build: a
	// serving gateway starts with the rest and retries (mcpgate serve), so
	// that one upstream's outage is not a crash loop. Any other failure is
	// still Build's error. `tools` and `audit` leave it false.
	DeferUnavailable bool
}

// NotLoaded is an upstream Build left out (Options.DeferUnavailable).
type NotLoaded struct {
	Upstream string // its name
	Source   string // the document, as configured
	Err      error  // why
}

// Build loads every upstream's document and builds its tools: the
// pure description that `tools` and `audit` print and that gateway.New serves. It
// makes no client that serving uses (gateway.New makes one per upstream); opts may be
// nil. It builds from cfg resolved (see [config.Config.Resolve]); cfg itself is not
// changed.
func Build(ctx context.Context, cfg *config.Config, opts *Options) (*Catalog, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	style := tagging.StrictNames
	if cfg.NameStyle == "spec" {
		style = tagging.SpecNames
	}
	namer := tagging.NewNamer(style)
	cat := &Catalog{bases: map[string]baseURL{}, sanitized: cfg.SanitizesText()}
	if o.AuditTexts {
		cat.sources = map[string]*textSource{}
	}
	if cat.Prompts, err = buildPrompts(cfg, cfg.SanitizesText()); err != nil {
		return nil, err
	}
	cat.resourceURIs = map[string]string{}
	var validations []func() []string // each waits for one document's validation
	var startValidations []func()     // with o.Validated: started after the build
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		if u.MCP != nil {
			l, err := o.listMCP(ctx, u)
			if err != nil && o.ListMCP == nil {
				return nil, &DocumentError{Upstream: u.Name, Source: mcpSource(u), Err: err}
			}
			cat.Upstreams = append(cat.Upstreams, UpstreamCount{Name: u.Name, Source: mcpSource(u), MCP: true})
			if err != nil {
				cat.Warnings = append(cat.Warnings, fmt.Sprintf("%s: not listed: %v; its tools are served once it answers", u.Name, err))
				continue
			}
			if err := cat.addFederated(namer, u, l); err != nil {
				return nil, err
			}
			cat.Upstreams[len(cat.Upstreams)-1].Operations = len(l.Tools)
			continue
		}
		if u.OpenAPI == "" && u.Document == nil {
			// A playbook engine without a document (see Playbooks).
			cat.bases[u.Name] = resolveBase(u, nil)
			if cat.sources != nil {
				cat.sources[u.Name] = &textSource{hosts: ownHosts(nil, cat.bases[u.Name])}
			}
			if err := cat.buildPlaybooks(ctx, namer, u, nil); err != nil {
				return nil, fmt.Errorf("upstream %s: playbooks: %v", u.Name, err)
			}
			continue
		}
		var doc *upstream.Document
		if f, ok := o.sources[u.Name]; ok {
			doc, err = parseFetched(ctx, u, f)
		} else {
			doc, err = loadUpstreamDocument(ctx, u, &upstream.LoadOptions{IncludeOrigin: o.IncludeOrigin})
		}
		if err != nil {
			derr := &DocumentError{Upstream: u.Name, Source: u.OpenAPI, Err: err}
			if !o.DeferUnavailable || !upstream.Unavailable(err) {
				return nil, derr
			}
			cat.NotLoaded = append(cat.NotLoaded, NotLoaded{Upstream: u.Name, Source: u.OpenAPI, Err: derr})
			cat.Warnings = append(cat.Warnings, fmt.Sprintf("%s: not loaded: %v; served without it until it can be fetched", u.Name, derr))
			continue
		}
		cat.bases[u.Name] = resolveBase(u, doc)
		if cat.sources != nil {
			cat.sources[u.Name] = &textSource{strings: doc.Strings, hosts: ownHosts(doc, cat.bases[u.Name])}
		}
		// Validation reads the document for as long as building its tools
		// does (seconds, for Stripe's): do both at once.
		validated := make(chan struct{})
		validate := func() {
			defer close(validated)
			doc.Validate(ctx)
		}
		if o.Validated == nil {
			// Listing or auditing waits for validation anyway: run it
			// beside building the tools (seconds, for Stripe's).
			go validate()
		} else {
			// Serving does not wait for it: start it once the tools are
			// built, so that it does not take a core from them.
			startValidations = append(startValidations, validate)
		}
		selOpts, err := u.Selection()
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %v", u.Name, err)
		}
		ops := cat.explain(u.Name, tagging.Explain(doc.T, selOpts))
		if u.Playbooks != nil {
			ops = cat.withoutPlaybookRoutes(u, doc, ops)
		}
		for _, p := range tagging.Problems(doc.T) {
			cat.Warnings = append(cat.Warnings, u.Name+": "+p)
		}
		rules := &annotations.Rules{OpenWorld: u.OpenWorld}
		// Names are given in document order (a name taken is taken); the
		// bindings, which are most of the work, are made on every core.
		tools := make([]*Tool, len(ops))
		errs := make([]error, len(ops))
		for i, op := range ops {
			tools[i], errs[i] = describeTool(namer, u, op, rules)
		}
		parallel.Do(len(ops), func(i int) {
			if errs[i] == nil {
				errs[i] = tools[i].bind(u, u.MaxToolBytes)
			}
		})
		for i, op := range ops {
			t, err := tools[i], errs[i]
			if err != nil {
				// One broken operation must not take the catalog down: skip
				// it, and say so.
				cat.skip(u.Name, u.OpenAPI, op, err)
				continue
			}
			t.Source = u.OpenAPI
			t.Security = doc.T.Security
			if op.Operation.Security != nil {
				t.Security = *op.Operation.Security
			}
			t.OAuthScopes = oauthScopes(doc.T, t.Security)
			cat.Tools = append(cat.Tools, t)
		}
		if u.Playbooks != nil {
			if err := cat.buildPlaybooks(ctx, namer, u, doc); err != nil {
				return nil, fmt.Errorf("upstream %s: playbooks: %v", u.Name, err)
			}
		}
		if err := cat.buildResources(u, doc, cat.resourceURIs); err != nil {
			return nil, err
		}
		cat.Upstreams = append(cat.Upstreams, countOperations(u, doc, len(ops)))
		name := u.Name
		validations = append(validations, func() []string {
			<-validated
			ws := make([]string, 0, len(doc.Warnings))
			for _, w := range doc.Warnings {
				ws = append(ws, name+": "+w)
			}
			return ws
		})
	}
	if o.Validated == nil {
		for _, wait := range validations {
			cat.Warnings = append(cat.Warnings, wait()...)
		}
	}
	if err := cat.fitBudget(cfg); err != nil {
		return nil, err
	}
	// The tools are final but for their hidden characters: hash and keep
	// their texts as the document gives them, then clean what is served.
	cat.finishTexts(o.AuditTexts)
	if o.Validated == nil {
		// Listing and auditing: compile each final input schema, so that a
		// tool whose schema cannot be checked is left out, and reported.
		compiled := cat.schemaErrors((*upstream.Binding).Compile)
		kept := cat.Tools[:0]
		for i, t := range cat.Tools {
			if err := compiled[i]; err != nil {
				cat.skip(t.Upstream, t.Source, t.Operation, err)
				continue
			}
			kept = append(kept, t)
		}
		cat.Tools = kept
	}
	// Serving compiles a tool's input schema on its first call instead
	// (Binding.Validate), and checks them all in the background with the
	// documents (see below). Compiling up front took Kubernetes' 1,000+
	// tools 0.3 s of start-up and kept 14 MB of validators for tools that
	// may never be called. A schema that does not compile — which no
	// corpus document has (TestCorpusCatalogs compiles every one) — leaves
	// its tool listed, every call to it refused before anything is sent,
	// and a warning.
	cat.findNameClashes(namer)
	cat.nameSelection()
	for _, t := range cat.Tools {
		if u := cfg.UpstreamNamed(t.Upstream); u.MaxToolBytes > 0 && t.size > u.MaxToolBytes {
			cat.Warnings = append(cat.Warnings, fmt.Sprintf("%s: tool %s is %d KiB, over the %d KiB budget even at its smallest", t.Upstream, t.Tool.Name, t.size>>10, u.MaxToolBytes>>10))
		}
	}
	if o.Validated != nil {
		// Started only now, or later still (ValidateAfter), so that it
		// takes no core, and adds no garbage, while the tools are built and
		// compiled: beside the build, it made Kubernetes' document take
		// 1.6 s to be served rather than 1.0 (BenchmarkServeStart).
		go func() {
			if o.ValidateAfter != nil {
				if start := <-o.ValidateAfter; !start {
					return
				}
			}
			for _, start := range startValidations {
				start() // one document at a time: serving comes first
			}
			var ws []string
			for _, wait := range validations {
				ws = append(ws, wait()...)
			}
			ws = append(ws, cat.checkSchemas()...)
			o.Validated(ws)
		}()
	}
	return cat, nil
}

// checkSchemas compiles every tool's input schema, without keeping the
// validators, and words a warning for each that does not compile.
func (c *Catalog) checkSchemas() []string {
	errs := c.schemaErrors((*upstream.Binding).CheckSchema)
	var ws []string
	for i, err := range errs {
		if err != nil {
			t := c.Tools[i]
			ws = append(ws, fmt.Sprintf("%s: tool %s (%s %s): its calls are refused: %v", t.Upstream, t.Tool.Name, t.Operation.Method, t.Operation.Path, err))
		}
	}
	return ws
}

// schemaErrors runs check (Compile, or CheckSchema) on every tool's
// binding, on every core, and returns the errors by tool.
func (c *Catalog) schemaErrors(check func(*upstream.Binding) error) []error {
	errs := make([]error, len(c.Tools))
	parallel.Do(len(c.Tools), func(i int) {
		if b := c.Tools[i].Binding; b != nil {
			errs[i] = check(b)
		}
	})
	return errs
}

// skip records that op, selected from upstream's document source, is not
// served, and why: a start-up warning, and an audit finding.
func (c *Catalog) skip(upstream, source string, op tagging.Operation, err error) {
	c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s %s: skipped: %v", upstream, op.Method, op.Path, err))
	c.skipSelection(upstream, op, err)
	line := 0
	if o := op.Operation.Origin; o != nil && o.Key != nil {
		line = o.Key.Line
	}
	c.Skipped = append(c.Skipped, annotations.SkippedFinding(source, operationPointer(op), line, op.Method, op.Path, err.Error()))
}

// fitBudget keeps the whole tools/list within cfg.MaxCatalogBytes by degrading
// the largest tools first: it finds the per-tool cap C such that the tools,
// each cut to at most C, fit, and binds again every tool over C. A client
// pays for the whole list on every conversation, so an API as wide as
// Kubernetes' must be cut; small tools are never touched.
func (c *Catalog) fitBudget(cfg *config.Config) error {
	limit := cfg.MaxCatalogBytes
	if limit <= 0 {
		return nil
	}
	for round := 0; round < 4; round++ {
		total := 0
		sizes := make([]int, len(c.Tools))
		for i, t := range c.Tools {
			sizes[i] = t.size
			total += t.size
		}
		if total <= limit {
			return nil
		}
		capSize := waterLevel(sizes, limit)
		errs := make([]error, len(c.Tools))
		parallel.Do(len(c.Tools), func(i int) {
			// A federated tool's schemas are its server's: served whole.
			if t := c.Tools[i]; t.size > capSize && t.Federated == nil {
				errs[i] = t.bind(cfg.UpstreamNamed(t.Upstream), capSize)
			}
		})
		for i, err := range errs {
			if err != nil {
				t := c.Tools[i]
				return fmt.Errorf("%s: %s %s: %v", t.Upstream, t.Operation.Method, t.Operation.Path, err)
			}
		}
	}
	return nil
}

// waterLevel returns the largest cap C with sum(min(size, C)) <= limit.
func waterLevel(sizes []int, limit int) int {
	s := slices.Clone(sizes)
	slices.Sort(s)
	rest := limit
	for i, n := range s {
		// The remaining len(s)-i tools, each capped at C, must fit in rest.
		if n*(len(s)-i) > rest {
			return max(rest/(len(s)-i), 1)
		}
		rest -= n
	}
	return s[len(s)-1]
}

// describeTool names op's tool and derives its annotations and description:
// everything but its binding (Tool.bind), which the caller makes.
func describeTool(namer *tagging.Namer, u *config.Upstream, op tagging.Operation, rules *annotations.Rules) (*Tool, error) {
	o := op.Operation
	rename := u.Rename[o.OperationID]
	if rename == "" {
		rename = u.Rename[op.Method+" "+op.Path]
	}
	if rename == "" && u.ToolPrefix != "" {
		rename = u.ToolPrefix + op.NameSource("")
	}
	name, mangled := namer.Name(op, rename)
	d, err := annotations.Derive(annotations.Input{
		Method:      op.Method,
		OperationID: o.OperationID,
		Tags:        o.Tags,
		Extensions:  o.Extensions,
		Override:    overrideFor(u, name, o.OperationID),
	}, rules)
	if err != nil {
		return nil, err
	}
	if d.Annotations.Title == "" {
		d.Annotations.Title = annotations.Title(name)
	}
	desc := toolDescription(o.Summary, o.Description)
	if desc == "" {
		desc = op.Method + " " + op.Path
	}
	if d.Large {
		desc += fmt.Sprintf("\n\nThis tool may return many records: filter or page the request where the API allows it. Results over %d KiB are cut.", u.LargeResultBytes>>10)
	}
	meta := mcp.Meta{MetaProvenance: d.Provenance}
	if d.Large {
		meta[MetaLarge] = true
	}
	t := &Tool{
		Tool: &mcp.Tool{
			Name:        name,
			Title:       d.Annotations.Title,
			Description: desc,
			Annotations: d.Annotations,
			Meta:        meta,
		},
		Upstream:   u.Name,
		Operation:  op,
		Derived:    d,
		Mangled:    mangled,
		SourceName: op.NameSource(rename),
	}
	return t, nil
}

// toolDescription is what a model reads of an operation: the summary first,
// then the description (unless it already starts with the summary), each as
// CommonMark (see upstream.DescriptionMarkdown: HTML descriptions, Stripe's
// and Asana's, are converted).
func toolDescription(summary, description string) string {
	summary, description = upstream.DescriptionMarkdown(summary), upstream.DescriptionMarkdown(description)
	switch {
	case summary == "":
		return description
	case description == "":
		return summary
	case strings.HasPrefix(description, strings.TrimSuffix(summary, ".")):
		return description
	}
	return summary + "\n\n" + description
}

// bind builds t's Binding within budget bytes for the whole tool (no bound
// when budget <= 0), and sets the tool's schemas and description from it.
func (t *Tool) bind(u *config.Upstream, budget int) error {
	base := *t.Tool
	base.InputSchema, base.OutputSchema = nil, nil
	schemaBudget := 0
	if budget > 0 {
		// What the schemas may take: the budget less the rest of the tool
		// and room for the notes the binding may add to the description.
		schemaBudget = max(budget-jsonSize(&base)-512, 1024)
	}
	op := t.Operation
	opts := &upstream.BindOptions{NoOutputSchema: u.NoOutputSchema, SchemaBudget: schemaBudget}
	if t.Derived.Large {
		// A cut response is no longer valid JSON, and a client rejects a
		// result without the structuredContent its outputSchema promises:
		// a large tool advertises none.
		opts.MaxResponseBytes = u.LargeResultBytes
		opts.NoOutputSchema = true
	}
	b, err := upstream.Bind(op.Method, op.Path, op.PathItem, op.Operation, opts)
	if err != nil {
		return err
	}
	if !t.outputHashed {
		t.outputHashed = true
		if b.OutputSchema != nil {
			if raw, err := json.Marshal(b.OutputSchema); err == nil { // map keys sorted
				t.outputSHA = textSHA256(string(raw))
			}
		}
	}
	tool := base
	if t.baseDescription == "" {
		t.baseDescription = tool.Description
	}
	tool.Description = t.baseDescription
	for _, n := range append(b.Notes, b.Degraded...) {
		tool.Description += "\n\nNote: " + n + "."
	}
	tool.InputSchema = b.InputSchema
	if b.OutputSchema != nil {
		tool.OutputSchema = b.OutputSchema
	}
	t.Tool, t.Binding = &tool, b
	t.size = toolSize(&tool)
	return nil
}

// toolSize is len(json.Marshal(t)) without marshalling the schemas, which are
// most of a tool and are counted by walking them (upstream.JSONSize): at
// start-up every tool is measured, more than once when the catalog must
// shrink. TestToolSize checks it against json.Marshal on the corpus.
func toolSize(t *mcp.Tool) int {
	rest := *t
	rest.InputSchema, rest.OutputSchema = json.RawMessage("{}"), nil
	n := jsonSize(&rest) - len("{}") + upstream.JSONSize(t.InputSchema)
	if t.OutputSchema != nil {
		n += len(`,"outputSchema":`) + upstream.JSONSize(t.OutputSchema)
	}
	return n
}

func jsonSize(v any) int {
	raw, _ := json.Marshal(v)
	return len(raw)
}

func overrideFor(u *config.Upstream, name, operationID string) *annotations.Override {
	if o, ok := u.Annotations[name]; ok {
		return &o
	}
	if o, ok := u.Annotations[operationID]; ok && operationID != "" {
		return &o
	}
	return nil
}

func loadUpstreamDocument(ctx context.Context, u *config.Upstream, lo *upstream.LoadOptions) (*upstream.Document, error) {
	switch {
	case u.Document != nil:
		doc, err := upstream.ParseDocument(ctx, u.Document)
		if err != nil {
			return nil, err
		}
		doc.Source = u.OpenAPI
		return doc, nil
	case u.Handler != nil && strings.HasPrefix(u.OpenAPI, "/"):
		// Read the document from the in-process API, as a client would.
		inproc := *lo
		inproc.Client = &http.Client{Transport: upstream.HandlerTransport(u.Handler)}
		return upstream.LoadDocument(ctx, "http://in-process"+u.OpenAPI, &inproc)
	}
	return upstream.LoadDocument(ctx, u.OpenAPI, lo)
}

// DropDocuments lets go of the parsed documents once a catalog is served: each
// tool's operation keeps its method, path and the few fields the audit facts
// read, not pointers into a document whose schemas (Stripe's, Kubernetes')
// are tens of MB of live heap. Serving needs only the bindings. The catalog
// can no longer be rebuilt or re-bound afterwards.
func (c *Catalog) DropDocuments() {
	for _, r := range c.Resources {
		r.Binding.ForgetDeclared()
		if op := r.Operation.Operation; op != nil {
			r.Operation = tagging.Operation{Method: r.Operation.Method, Path: r.Operation.Path, Operation: &openapi3.Operation{
				OperationID: op.OperationID, Summary: op.Summary, Description: op.Description, Tags: op.Tags,
			}}
		}
	}
	for _, t := range c.Tools {
		if t.Binding != nil {
			t.Binding.ForgetDeclared()
		}
		op := t.Operation.Operation
		if op == nil {
			continue
		}
		t.Operation = tagging.Operation{Method: t.Operation.Method, Path: t.Operation.Path, Operation: &openapi3.Operation{
			OperationID: op.OperationID, Summary: op.Summary, Description: op.Description, Tags: op.Tags,
		}}
	}
}

// baseURL is where an upstream's calls go: the configured base_url, else the
// document's absolute server URL; err says why there is none. An in-process
// upstream (Handler) needs none.
type baseURL struct {
	url string
	err error
}

func resolveBase(u *config.Upstream, doc *upstream.Document) baseURL {
	if u.Handler != nil || u.BaseURL != "" {
		return baseURL{url: u.BaseURL}
	}
	if doc != nil {
		if su := doc.ServerURL(); su != nil {
			return baseURL{url: su.String()}
		}
	}
	return baseURL{err: errors.New("no base_url, and the document names no absolute server URL: set base_url (--upstream)")}
}

// Client makes the client of upstream u: in-process for a Handler, else
// remote at the base URL the catalog found for it (its base_url, else its
// document's server). Serving makes one per upstream (see gateway.New);
// budget bounds the answers all of them hold at once.
func (c *Catalog) Client(u *config.Upstream, budget *upstream.ResponseBudget) (*upstream.Client, error) {
	return newClient(u, c.bases[u.Name], budget)
}

// TracedClient is Client whose requests carry what tr says (request id,
// trace context, spans), sent through rt when it is not nil (a transport
// shared across a reload: see RemoteBase), else through a transport of
// the client's own.
func (c *Catalog) TracedClient(u *config.Upstream, budget *upstream.ResponseBudget, tr upstream.Tracing, rt http.RoundTripper) (*upstream.Client, error) {
	return newTracedClient(u, c.bases[u.Name], budget, tr, rt)
}

// RemoteBase is the base URL the client of upstream u sends its calls to,
// and whether it has one: false for an in-process upstream (Handler), and
// for one with no base URL (Client says why). The transport of such a
// client is what upstream.RemoteTransport(base, !u.Direct()) makes.
func (c *Catalog) RemoteBase(u *config.Upstream) (string, bool) {
	b := c.bases[u.Name]
	if u.Handler != nil || b.err != nil || b.url == "" {
		return "", false
	}
	return b.url, true
}

// newClient is Client with the base URL given.
func newClient(u *config.Upstream, base baseURL, budget *upstream.ResponseBudget) (*upstream.Client, error) {
	return newTracedClient(u, base, budget, upstream.Tracing{}, nil)
}

// newTracedClient is TracedClient with the base URL given.
func newTracedClient(u *config.Upstream, base baseURL, budget *upstream.ResponseBudget, tr upstream.Tracing, rt http.RoundTripper) (*upstream.Client, error) {
	opts := &upstream.ClientOptions{
		Timeout:        u.Timeout,
		Name:           u.Name,
		MaxConcurrent:  u.MaxConcurrent,
		QueueTimeout:   u.QueueTimeout,
		ResponseBudget: budget,
		Tracing:        tr,
	}
	if u.Handler != nil {
		return upstream.NewInProcess(u.Handler, opts), nil
	}
	if base.err != nil {
		return nil, base.err
	}
	switch {
	case rt != nil:
		opts.Transport = rt
	case !u.Direct():
		opts.Transport = upstream.NewTransport() // net/http's, whatever the URL
	}
	return upstream.NewRemote(base.url, opts)
}

func countOperations(u *config.Upstream, doc *upstream.Document, selected int) UpstreamCount {
	c := UpstreamCount{Name: u.Name, Source: u.OpenAPI, ExposeAll: u.ExposeAll, ExposeTags: u.ExposeTags, Selected: selected,
		Include: len(u.Include) > 0, Playbooks: u.Playbooks != nil}
	if !u.ExposeAll && !c.Include && len(c.ExposeTags) == 0 {
		c.ExposeTags = []string{tagging.DefaultExposeTag}
	}
	for _, item := range doc.T.Paths.Map() {
		if item != nil {
			c.Operations += len(item.Operations())
		}
	}
	return c
}

// DocumentError says that an upstream's OpenAPI document could not be read
// or parsed, and why.
type DocumentError struct {
	Upstream string // the upstream's name
	Source   string // the document, as configured
	Err      error
}

// Error reads "openapi SOURCE: why", or "openapi: open SOURCE: why" when the
// cause already names the file.
func (e *DocumentError) Error() string {
	var pe *fs.PathError
	if errors.As(e.Err, &pe) && pe.Path == e.Source {
		return "openapi: " + e.Err.Error()
	}
	return "openapi " + e.Source + ": " + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// oauthScopes returns the scopes of reqs' oauth2 and openIdConnect schemes,
// per alternative (auth.OAuthScopes).
func oauthScopes(doc *openapi3.T, reqs openapi3.SecurityRequirements) [][]string {
	maps := make([]map[string][]string, len(reqs))
	for i, r := range reqs {
		maps[i] = r
	}
	return auth.OAuthScopes(maps, func(name string) bool {
		if doc.Components == nil {
			return false
		}
		s := doc.Components.SecuritySchemes[name]
		return s != nil && s.Value != nil && (s.Value.Type == "oauth2" || s.Value.Type == "openIdConnect")
	})
}

// findNameClashes finds the tools that got a hashed name because another
// took the one they asked for (two upstreams declaring one operationId, a
// rename onto a name in use), records who holds it, and says so at start-up:
// a client or prompt that names the tool would otherwise reach the other
// one, or nothing, without a word.
func (c *Catalog) findNameClashes(namer *tagging.Namer) {
	byName := make(map[string]*Tool, len(c.Tools))
	for _, t := range c.Tools {
		byName[t.Tool.Name] = t
	}
	for _, t := range c.Tools {
		if !t.Mangled {
			continue
		}
		want := namer.Clean(t.SourceName)
		holder := byName[want]
		if want == t.Tool.Name || holder == nil || holder == t {
			continue
		}
		t.NameTakenBy = holder.Upstream + "/" + holder.Tool.Name
		who := fmt.Sprintf("upstreams %s and %s", holder.Upstream, t.Upstream)
		if holder.Upstream == t.Upstream {
			who = "upstream " + t.Upstream + " twice"
		}
		c.Warnings = append(c.Warnings, fmt.Sprintf("tool name %q is declared by %s: %s (%s) keeps it, and %s (%s) is served as %q; rename one (rename, x-mcp-name or tool_prefix)",
			want, who, holder.Upstream, describeOp(holder), t.Upstream, describeOp(t), t.Tool.Name))
	}
}

// describeOp names what a tool calls, for messages.
func describeOp(t *Tool) string {
	if t.Playbook != nil {
		return "playbook " + t.Playbook.Path
	}
	if t.Federated != nil {
		return "tool " + t.Federated.Name
	}
	return t.Operation.Method + " " + t.Operation.Path
}
