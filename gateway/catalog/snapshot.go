package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/gateway/internal/parallel"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
)

// A snapshot is a catalog as `mcpgate serve` builds it, written by
// `mcpgate build` so that a replica can serve it without parsing its
// OpenAPI documents again: kin-openapi's parse of Stripe's or Kubernetes'
// document is most of a 0.7–1 s start, where decoding the catalog it gives
// takes tens of ms (docs/snapshot.md has the figures).
//
// It holds the generated tools themselves (names, hints with their
// provenance, descriptions, schemas and each binding's request recipe) and
// the OpenAPI resources, not the documents: a call reads only the binding,
// which upstream.BindingSnapshot keeps whole, so a tool served from a
// snapshot validates and builds requests as one bound from its document.
//
// The file is lines of JSON. The first is the header: the format, the
// build of mcpgate that wrote it, the SHA-256 of the configuration (what
// Build reads of it: see configSHA256) and of each upstream's document
// bytes, and the payload's checksum. The rest is the payload: the catalog
// without its tools on one line, then each tool on a line of its own, so
// that a reader finds each tool's JSON by its newline, not by scanning
// the catalog's JSON once more (Kubernetes' is 4 MB), and decodes them on
// every core. LoadSnapshot uses a snapshot only when every hash matches;
// otherwise it says which one differs, and the caller builds the catalog
// from the documents.
//
// Covered: OpenAPI upstreams read from a file, an http(s) URL (fetched and
// hashed at every start: its bytes are what the tools came from) or
// Upstream.Document. Not covered: a playbook engine's or an MCP server's
// tools, which are read from the live upstream at start (an engine's
// catalog route, an MCP listing), and an in-process Handler's document;
// WriteSnapshot refuses such a configuration.

// SnapshotFormat names the layout of a snapshot; a reader refuses any other.
const SnapshotFormat = "mcpgate-snapshot/2"

// MaxSnapshotBytes bounds a snapshot file: Kubernetes' and Stripe's are 3–5
// MB, and a catalog is at most max_catalog_bytes of tools (2 MiB by
// default) plus their bindings and the selection.
const MaxSnapshotBytes = 256 << 20

// maxSnapshotHeader bounds the header line: a few hashes per upstream.
const maxSnapshotHeader = 1 << 20

type snapshotHeader struct {
	Format    string             `json:"format"`
	Build     string             `json:"build"`
	Config    string             `json:"config"`
	Documents []snapshotDocument `json:"documents"`
	Payload   string             `json:"payload"`
}

type snapshotDocument struct {
	Upstream string `json:"upstream"`
	Source   string `json:"source"`
	SHA256   string `json:"sha256"`
}

type snapshotPayload struct {
	// Tools are written one a line after the rest (marshalPayload), and
	// ToolCount says how many lines there are.
	Tools        []snapshotTool          `json:"-"`
	ToolCount    int                     `json:"toolCount"`
	Resources    []snapshotResource      `json:"resources,omitempty"`
	ResourceURIs map[string]string       `json:"resourceURIs,omitempty"`
	Warnings     []string                `json:"warnings,omitempty"`
	Skipped      []annotations.Finding   `json:"skipped,omitempty"`
	Selection    []Selection             `json:"selection,omitempty"`
	Upstreams    []UpstreamCount         `json:"upstreams"`
	Bases        map[string]snapshotBase `json:"bases"`
	Sanitized    bool                    `json:"sanitized,omitempty"`
	// ParamTexts are the parameters' descriptions of every tool, each
	// once: Kubernetes' 1,123 operations repeat the same dozen (4 MB of
	// them, written per tool).
	ParamTexts []string `json:"paramTexts,omitempty"`
	// Validation is what the documents' validation and the schema check
	// found (Options.Validated), logged again by a gateway served from
	// the snapshot.
	Validation []string `json:"validation,omitempty"`
}

type snapshotBase struct {
	URL string `json:"url,omitempty"`
	Err string `json:"err,omitempty"`
}

