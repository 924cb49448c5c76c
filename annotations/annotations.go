// Package annotations derives a tool's MCP ToolAnnotations — readOnly,
// destructive, idempotent and openWorld hints, and the title — from an OpenAPI
// operation, and records for every hint the rule that set it.
//
// The first source that speaks for a hint wins:
//
//  1. a configuration override;
//  2. the operation's x-mcp-annotations: one of orchestrator-core's named sets
//     (READONLY_TOOL, WRITE_TOOL, IDEMPOTENT_WRITE_TOOL, DESTRUCTIVE_TOOL) or
//     an object with any of the hint fields and title;
//  3. the tags agent-readonly and agent-destructive (names configurable);
//  4. the HTTP method: GET, HEAD and OPTIONS are read-only; DELETE is
//     destructive; read-only, PUT and DELETE are idempotent.
//
// openWorld is false unless configured: an API fronted by the gateway is its
// owner's closed world. All four hints are always set explicitly, because the
// protocol's defaults (destructive and openWorld true) are unsafe to rely on.
//
// The package also holds what `mcpgate audit` reports: the lint rules, on
// the hints (findings.go) and on the texts a client reads, where a document
// can hide instructions for the model (texts.go, hidden.go, which also
// sanitizes them: SanitizeText); the report in its formats; and the
// lockfile and its drift (lockdrift.go).
//
// The package is pure: no HTTP, no serving.
package annotations

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Default tag names, after orchestrator-core.
const (
	DefaultReadOnlyTag    = "agent-readonly"
	DefaultDestructiveTag = "agent-destructive"
	DefaultLargeTag       = "agent-large"
)

// Extension is the operation extension that declares annotations.
const Extension = "x-mcp-annotations"

// Rules configures [Derive]. The zero value uses the default tag names and
// openWorld false.
type Rules struct {
	ReadOnlyTag    string // default DefaultReadOnlyTag
	DestructiveTag string // default DefaultDestructiveTag
	LargeTag       string // default DefaultLargeTag
	// OpenWorld is the openWorld hint of every tool that does not declare its
	// own.
	OpenWorld bool
}

// Override is a per-tool configuration override. Nil fields do not speak.
type Override struct {
	ReadOnly    *bool  `json:"readOnlyHint,omitempty" yaml:"read_only"`
	Destructive *bool  `json:"destructiveHint,omitempty" yaml:"destructive"`
	Idempotent  *bool  `json:"idempotentHint,omitempty" yaml:"idempotent"`
	OpenWorld   *bool  `json:"openWorldHint,omitempty" yaml:"open_world"`
	Title       string `json:"title,omitempty" yaml:"title"`
}

// Input is what Derive reads of one operation.
type Input struct {
	Method      string
	OperationID string
	Tags        []string
	// Extensions are the operation's x- extensions (only x-mcp-annotations is
	// read).
	Extensions map[string]any
	// Override is the configuration's word on this tool, or nil.
	Override *Override
}

// Provenance records, for each hint, the rule that set it: "config",
// "x-mcp-annotations:READONLY_TOOL", "x-mcp-annotations", "tag:agent-readonly",
// "method:GET", "readOnly" (idempotent because read-only), "default".
type Provenance struct {
	ReadOnly    string `json:"readOnlyHint"`
	Destructive string `json:"destructiveHint"`
	Idempotent  string `json:"idempotentHint"`
	OpenWorld   string `json:"openWorldHint"`
	Title       string `json:"title"`
	Large       string `json:"large,omitempty"`
}

// Derived is the outcome of Derive.
type Derived struct {
	Annotations *mcp.ToolAnnotations // all four hints set
	Provenance  Provenance
	// Large reports the tool may return many records (tag agent-large).
	Large bool
}

type hintSet struct {
	readOnly, destructive, idempotent, openWorld *bool
	title                                        string
}

// namedSets are orchestrator-core's four annotation sets.
var namedSets = map[string]hintSet{
	"READONLY_TOOL":         {readOnly: ptr(true), destructive: ptr(false), idempotent: ptr(true), openWorld: ptr(false)},
	"WRITE_TOOL":            {readOnly: ptr(false), destructive: ptr(false), idempotent: ptr(false), openWorld: ptr(false)},
	"IDEMPOTENT_WRITE_TOOL": {readOnly: ptr(false), destructive: ptr(false), idempotent: ptr(true), openWorld: ptr(false)},
	"DESTRUCTIVE_TOOL":      {readOnly: ptr(false), destructive: ptr(true), idempotent: ptr(true), openWorld: ptr(false)},
}

func ptr(b bool) *bool { return &b }

// Derive computes the annotations of one operation. It fails only when
// x-mcp-annotations is malformed: an unknown set name, or a field of the wrong
// type.
func Derive(in Input, rules *Rules) (Derived, error) {
	var r Rules
	if rules != nil {
		r = *rules
	}
	if r.ReadOnlyTag == "" {
		r.ReadOnlyTag = DefaultReadOnlyTag
	}
	if r.DestructiveTag == "" {
		r.DestructiveTag = DefaultDestructiveTag
	}
	if r.LargeTag == "" {
		r.LargeTag = DefaultLargeTag
	}
	ext, extSrc, err := parseExtension(in.Extensions[Extension])
	if err != nil {
		return Derived{}, err
	}
	var cfg hintSet
	if o := in.Override; o != nil {
		cfg = hintSet{readOnly: o.ReadOnly, destructive: o.Destructive, idempotent: o.Idempotent, openWorld: o.OpenWorld, title: o.Title}
	}
	method := strings.ToUpper(in.Method)
	hasTag := func(t string) bool {
		for _, x := range in.Tags {
			if x == t {
				return true
			}
		}
		return false
	}

	var d Derived
	var p Provenance
	pick := func(cfgV, extV *bool) (bool, string, bool) {
		switch {
		case cfgV != nil:
			return *cfgV, "config", true
		case extV != nil:
			return *extV, extSrc, true
		}
		return false, "", false
	}

	readOnly, src, ok := pick(cfg.readOnly, ext.readOnly)
	if !ok {
		switch {
		case hasTag(r.ReadOnlyTag):
			readOnly, src = true, "tag:"+r.ReadOnlyTag
		default:
			readOnly = method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
			src = "method:" + method
		}
	}
	p.ReadOnly = src

	destructive, src, ok := pick(cfg.destructive, ext.destructive)
	if !ok {
		// orchestrator-core's rule: DELETE or the destructive tag, whatever
		// readOnly says; the audit flags a tool that ends up both.
		switch {
		case hasTag(r.DestructiveTag):
			destructive, src = true, "tag:"+r.DestructiveTag
		default:
			destructive, src = method == http.MethodDelete, "method:"+method
		}
	}
	p.Destructive = src

	idempotent, src, ok := pick(cfg.idempotent, ext.idempotent)
	if !ok {
		switch {
		case readOnly:
			idempotent, src = true, "readOnly"
		default:
			idempotent, src = method == http.MethodPut || method == http.MethodDelete, "method:"+method
		}
	}
	p.Idempotent = src

	openWorld, src, ok := pick(cfg.openWorld, ext.openWorld)
	if !ok {
		openWorld, src = r.OpenWorld, "default"
	}
	p.OpenWorld = src

	title := ""
	switch {
	case cfg.title != "":
		title, p.Title = cfg.title, "config"
	case titleExt(in.Extensions) != "":
		title, p.Title = titleExt(in.Extensions), TitleExtension
	case ext.title != "":
		title, p.Title = ext.title, Extension
	case in.OperationID != "":
		title, p.Title = Title(in.OperationID), "operationId"
	}
	if hasTag(r.LargeTag) {
		d.Large, p.Large = true, "tag:"+r.LargeTag
	}

	d.Annotations = &mcp.ToolAnnotations{
		ReadOnlyHint:    readOnly,
		DestructiveHint: ptr(destructive),
		IdempotentHint:  idempotent,
		OpenWorldHint:   ptr(openWorld),
		Title:           title,
	}
	d.Provenance = p
	return d, nil
}