// snapshotOperation is what DropDocuments keeps of an operation.
type snapshotOperation struct {
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	OperationID string   `json:"operationId,omitempty"`
	Summary     string   `json:"summary,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

type snapshotTool struct {
	// Wire is the MCP tool as tools/list serves it, with 0 and 1 standing
	// in for its input and output schemas (its binding's): see ToolWire.
	// Its _meta is made again from Derived, as describeTool makes it.
	Wire      json.RawMessage           `json:"wire"`
	Binding   *upstream.BindingSnapshot `json:"binding"`
	Upstream  string                    `json:"upstream"`
	Operation snapshotOperation         `json:"operation"`
	// ParamDescriptions are the operation's parameters' descriptions, for
	// search mode's index (SearchDoc), which reads them from the document:
	// a parameter's name → its text in ParamTexts.
	ParamDescriptions map[string]int      `json:"paramDescriptions,omitempty"`
	Derived           annotations.Derived `json:"derived"`
	Mangled           bool                `json:"mangled,omitempty"`
	SourceName        string              `json:"sourceName"`
	NameTakenBy       string              `json:"nameTakenBy,omitempty"`
	// Security is the tool's openapi3.SecurityRequirements, as JSON: most
	// tools share their document's, and restoreSnapshot decodes each
	// distinct one once (Kubernetes' 1,123 tools: one, where a map per
	// tool was 5 MB).
	Security        json.RawMessage `json:"security"`
	OAuthScopes     [][]string      `json:"oauthScopes,omitempty"`
	Source          string          `json:"source"`
	BaseDescription string          `json:"baseDescription,omitempty"`
	Size            int             `json:"size"`
	DescriptionSHA  string          `json:"descriptionSHA"`
	TitleSHA        string          `json:"titleSHA"`
	OutputSHA       string          `json:"outputSHA,omitempty"`
	OutputHashed    bool            `json:"outputHashed,omitempty"`
}

type snapshotResource struct {
	Resource       *mcp.Resource             `json:"resource,omitempty"`
	Template       *mcp.ResourceTemplate     `json:"template,omitempty"`
	Binding        *upstream.BindingSnapshot `json:"binding"`
	Upstream       string                    `json:"upstream"`
	Operation      snapshotOperation         `json:"operation"`
	By             string                    `json:"by"`
	Source         string                    `json:"source"`
	URI            string                    `json:"uri"`
	Args           map[string]string         `json:"args"`
	DescriptionSHA string                    `json:"descriptionSHA"`
}

// SnapshotError says why a snapshot is not used: which hash differs, or
// what is wrong with the file. The caller logs it and builds the catalog
// from the documents.
type SnapshotError struct {
	// What differs or is wrong: "format", "build", "config", "document",
	// "payload" (the file does not match its own hash: truncated or
	// altered), "unsupported" (a configuration a snapshot cannot hold), or
	// "read" (a document could not be read to hash it).
	What   string
	Detail string
}

func (e *SnapshotError) Error() string { return "snapshot: " + e.Detail }

// SnapshotOptions configures WriteSnapshot and LoadSnapshot.
type SnapshotOptions struct {
	// Build identifies the mcpgate that writes or reads the snapshot (the
	// gateway passes its version, and for a build without a clean version,
	// its executable's hash): a snapshot is read only by the build that
	// wrote it, since another may make other tools from the same
	// documents.
	Build string
	// Client fetches http(s) documents; nil is upstream.LoadDocument's
	// default client.
	Client *http.Client
}

// WriteSnapshot builds cfg's catalog as `serve` does — validation
// awaited, since its warnings go in the snapshot — and writes its
// snapshot to w. It returns the catalog built.
func WriteSnapshot(ctx context.Context, cfg *config.Config, w io.Writer, opts *SnapshotOptions) (*Catalog, error) {
	var so SnapshotOptions
	if opts != nil {
		so = *opts
	}
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if err := snapshotSupported(cfg); err != nil {
		return nil, err
	}
	h := snapshotHeader{Format: SnapshotFormat, Build: so.Build}
	if h.Config, err = configSHA256(cfg); err != nil {
		return nil, err
	}
	// Build parses exactly the bytes hashed: a document that changes while
	// the snapshot is made cannot be hashed as one version and built as
	// another.
	sources := map[string]fetchedSource{}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		data, loc, err := documentBytes(ctx, u, &upstream.LoadOptions{Client: so.Client})
		if err != nil {
			return nil, &DocumentError{Upstream: u.Name, Source: u.OpenAPI, Err: err}
		}
		sources[u.Name] = fetchedSource{data: data, url: loc}
		h.Documents = append(h.Documents, snapshotDocument{Upstream: u.Name, Source: u.OpenAPI, SHA256: sha256Hex(data)})
	}
	validated := make(chan []string, 1)
	cat, err := Build(ctx, cfg, &Options{sources: sources, Validated: func(ws []string) { validated <- ws }})
	if err != nil {
		return nil, err
	}
	var ws []string
	select {
	case ws = <-validated:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p, err := cat.snapshotPayload(ws)
	if err != nil {
		return nil, err
	}
	payload, err := marshalPayload(p)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	h.Payload = PayloadChecksum(payload)
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	if _, err := w.Write(append(append(head, '\n'), payload...)); err != nil {
		return nil, err
	}
	return cat, nil
}

// snapshotPayload is c as a snapshot holds it, with the validation's
// warnings ws. It refuses what it would not give back unchanged.
func (c *Catalog) snapshotPayload(ws []string) (*snapshotPayload, error) {
	p := &snapshotPayload{
		ResourceURIs: c.resourceURIs, Warnings: c.Warnings, Skipped: c.Skipped, Selection: c.Selection,
		Upstreams: c.Upstreams, Bases: map[string]snapshotBase{}, Sanitized: c.sanitized, Validation: ws,
	}
	for name, b := range c.bases {
		sb := snapshotBase{URL: b.url}
		if b.err != nil {
			sb.Err = b.err.Error()
		}
		p.Bases[name] = sb
	}
	p.Tools = make([]snapshotTool, len(c.Tools))
	p.ToolCount = len(c.Tools)
	texts := map[string]int{}
	for i, t := range c.Tools {
		if t.Binding == nil || t.Playbook != nil || t.Federated != nil {
			return nil, &SnapshotError{What: "unsupported", Detail: fmt.Sprintf("tool %s is not an OpenAPI operation's", t.Tool.Name)}
		}
		if !schemasAreBinding(t) {
			return nil, fmt.Errorf("snapshot: tool %s: its schemas are not its binding's", t.Tool.Name)
		}
		if !reflect.DeepEqual(t.Tool.Meta, toolMeta(t.Derived)) {
			return nil, fmt.Errorf("snapshot: tool %s: its _meta is not what its hints make", t.Tool.Name)
		}
		raw, err := bareToolJSON(t.Tool)
		if err != nil {
			return nil, fmt.Errorf("snapshot: tool %s: %v", t.Tool.Name, err)
		}
		bs, err := t.Binding.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("snapshot: tool %s: %v", t.Tool.Name, err)
		}
		sec, err := json.Marshal(t.Security)
		if err != nil {
			return nil, fmt.Errorf("snapshot: tool %s: %v", t.Tool.Name, err)
		}
		st := snapshotTool{
			Wire: raw, Binding: bs, Upstream: t.Upstream, Operation: operationSnapshot(t.Operation),
			Derived: t.Derived, Mangled: t.Mangled, SourceName: t.SourceName, NameTakenBy: t.NameTakenBy,
			Security: sec, OAuthScopes: t.OAuthScopes, Source: t.Source, BaseDescription: t.baseDescription,
			Size: t.size, DescriptionSHA: t.descriptionSHA, TitleSHA: t.titleSHA, OutputSHA: t.outputSHA, OutputHashed: t.outputHashed,
		}
		descs := t.paramDescriptions
		if op := t.Operation.Operation; descs == nil && op != nil {
			descs = paramDescriptions(t.Operation.PathItem, op)
		}
		for _, name := range slices.Sorted(maps.Keys(descs)) { // ParamTexts in one order on every build
			text := descs[name]
			n, ok := texts[text]
			if !ok {
				n = len(p.ParamTexts)
				texts[text] = n
				p.ParamTexts = append(p.ParamTexts, text)
			}
			if st.ParamDescriptions == nil {
				st.ParamDescriptions = map[string]int{}
			}
			st.ParamDescriptions[name] = n
		}
		p.Tools[i] = st
	}
	for _, r := range c.Resources {
		bs, err := r.Binding.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("snapshot: resource %s: %v", r.URI(), err)
		}
		p.Resources = append(p.Resources, snapshotResource{
			Resource: r.Resource, Template: r.Template, Binding: bs, Upstream: r.Upstream, Operation: operationSnapshot(r.Operation),
			By: r.By, Source: r.Source, URI: r.uri.text, Args: r.args, DescriptionSHA: r.descriptionSHA,
		})
	}
	return p, nil
}

// marshalPayload is the payload: the catalog without its tools on one line,
// then each tool on a line of its own (compact JSON has no newline: a
// string's is escaped), with <, > and & as they are: the schemas' JSON in
// it is served as written (upstream.BindingSnapshot), and an escaping
// encoder would change it.
func marshalPayload(p *snapshotPayload) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	for i := range p.Tools {
		if err := enc.Encode(&p.Tools[i]); err != nil {
			return nil, err
		}
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// LoadSnapshot returns the catalog the snapshot data holds when it was
// written by this build (opts.Build) from cfg and the documents as they are
// now; otherwise a *SnapshotError saying which hash differs or what is
// wrong with the file, and the caller builds the catalog with Build. It
// never panics on a corrupt file.
//
// The catalog keeps data: its strings and schemas are read from it in
// place (see restoreSnapshot), so data must not be changed afterwards.
//
// o is Build's: o.Validated, when set, is called once with the warnings
// the snapshot's build found (after o.ValidateAfter says true), as Build
// calls it once the documents' validation ends.
func LoadSnapshot(ctx context.Context, cfg *config.Config, data []byte, opts *SnapshotOptions, o *Options) (*Catalog, error) {
	var so SnapshotOptions
	if opts != nil {
		so = *opts
	}
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSnapshotBytes {
		return nil, &SnapshotError{What: "format", Detail: fmt.Sprintf("the file is over %d MiB", MaxSnapshotBytes>>20)}
	}
	nl := bytes.IndexByte(data[:min(len(data), maxSnapshotHeader)], '\n')
	if nl < 0 {
		return nil, &SnapshotError{What: "format", Detail: "not a snapshot (no header line)"}
	}
	var h snapshotHeader
	if err := json.Unmarshal(data[:nl], &h); err != nil || h.Format == "" {
		return nil, &SnapshotError{What: "format", Detail: "not a snapshot (its first line is not a snapshot header)"}
	}
	if h.Format != SnapshotFormat {
		return nil, &SnapshotError{What: "format", Detail: fmt.Sprintf("format %q, this mcpgate reads %q", h.Format, SnapshotFormat)}
	}
	if h.Build != so.Build {
		return nil, &SnapshotError{What: "build", Detail: fmt.Sprintf("written by mcpgate %s, this is %s", h.Build, so.Build)}
	}
	if err := snapshotSupported(cfg); err != nil {
		return nil, err
	}
	sum, err := configSHA256(cfg)
	if err != nil {
		return nil, err
	}
	if sum != h.Config {
		return nil, &SnapshotError{What: "config", Detail: "the configuration's hash differs (an upstream's selection, names, hints, base URL or budgets, name_style, sanitize_text or max_catalog_bytes changed)"}
	}
	if len(h.Documents) != len(cfg.Upstreams) {
		return nil, &SnapshotError{What: "config", Detail: "the snapshot's upstreams are not the configuration's"}
	}
	for i := range cfg.Upstreams {
		u, d := &cfg.Upstreams[i], h.Documents[i]
		if d.Upstream != u.Name || d.Source != u.OpenAPI {
			return nil, &SnapshotError{What: "config", Detail: fmt.Sprintf("upstream %s: the snapshot's document is %s, the configuration's %s", u.Name, d.Source, u.OpenAPI)}
		}
	}
	// The documents are read and hashed while the payload is checked and
	// decoded (each is a few ms of a start: Kubernetes' is 4 MB); the
	// catalog is used only once every hash matches, and a failing check
	// is reported in the order of the table in docs/snapshot.md.
	docErr := make(chan error, 1)
	go func() { docErr <- checkDocuments(ctx, cfg, h.Documents, &so) }()
	payload := data[nl+1:]
	var cat *Catalog
	var validation []string
	var payloadErr error
	if PayloadChecksum(payload) != h.Payload {
		payloadErr = &SnapshotError{What: "payload", Detail: "the catalog in the file does not match its hash (truncated or altered)"}
	} else if cat, validation, err = restoreSnapshot(cfg, payload); err != nil {
		payloadErr = &SnapshotError{What: "payload", Detail: "the catalog in the file cannot be read: " + err.Error()}
	}
	if err := <-docErr; err != nil {
		return nil, err
	}
	if payloadErr != nil {
		return nil, payloadErr
	}
	if o != nil && o.Validated != nil {
		go func() {
			if o.ValidateAfter != nil {
				if start := <-o.ValidateAfter; !start {
					return
				}
			}
			o.Validated(validation)
		}()
	}
	return cat, nil
}

// checkDocuments hashes each upstream's document as it is now and compares
// it with the snapshot's hash of it (in the configuration's order: the
// first that differs is the reason).
func checkDocuments(ctx context.Context, cfg *config.Config, docs []snapshotDocument, so *SnapshotOptions) error {
	for i := range cfg.Upstreams {
		u, d := &cfg.Upstreams[i], docs[i]
		sum, err := documentSHA256(ctx, u, &upstream.LoadOptions{Client: so.Client})
		if err != nil {
			return &SnapshotError{What: "read", Detail: fmt.Sprintf("upstream %s: cannot read %s to hash it: %v", u.Name, u.OpenAPI, err)}
		}
		if sum != d.SHA256 {
			return &SnapshotError{What: "document", Detail: fmt.Sprintf("upstream %s: the hash of document %s differs", u.Name, u.OpenAPI)}
		}
	}
	return nil
}

// restoreSnapshot makes the catalog a payload holds, and returns the
// warnings its build's validation found. Every check a call relies on is
// made here (BindingSnapshot.Restore, the URI templates), so that a payload
// that decodes but was not written by WriteSnapshot is an error, not a
// panic later.
func restoreSnapshot(cfg *config.Config, payload []byte) (*Catalog, []string, error) {
	// segmentio's decoder (go-sdk's): 2–3× encoding/json's speed here, the
	// largest single step of a start from a snapshot. ZeroCopy: its
	// strings and the schemas' JSON are read in place, not copied (a new
	// process pays for every page of fresh memory it touches), so they
	// keep payload, which nothing writes, for as long as they are served.
	//
	// The tools are most of the payload, a line each after the rest of
	// the catalog (marshalPayload): each is decoded on every core below.
	rest, lines := payload, [][]byte(nil)
	if nl := bytes.IndexByte(payload, '\n'); nl >= 0 {
		rest, lines = payload[:nl], bytes.Split(payload[nl+1:], []byte{'\n'})
	}
	var p snapshotPayload
	if err := parseLine(rest, &p); err != nil {
		return nil, nil, err
	}
	if p.ToolCount != len(lines) {
		return nil, nil, fmt.Errorf("%d tools, %d lines of them", p.ToolCount, len(lines))
	}
	cat := &Catalog{
		bases: map[string]baseURL{}, sanitized: p.Sanitized, resourceURIs: p.ResourceURIs,
		Warnings: p.Warnings, Skipped: p.Skipped, Selection: p.Selection, Upstreams: p.Upstreams,
	}
	if cat.resourceURIs == nil {
		cat.resourceURIs = map[string]string{}
	}
	for name, b := range p.Bases {
		var err error
		if b.Err != "" {
			err = errors.New(b.Err)
		}
		cat.bases[name] = baseURL{url: b.URL, err: err}
	}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		b, ok := cat.bases[u.Name]
		if !ok {
			return nil, nil, fmt.Errorf("no base URL for upstream %s", u.Name)
		}
		if err := checkBase(u, b); err != nil {
			return nil, nil, fmt.Errorf("upstream %s: %v", u.Name, err)
		}
	}
	var err error
	if cat.Prompts, err = buildPrompts(cfg, cfg.SanitizesText()); err != nil {
		return nil, nil, err
	}
	// On every core: each tool's JSON and checks of its schemas' JSON.
	cat.Tools = make([]*Tool, len(lines))
	errs := make([]error, len(lines))
	secs := &securities{distinct: map[string]openapi3.SecurityRequirements{}}
	parallel.Do(len(lines), func(i int) {
		var st snapshotTool
		if err := parseLine(lines[i], &st); err != nil {
			errs[i] = err
			return
		}
		cat.Tools[i], errs[i] = restoreTool(cfg, &st, secs, p.ParamTexts)
	})
	names := make(map[string]bool, len(lines))
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("tool %d: %v", i, err)
		}
		if n := cat.Tools[i].Tool.Name; names[n] {
			return nil, nil, fmt.Errorf("tool %s twice", n)
		} else {
			names[n] = true
		}
	}
	for i := range p.Resources {
		r, err := restoreResource(cfg, &p.Resources[i])
		if err != nil {
			return nil, nil, fmt.Errorf("resource %d: %v", i, err)
		}
		cat.Resources = append(cat.Resources, r)
	}
	return cat, p.Validation, nil
}

// checkBase refuses a payload's base URL for u that Build would not have
// found (resolveBase): the calls of u's tools, and the caller's token with
// them, go to it. With base_url set, it is base_url, which the
// configuration (not the snapshot) says; without, the document's server,
// whose document's hash matched: an absolute http(s) URL, or the error
// saying there is none. (Which server the document names is not checked
// without parsing it: the file is trusted as far as that, as the
// configuration is.)
func checkBase(u *config.Upstream, b baseURL) error {
	if u.BaseURL != "" {
		if b.err != nil || b.url != u.BaseURL {
			return fmt.Errorf("base URL %q, the configuration's base_url is %q", b.url, u.BaseURL)
		}
		return nil
	}
	if b.err != nil {
		return nil
	}
	if su, err := url.Parse(b.url); err != nil || su.Scheme != "http" && su.Scheme != "https" || su.Host == "" {
		return fmt.Errorf("base URL %q is not an absolute http(s) URL", b.url)
	}
	return nil
}

// securities decodes each distinct security requirement of a snapshot's
// tools once (see snapshotTool.Security), for restoreTool on every core.
type securities struct {
	mu       sync.Mutex
	distinct map[string]openapi3.SecurityRequirements
}

func (s *securities) of(raw json.RawMessage) (openapi3.SecurityRequirements, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec, ok := s.distinct[string(raw)]; ok {
		return sec, nil // shared, as a full load shares its document's
	}
	var sec openapi3.SecurityRequirements
	if _, err := sjson.Parse(raw, &sec, sjson.ZeroCopy); err != nil {
		return nil, fmt.Errorf("security: %v", err)
	}
	s.distinct[string(raw)] = sec
	return sec, nil
}

func restoreTool(cfg *config.Config, st *snapshotTool, secs *securities, texts []string) (*Tool, error) {
	if st.Binding == nil {
		return nil, errors.New("no binding")
	}
	if cfg.UpstreamNamed(st.Upstream) == nil {
		return nil, fmt.Errorf("unknown upstream %q", st.Upstream)
	}
	// The tool is read from its JSON as listed, but for its _meta (made
	// from Derived, as describeTool makes it) and its schemas (the
	// binding's).
	var tool mcp.Tool
	wire := struct {
		Meta json.RawMessage `json:"_meta"` // not the tool's
		*mcp.Tool
	}{Tool: &tool}
	if _, err := sjson.Parse(st.Wire, &wire, sjson.ZeroCopy); err != nil {
		return nil, err
	}
	tool.Meta = toolMeta(st.Derived)
	// tools/list serves the wire as it is (ToolWire): it must be the
	// tool just read, as go-sdk lists it (bare of its schemas), byte for
	// byte, its stand-ins included. A looser read let a payload list what
	// go-sdk would not: a name or hint given twice or in another case,
	// unknown keys, a _meta other than the one the hints make, a schema
	// spliced into a nested object, invalid UTF-8.
	if !isBareToolJSON(st.Wire, &tool) {
		return nil, fmt.Errorf("%s: its JSON is not the tool's as tools/list serves it", tool.Name)
	}
	sec, err := secs.of(st.Security)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", tool.Name, err)
	}
	if tool.Name == "" {
		return nil, errors.New("a tool without a name")
	}
	b, err := st.Binding.Restore()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", tool.Name, err)
	}
	// The tool serves its schemas as the snapshot's JSON (Restore checked
	// it): a tools/list copies the bytes, where it marshalled maps, and
	// the binding decodes them on the tool's first call.
	in, out := b.RawSchemas()
	if mayHaveHeaderAnnotation(in) {
		if err := b.DecodeSchemas(); err != nil {
			return nil, fmt.Errorf("%s: %v", tool.Name, err)
		}
		if err := noHeaderAnnotations(b.InputSchema, ""); err != nil {
			return nil, fmt.Errorf("%s: input schema: %v", tool.Name, err)
		}
		if err := noSDKHeaderAnnotations(in); err != nil {
			return nil, fmt.Errorf("%s: input schema: %v", tool.Name, err)
		}
	}
	if (tool.OutputSchema == nil) != (out == nil) {
		return nil, fmt.Errorf("%s: its JSON and its binding disagree on its output schema", tool.Name)
	}
	w, err := toolWire(slices.Clip(st.Wire), in, out)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", tool.Name, err)
	}
	tool.InputSchema, tool.OutputSchema = in, nil
	if out != nil {
		tool.OutputSchema = out
	}
	var descs map[string]string
	if len(st.ParamDescriptions) > 0 {
		descs = make(map[string]string, len(st.ParamDescriptions))
		for name, n := range st.ParamDescriptions {
			if n < 0 || n >= len(texts) {
				return nil, fmt.Errorf("%s: parameter %s: no text %d", tool.Name, name, n)
			}
			descs[name] = texts[n]
		}
	}
	return &Tool{
		Tool: &tool, Binding: b, Upstream: st.Upstream, Operation: st.Operation.operation(),
		Derived: st.Derived, Mangled: st.Mangled, SourceName: st.SourceName, NameTakenBy: st.NameTakenBy,
		Security: sec, OAuthScopes: st.OAuthScopes, Source: st.Source,
		baseDescription: st.BaseDescription, size: st.Size, descriptionSHA: st.DescriptionSHA, titleSHA: st.TitleSHA,
		outputSHA: st.OutputSHA, outputHashed: st.OutputHashed, paramDescriptions: descs, wire: w,
	}, nil
}

// mayHaveHeaderAnnotation reports whether the JSON of an input schema may
// name an x-mcp-header (see noHeaderAnnotations), without decoding it: the
// name spelt out, or any \u escape, which could spell it (the name has no
// character another JSON escape makes). A schema a document made has
// neither but in rare texts, so nearly every tool's check is this scan.
func mayHaveHeaderAnnotation(schema json.RawMessage) bool {
	return bytes.Contains(schema, []byte("x-mcp-header")) || bytes.Contains(schema, []byte(`\u`))
}

// noHeaderAnnotations refuses an input schema with an x-mcp-header on a
// property (at any depth of properties): go-sdk's AddTool panics on one it
// finds wrong, and a gateway from a snapshot hands its tools to go-sdk in
// the background, where a panic ends the process at every start. A schema
// made from a document never has one (Build keeps no extension), so a
// snapshot that does was not written by WriteSnapshot.
func noHeaderAnnotations(schema map[string]any, at string) error {
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		if ps == nil {
			continue
		}
		if _, ok := ps["x-mcp-header"]; ok {
			return fmt.Errorf("property %s%s: an x-mcp-header, which no document's tool has", at, name)
		}
		if err := noHeaderAnnotations(ps, at+name+"."); err != nil {
			return err
		}
	}
	return nil
}

// sdkHeaderView is an input schema as go-sdk's AddTool reads it for its
// x-mcp-header check (mcp.headerSchemaProperty, less its "type"): decoded
// into a struct, whose map of properties a second "properties" key adds
// to where a map[string]any (noHeaderAnnotations') is replaced by it.
type sdkHeaderView struct {
	XMCPHeader json.RawMessage          `json:"x-mcp-header"`
	Properties map[string]sdkHeaderView `json:"properties"`
}

// noSDKHeaderAnnotations refuses an input schema in which go-sdk's own
// reading finds an x-mcp-header on a property: with a key given twice,
// {"properties":{"a":{"x-mcp-header":…}},"properties":{}}, the decoded map
// noHeaderAnnotations walks has none, and go-sdk's struct still has it. It
// decodes as go-sdk does (segmentio, field names matched exactly); a
// schema that does not decode so is one go-sdk skips too (its view has
// the same fields and a "type" more), and is left to noHeaderAnnotations.
func noSDKHeaderAnnotations(raw json.RawMessage) error {
	var v sdkHeaderView
	if _, err := sjson.Parse(raw, &v, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil
	}
	return v.noHeader("")
}

func (v *sdkHeaderView) noHeader(at string) error {
	for _, name := range slices.Sorted(maps.Keys(v.Properties)) {
		p := v.Properties[name]
		if p.XMCPHeader != nil {
			return fmt.Errorf("property %s%s: an x-mcp-header, which no document's tool has", at, name)
		}
		if err := p.noHeader(at + name + "."); err != nil {
			return err
		}
	}
	return nil
}

func restoreResource(cfg *config.Config, sr *snapshotResource) (*Resource, error) {
	if sr.Binding == nil || (sr.Resource == nil) == (sr.Template == nil) {
		return nil, errors.New("neither one resource nor one template")
	}
	if cfg.UpstreamNamed(sr.Upstream) == nil {
		return nil, fmt.Errorf("unknown upstream %q", sr.Upstream)
	}
	b, err := sr.Binding.Restore()
	if err == nil {
		err = b.DecodeSchemas() // read at once (its URI's arguments): resources are few
	}
	if err != nil {
		return nil, err
	}
	r := &Resource{Resource: sr.Resource, Template: sr.Template, Binding: b, Upstream: sr.Upstream,
		Operation: sr.Operation.operation(), By: sr.By, Source: sr.Source, args: sr.Args, descriptionSHA: sr.DescriptionSHA}
	if r.args == nil {
		r.args = map[string]string{}
	}
	if r.uri, err = parseURITemplate(sr.URI); err != nil {
		return nil, fmt.Errorf("URI template %s: %v", sr.URI, err)
	}
	// What go-sdk serves is the URI checked here, as Build makes it: its
	// AddResource and AddResourceTemplate panic on one they cannot parse.
	if sr.Template != nil && sr.Template.URITemplate != sr.URI || sr.Resource != nil && sr.Resource.URI != sr.URI {
		return nil, fmt.Errorf("URI template %s: the resource names another URI", sr.URI)
	}
	if _, err := url.Parse(sr.URI); sr.Resource != nil && err != nil {
		return nil, err
	}
	if err := checkURIVars(r.uri, r.args, b); err != nil {
		return nil, fmt.Errorf("URI template %s: %v", sr.URI, err)
	}
	return r, nil
}

func operationSnapshot(op tagging.Operation) snapshotOperation {
	s := snapshotOperation{Method: op.Method, Path: op.Path}
	if o := op.Operation; o != nil {
		s.OperationID, s.Summary, s.Description, s.Tags = o.OperationID, o.Summary, o.Description, o.Tags
	}
	return s
}

// operation is what DropDocuments leaves of an operation.
func (s snapshotOperation) operation() tagging.Operation {
	return tagging.Operation{Method: s.Method, Path: s.Path, Operation: &openapi3.Operation{
		OperationID: s.OperationID, Summary: s.Summary, Description: s.Description, Tags: s.Tags,
	}}
}

// toolMeta is an OpenAPI tool's _meta, as describeTool makes it.
func toolMeta(d annotations.Derived) mcp.Meta {
	meta := mcp.Meta{MetaProvenance: d.Provenance}
	if d.Large {
		meta[MetaLarge] = true
	}
	return meta
}

// schemasAreBinding reports whether t's schemas are its binding's: the
// binding's maps themselves, or for a tool from a snapshot, the binding's
// JSON (see restoreTool).
func schemasAreBinding(t *Tool) bool {
	b := t.Binding
	if in, out := b.RawSchemas(); in != nil {
		tin, _ := t.Tool.InputSchema.(json.RawMessage)
		tout, _ := t.Tool.OutputSchema.(json.RawMessage)
		return bytes.Equal(tin, in) && (out == nil) == (t.Tool.OutputSchema == nil) && bytes.Equal(tout, out)
	}
	return sameMap(t.Tool.InputSchema, b.InputSchema) && (b.OutputSchema == nil) == (t.Tool.OutputSchema == nil) &&
		(b.OutputSchema == nil || sameMap(t.Tool.OutputSchema, b.OutputSchema))
}

// sameMap reports whether schema is the map m itself (not a copy).
func sameMap(schema any, m map[string]any) bool {
	s, ok := schema.(map[string]any)
	return ok && s != nil && m != nil && reflect.ValueOf(s).UnsafePointer() == reflect.ValueOf(m).UnsafePointer()
}

// snapshotSupported refuses a configuration whose tools a snapshot cannot
// hold (see the package's snapshot notes).
func snapshotSupported(cfg *config.Config) error {
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		why := ""
		switch {
		case u.MCP != nil:
			why = "an MCP server, whose tools are listed from it at start"
		case u.Playbooks != nil:
			why = "a playbook engine, whose playbooks are read from it at start"
		case u.Handler != nil:
			why = "served in process, its document read from its handler"
		case u.OpenAPI == "" && u.Document == nil:
			why = "without an OpenAPI document"
		}
		if why != "" {
			return &SnapshotError{What: "unsupported", Detail: fmt.Sprintf("upstream %s is %s: a snapshot holds OpenAPI upstreams only", u.Name, why)}
		}
	}
	return nil
}

// configSHA256 hashes what Build reads of cfg (resolved) to make the
// tools: each upstream's settings (its document is hashed apart, by its
// bytes), name_style, sanitize_text and max_catalog_bytes. What only
// serving reads is left out, so that one snapshot serves every replica of
// a deployment whatever its address, bounds or credentials: listen,
// timeouts, body and session bounds, auth, metrics, tasks, catalog.mode and
// prompts (made from the configuration at every start), and of an upstream
// its timeout, max_concurrent, queue_timeout, direct_transport and auth
// (its client's, made by the gateway from the live configuration). Any
// other upstream setting, one added later included, is hashed: a setting
// Build starts reading must not be one left out here.
func configSHA256(cfg *config.Config) (string, error) {
	ups := make([]config.Upstream, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		u.Handler, u.Document = nil, nil
		u.Timeout, u.MaxConcurrent, u.QueueTimeout, u.DirectTransport, u.Auth = 0, 0, 0, nil, auth.Upstream{}
		ups[i] = u
	}
	raw, err := json.Marshal(struct {
		NameStyle       string
		SanitizeText    bool
		MaxCatalogBytes int
		Upstreams       []config.Upstream
	}{cfg.NameStyle, cfg.SanitizesText(), cfg.MaxCatalogBytes, ups})
	if err != nil {
		return "", &SnapshotError{What: "config", Detail: fmt.Sprintf("hashing the configuration: %v", err)}
	}
	return sha256Hex(raw), nil
}

// fetchedSource is a document's bytes, read once to be hashed and parsed.
type fetchedSource struct {
	data []byte
	url  *url.URL // where an http(s) document was read from; nil for a file
}

// documentBytes reads u's document as Build would load it.
func documentBytes(ctx context.Context, u *config.Upstream, lo *upstream.LoadOptions) ([]byte, *url.URL, error) {
	if u.Document != nil {
		return u.Document, nil, nil
	}
	return upstream.ReadSource(ctx, u.OpenAPI, lo)
}

// documentSHA256 is the SHA-256 of the bytes documentBytes would return. A
// file is hashed as it is read, not held: Kubernetes' is 4 MB.
func documentSHA256(ctx context.Context, u *config.Upstream, lo *upstream.LoadOptions) (string, error) {
	if src, err := url.Parse(u.OpenAPI); u.Document != nil || err == nil && (src.Scheme == "http" || src.Scheme == "https") {
		data, _, err := documentBytes(ctx, u, lo)
		if err != nil {
			return "", err
		}
		return sha256Hex(data), nil
	}
	f, err := os.Open(u.OpenAPI)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, upstream.MaxDocumentBytes+1))
	if err != nil {
		return "", err
	}
	if n > upstream.MaxDocumentBytes {
		return "", fmt.Errorf("document is larger than %d MiB", upstream.MaxDocumentBytes>>20)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// parseFetched parses a document read by documentBytes as
// loadUpstreamDocument would have read and parsed it.
func parseFetched(ctx context.Context, u *config.Upstream, f fetchedSource) (*upstream.Document, error) {
	doc, err := upstream.ParseDocument(ctx, f.data)
	if err != nil {
		return nil, err
	}
	doc.Source, doc.URL = u.OpenAPI, f.url
	return doc, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// PayloadChecksum is the header's checksum of a snapshot's payload (all
// that follows the header's line), for whoever rewrites one: the xxHash64
// of the xxHash64s of its 256 KiB chunks, summed on every core (it is the
// first read of the file's bytes, and on this VM a first touch of a page is
// a fault: 4-8 ms for Kubernetes' 4.5 MB, shared with the documents' hash
// running beside it). A checksum, not SHA-256: it catches a file truncated
// or damaged as surely, at 15-20 GB/s where SHA-256 runs at 1.5; and no
// hash in the header defends against an altered file, since whoever can
// write the file can write its header too: what the catalog relies on is
// checked as it is read (restoreSnapshot).
func PayloadChecksum(b []byte) string {
	n := (len(b) + payloadChunk - 1) / payloadChunk
	sums := make([]byte, 8*n)
	parallel.Do(n, func(i int) {
		binary.BigEndian.PutUint64(sums[8*i:], xxhash.Sum64(b[i*payloadChunk:min((i+1)*payloadChunk, len(b))]))
	})
	return fmt.Sprintf("xxh64/256KiB:%016x", xxhash.Sum64(sums))
}

// payloadChunk is the size of the chunks PayloadChecksum sums on every core.
const payloadChunk = 256 << 10

// parseLine decodes one line of a payload into v (segmentio's ZeroCopy: see
// restoreSnapshot), and refuses anything after its JSON value.
func parseLine(line []byte, v any) error {
	rest, err := sjson.Parse(line, v, sjson.ZeroCopy)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return errors.New("more than one JSON value on a line")
	}
	return nil
}