// parseExtension reads x-mcp-annotations: a set name, or an object with any of
// readOnlyHint, destructiveHint, idempotentHint, openWorldHint and title.
func parseExtension(v any) (hintSet, string, error) {
	switch x := v.(type) {
	case nil:
		return hintSet{}, "", nil
	case string:
		set, ok := namedSets[strings.TrimSpace(x)]
		if !ok {
			return hintSet{}, "", fmt.Errorf("annotations: %s: unknown set %q (want READONLY_TOOL, WRITE_TOOL, IDEMPOTENT_WRITE_TOOL or DESTRUCTIVE_TOOL)", Extension, x)
		}
		return set, Extension + ":" + strings.TrimSpace(x), nil
	case map[string]any:
		var hs hintSet
		for k, val := range x {
			var dst **bool
			switch k {
			case "readOnlyHint":
				dst = &hs.readOnly
			case "destructiveHint":
				dst = &hs.destructive
			case "idempotentHint":
				dst = &hs.idempotent
			case "openWorldHint":
				dst = &hs.openWorld
			case "title":
				s, ok := val.(string)
				if !ok {
					return hintSet{}, "", fmt.Errorf("annotations: %s.title must be a string", Extension)
				}
				hs.title = s
				continue
			default:
				return hintSet{}, "", fmt.Errorf("annotations: %s: unknown field %q", Extension, k)
			}
			b, ok := val.(bool)
			if !ok {
				return hintSet{}, "", fmt.Errorf("annotations: %s.%s must be a boolean", Extension, k)
			}
			*dst = ptr(b)
		}
		return hs, Extension, nil
	default:
		return hintSet{}, "", fmt.Errorf("annotations: %s must be a set name or an object, not %T", Extension, v)
	}
}

// TitleExtension is the operation extension that names a tool's title; it
// wins over a title inside x-mcp-annotations, and loses only to the
// configuration.
const TitleExtension = "x-mcp-title"

// titleExt returns a non-empty string x-mcp-title, or "".
func titleExt(ext map[string]any) string {
	s, _ := ext[TitleExtension].(string)
	return strings.TrimSpace(s)
}

// Title turns an operationId into a title. For orchestrator-core's snake_case
// ids it is exactly orchestrator-core's rule: "_" becomes a space, then
// Python's str.title() — in every run of cased letters the first is
// upper-cased (title-cased) and the rest lower-cased; digits, spaces and other
// uncased characters end a run. So that camelCase and path-like ids read as
// words too, the separators "/", "." and "-" become spaces as "_" does, and a
// word boundary is cut where a lower-case letter or digit meets an upper-case
// one (getPetById), and before the last capital of a run of three or more
// followed by a lower-case letter (HTTPServer → HTTP Server); a run of two is
// kept whole, so OAuth stays one word.
//
//	get_workflow_by_id       → "Get Workflow By Id"
//	list_OAuth_clients       → "List Oauth Clients"
//	getPetById               → "Get Pet By Id"
//	repos/get                → "Repos Get"
//	listCoreV1NamespacedPod  → "List Core V1 Namespaced Pod"
//	v2items                  → "V2Items"
//
// Go's deprecated strings.Title differs: it splits only on spaces and
// punctuation, and never lower-cases.
func Title(operationID string) string {
	return pythonTitle(splitWords(operationID))
}

// splitWords turns separators into spaces and cuts camelCase words apart,
// as Title describes.
func splitWords(id string) string {
	rs := []rune(id)
	var sb strings.Builder
	sb.Grow(len(id) + 8)
	for i, r := range rs {
		switch r {
		case '_', '/', '.', '-':
			sb.WriteByte(' ')
			continue
		}
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			switch {
			case unicode.IsLower(prev) || unicode.IsDigit(prev):
				sb.WriteByte(' ')
			case unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) &&
				i >= 2 && unicode.IsUpper(rs[i-2]):
				sb.WriteByte(' ')
			}
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// pythonTitle is CPython's str.title().
func pythonTitle(src string) string {
	var sb strings.Builder
	sb.Grow(len(src))
	// x/text's Casers keep state while they work: one per call, since
	// catalogs are built at the same time (a reload's beside a relist).
	lowerCaser, titleCaser := cases.Lower(language.Und), cases.Title(language.Und)
	// Python lower-cases a run with the full Unicode mappings and in context
	// (final sigma), then title-cases its first character with the full
	// mapping (ß → "Ss", ﬁ → "Fi"). Do the same, a run at a time.
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		if !isCased(r) {
			sb.WriteString(src[i : i+n])
			i += n
			continue
		}
		j := i + n
		for j < len(src) {
			r2, n2 := utf8.DecodeRuneInString(src[j:])
			if !isCased(r2) {
				break
			}
			j += n2
		}
		lowered := lowerCaser.String(src[i:j])
		first := lowerCaser.String(string(r)) // İ lowers to two runes
		sb.WriteString(titleCaser.String(string(r)))
		sb.WriteString(strings.TrimPrefix(lowered, first))
		i = j
	}
	return sb.String()
}

// isCased reports whether Python counts r as cased: a letter of category Lu,
// Ll or Lt, or one with the Other_Lowercase or Other_Uppercase property
// (ª, ʰ).
func isCased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}
