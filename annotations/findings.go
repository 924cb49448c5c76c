package annotations

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SecurityRequirement is one security scheme of the document and the scopes
// an operation needs of it.
type SecurityRequirement struct {
	Scheme string   `json:"scheme"`
	Scopes []string `json:"scopes,omitempty"`
}

// SecurityAlternative is one way an operation may be authorized: every scheme
// in it at once (AND), as one entry of an OpenAPI security list. Empty means
// anonymous access.
type SecurityAlternative []SecurityRequirement

// ToolFacts is what the audit knows of one tool: where it comes from, what it
// calls, the hints it claims and why.
type ToolFacts struct {
	Name        string               `json:"name"`
	SourceName  string               `json:"sourceName"` // what the name derives from
	Mangled     bool                 `json:"mangled,omitempty"`
	Upstream    string               `json:"upstream"`
	Method      string               `json:"method"`
	Path        string               `json:"path"`
	OperationID string               `json:"operationId,omitempty"`
	Description string               `json:"description,omitempty"`
	Tags        []string             `json:"tags,omitempty"`
	Annotations *mcp.ToolAnnotations `json:"annotations"`
	Provenance  Provenance           `json:"provenance"`
	Large       bool                 `json:"large,omitempty"`
	// Security lists the alternatives that authorize the operation (any one
	// suffices: OR), each a set of schemes needed together (AND); empty when
	// the document declares none.
	Security []SecurityAlternative `json:"security"`
	// InputSchemaSHA256 is the hex SHA-256 of the input schema's JSON.
	InputSchemaSHA256 string `json:"inputSchemaSha256"`
	// Source is the document, Location the operation's JSON pointer in it,
	// and Line its line when known (0 otherwise).
	Source   string `json:"source"`
	Location string `json:"location"`
	Line     int    `json:"line,omitempty"`
	// RefusedHeaders are header parameters the operation declares that no
	// argument may set (hop-by-hop, credentials, forwarding, method
	// overrides): the tool does not take them.
	RefusedHeaders []string `json:"refusedHeaders,omitempty"`
	// NameTakenBy names the tool that holds the name this one's source
	// asked for ("upstream/name"), when another tool took it first and this
	// one got a hashed name instead; empty otherwise.
	NameTakenBy string `json:"nameTakenBy,omitempty"`
	// DescriptionSHA256 and TitleSHA256 are the hex SHA-256 of the tool's
	// description and title as the document (or the configuration) gives
	// them: before the gateway removes hidden characters, and without the
	// notes a size budget adds, so that they change only when the texts
	// do. The lockfile records them.
	DescriptionSHA256 string `json:"descriptionSha256"`
	TitleSHA256       string `json:"titleSha256"`
	// OutputSchemaSHA256 is the hex SHA-256 of the output schema a client
	// is sent, before sanitizing; empty without one. The lockfile records
	// it: the model reads its texts and enums as it reads the description.
	OutputSchemaSHA256 string `json:"outputSchemaSha256,omitempty"`

	// Texts are the tool's texts a client reads, for the text rules;
	// OwnHosts the API's own hosts (its servers, base URL, documentation),
	// which links and images may point to. Neither is in reports.
	Texts    []Text   `json:"-"`
	OwnHosts []string `json:"-"`
	// SanitizeText says the gateway serves the texts without the hidden
	// characters the text rules flag (configuration sanitize_text).
	SanitizeText bool `json:"-"`
}

// Severity of a finding, as SARIF spells levels.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityNote    Severity = "note"
)

// rank orders severities, most severe highest.
func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 3
	case SeverityWarning:
		return 2
	case SeverityNote:
		return 1
	}
	return 0
}

// A Rule is one lint check. IDs are stable: a finding's ID never changes
// meaning across releases.
type Rule struct {
	ID          string                    `json:"id"`
	Name        string                    `json:"name"`
	Description string                    `json:"description"`
	Severity    Severity                  `json:"severity"`
	check       func(t *ToolFacts) string // the finding's message, or ""; nil for catalog-level rules
	// text, for the text rules, finds what the rule flags in one text, and
	// say words the findings' details for a message ("has …").
	text func(s string, own *hostSet) []textHit
	say  func(details []string, t *ToolFacts) string
}

// A Finding is a rule that fired on a tool.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Tool     string   `json:"tool"`
	Message  string   `json:"message"`
	Source   string   `json:"source"`
	Location string   `json:"location"`
	Line     int      `json:"line,omitempty"`
	// Field, for the text rules, is the text's JSON pointer in the tool,
	// with the characters the rules flag written \uXXXX (a report must not
	// carry them); CodePoints the flagged characters, "U+202E".
	Field      string   `json:"field,omitempty"`
	CodePoints []string `json:"codePoints,omitempty"`
}

// destructiveWords are verbs that, in an operation's name or path, suggest it
// destroys something. Compiled on first use (the lint): under a millisecond,
// but every process's start paid it.
var destructiveWords = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[^a-z])(delete|remove|purge|destroy|cancel|terminate|abort|wipe|erase|revoke|drop)`)
})

// LintRules are the audit's lint rules.
var LintRules = []Rule{
	{ID: "MCPG001", Name: "safe-method-not-read-only", Severity: SeverityWarning,
		Description: "A GET or HEAD operation is not read-only: an override or x-mcp-annotations says it writes.",
		check: func(t *ToolFacts) string {
			if (t.Method == http.MethodGet || t.Method == http.MethodHead) && !t.Annotations.ReadOnlyHint {
				return fmt.Sprintf("%s %s is not read-only (readOnlyHint from %s)", t.Method, t.Path, t.Provenance.ReadOnly)
			}
			return ""
		}},
	{ID: "MCPG002", Name: "delete-read-only", Severity: SeverityError,
		Description: "A DELETE operation is marked read-only: clients may call it without asking.",
		check: func(t *ToolFacts) string {
			if t.Method == http.MethodDelete && t.Annotations.ReadOnlyHint {
				return fmt.Sprintf("DELETE %s is marked read-only (readOnlyHint from %s)", t.Path, t.Provenance.ReadOnly)
			}
			return ""
		}},
	{ID: "MCPG003", Name: "delete-not-destructive", Severity: SeverityError,
		Description: "A DELETE operation is not marked destructive.",
		check: func(t *ToolFacts) string {
			if t.Method == http.MethodDelete && !destructive(t) {
				return fmt.Sprintf("DELETE %s is not destructive (destructiveHint from %s)", t.Path, t.Provenance.Destructive)
			}
			return ""
		}},
	{ID: "MCPG004", Name: "post-read-only-by-tag", Severity: SeverityWarning,
		Description: "A POST operation is read-only only because of a tag, with no explicit declaration in x-mcp-annotations or the configuration.",
		check: func(t *ToolFacts) string {
			if t.Method == http.MethodPost && t.Annotations.ReadOnlyHint && strings.HasPrefix(t.Provenance.ReadOnly, "tag:") {
				return fmt.Sprintf("POST %s is read-only only through %s; declare it in x-mcp-annotations (READONLY_TOOL) or the configuration", t.Path, t.Provenance.ReadOnly)
			}
			return ""
		}},
	{ID: "MCPG005", Name: "read-only-and-destructive", Severity: SeverityError,
		Description: "A tool is both read-only and destructive: the hints contradict each other.",
		check: func(t *ToolFacts) string {
			if t.Annotations.ReadOnlyHint && destructive(t) {
				return fmt.Sprintf("readOnlyHint (from %s) and destructiveHint (from %s) are both true", t.Provenance.ReadOnly, t.Provenance.Destructive)
			}
			return ""
		}},
	{ID: "MCPG006", Name: "no-description", Severity: SeverityWarning,
		Description: "An exposed operation has neither a description nor a summary: the model must guess what it does.",
		check: func(t *ToolFacts) string {
			switch {
			case strings.TrimSpace(t.Description) != "":
			case t.Method == "": // a federated tool
				return fmt.Sprintf("tool %s of upstream %s has no description", t.SourceName, t.Upstream)
			default:
				return fmt.Sprintf("%s %s has no description or summary", t.Method, t.Path)
			}
			return ""
		}},
	{ID: "MCPG007", Name: "name-mangled", Severity: SeverityNote,
		Description: "The tool name had to be changed to be valid for clients; set x-mcp-name or a rename to choose it.",
		check: func(t *ToolFacts) string {
			if t.Mangled && t.NameTakenBy == "" { // a clash is MCPG019's
				return fmt.Sprintf("name %q became %q", t.SourceName, t.Name)
			}
			return ""
		}},
	{ID: "MCPG008", Name: "looks-destructive", Severity: SeverityWarning,
		Description: "An operation's name or path says it deletes, cancels or aborts something, but it is not marked destructive.",
		check: func(t *ToolFacts) string {
			if destructive(t) || t.Annotations.ReadOnlyHint {
				return ""
			}
			// Cut camelCase apart first (processDelete, orderCancel), as
			// titles are.
			if m := destructiveWords().FindStringSubmatch(splitWords(t.OperationID) + " " + t.Path + " " + splitWords(t.Name)); m != nil {
				return fmt.Sprintf("%q suggests it is destructive, but destructiveHint is false (from %s)", strings.ToLower(m[2]), t.Provenance.Destructive)
			}
			return ""
		}},
	{ID: "MCPG009", Name: "open-world-undeclared", Severity: SeverityNote,
		Description: "A tool claims an open world without declaring it: an API's tools usually act on its own closed world.",
		check: func(t *ToolFacts) string {
			if ow := t.Annotations.OpenWorldHint; ow != nil && *ow && t.Provenance.OpenWorld == "default" {
				return "openWorldHint is true by the upstream's default, not by a declaration"
			}
			return ""
		}},
	{ID: "MCPG010", Name: "forbidden-header-parameter", Severity: SeverityWarning,
		Description: "The operation declares header parameters that a model must never set (hop-by-hop, Cookie, Host, Proxy-Authorization, X-Forwarded-*, Forwarded, method overrides); the tool does not take them.",
		check: func(t *ToolFacts) string {
			if len(t.RefusedHeaders) > 0 {
				return fmt.Sprintf("header parameters %s are not arguments: a model must never set them", strings.Join(t.RefusedHeaders, ", "))
			}
			return ""
		}},
	{ID: RuleOperationSkipped, Name: "operation-skipped", Severity: SeverityWarning,
		Description: "A selected operation could not be made a tool and is not served, e.g. its path template has a placeholder no parameter declares."},
	{ID: "MCPG012", Name: "invisible-characters", Severity: SeverityError,
		Description: "A text a client reads holds characters that render as nothing (zero-width spaces and joiners U+200B–U+200D, word joiner U+2060, U+FEFF, other Default_Ignorable code points, a run of variation selectors): they can hide instructions for the model from a reviewer. Removed when served (sanitize_text).",
		text:        hiddenHits(invisible),
		say: func(d []string, t *ToolFacts) string {
			return "has invisible characters " + strings.Join(d, ", ") + sanitized(t)
		}},
	{ID: "MCPG013", Name: "bidi-controls", Severity: SeverityError,
		Description: "A text a client reads holds bidirectional embedding, override or isolate controls (U+202A–U+202E, U+2066–U+2069): what a reviewer sees is not the order the model reads (CVE-2021-42574). Removed when served (sanitize_text).",
		text:        hiddenHits(bidi),
		say: func(d []string, t *ToolFacts) string {
			return "has bidirectional controls " + strings.Join(d, ", ") + sanitized(t)
		}},
	{ID: "MCPG014", Name: "tag-characters", Severity: SeverityError,
		Description: "A text a client reads holds Unicode tag characters (U+E0000–U+E007F), an invisible copy of ASCII that models read (outside an emoji subdivision flag). Removed when served (sanitize_text).",
		text:        tagHits,
		say: func(d []string, t *ToolFacts) string {
			return "has tag characters (invisible ASCII): " + strings.Join(d, ", ") + sanitized(t)
		}},
	{ID: "MCPG015", Name: "html-comment", Severity: SeverityWarning,
		Description: "A text a client reads holds an HTML comment, which a reviewer reading the rendered text does not see. Descriptions are served without it.",
		text:        commentHits,
		say: func(d []string, _ *ToolFacts) string {
			return "has an HTML comment, hidden from whoever reads the rendered text: " + strings.Join(d, ", ")
		}},
	{ID: "MCPG016", Name: "instruction-tag", Severity: SeverityWarning,
		Description: "A text a client reads holds an instruction-like tag (<IMPORTANT>, <system>, <instructions>, a closed <user>…</user>) or a chat-template token (<|im_start|>, [INST], <<SYS>>): the form tool-poisoning instructions take.",
		text:        instructionHits,
		say: func(d []string, _ *ToolFacts) string {
			return "has instruction-like tags " + strings.Join(d, ", ")
		}},
	{ID: "MCPG017", Name: "external-image", Severity: SeverityWarning,
		Description: "A text a client reads has an image (or another resource a renderer loads by itself: HTML img, iframe, script…) on a host other than the API's own: loading it can carry data out without a click.",
		text:        linkHits(true),
		say: func(d []string, _ *ToolFacts) string {
			return "has images from hosts other than the API's: " + strings.Join(d, ", ")
		}},
	{ID: "MCPG018", Name: "external-link", Severity: SeverityWarning,
		Description: "A text a client reads links (Markdown or HTML) to a host other than the API's own: its servers, base URL and documentation (externalDocs), or another host of their registrable domains.",
		text:        linkHits(false),
		say: func(d []string, _ *ToolFacts) string {
			return "links to hosts other than the API's: " + strings.Join(d, ", ")
		}},
	{ID: "MCPG019", Name: "name-clash", Severity: SeverityWarning,
		Description: "Two tools asked for one name (two upstreams, or two operations of one): the first keeps it and this one is served under a hashed name, which a client or a prompt that names the tool will not expect. Rename one (rename, x-mcp-name or tool_prefix).",
		check: func(t *ToolFacts) string {
			if t.NameTakenBy != "" {
				return fmt.Sprintf("name %q is taken by %s: this tool is served as %q", t.SourceName, t.NameTakenBy, t.Name)
			}
			return ""
		}},
	{ID: "MCPG020", Name: "destructive-name-read-only", Severity: SeverityError,
		Description: "A federated MCP server's tool whose name says it deletes, removes or drops something claims to be read-only: a client that auto-approves read-only calls would run it without asking.",
		check: func(t *ToolFacts) string {
			if t.Method != "" || !t.Annotations.ReadOnlyHint {
				return ""
			}
			if m := destructiveWords().FindStringSubmatch(splitWords(t.SourceName) + " " + splitWords(t.Name)); m != nil {
				return fmt.Sprintf("%q suggests it is destructive, but readOnlyHint is true (from %s)", strings.ToLower(m[2]), t.Provenance.ReadOnly)
			}
			return ""
		}},
	{ID: RuleResourceRefused, Name: "resource-refused", Severity: SeverityWarning,
		Description: "An operation selected as an MCP resource (x-mcp-resource, the agent-resource tag, an upstream's resources rules) cannot be one and is not served as one: it is not a GET, or it requires a header, cookie or request body that a resource URI cannot carry, or its URI does not parse or is taken."},
	{ID: RulePlaybookMCP, Name: "playbook-mcp-unresolved", Severity: SeverityWarning,
		Description: "A playbook's mcp: section (NoETL's MCP schema extension) names what it does not declare (a turn's tools_allowed, model, or use: resource:NAME), declares a name twice within a section, or has a prompt the gateway cannot serve: the engine would fail the run, and the gateway serves what it can of the rest."},
}

// sanitized says what becomes of the hidden characters a finding names.
func sanitized(t *ToolFacts) string {
	if t.SanitizeText {
		return " (removed when served)"
	}
	return " (served as they are: sanitize_text is false)"
}

// RuleOperationSkipped is the ID of the finding for a selected operation that
// is not served (see SkippedFinding).
const RuleOperationSkipped = "MCPG011"

// SkippedFinding is the finding for a selected operation that could not be
// made a tool: method and path name it, reason says why.
func SkippedFinding(source, location string, line int, method, path, reason string) Finding {
	return Finding{Rule: RuleOperationSkipped, Severity: SeverityWarning, Tool: method + " " + path,
		Message: fmt.Sprintf("%s %s is not served: %s", method, path, reason), Source: source, Location: location, Line: line}
}

// RuleResourceRefused is the ID of the finding for an operation selected
// as a resource that cannot be one (see ResourceRefusedFinding).
const RuleResourceRefused = "MCPG021"

// ResourceRefusedFinding is the finding for an operation that by
// (x-mcp-resource, the agent-resource tag, a resources rule) selected as
// a resource and that cannot be one: method and path name it, reason says
// why (not a GET; a required header, cookie or body).
func ResourceRefusedFinding(source, location string, line int, method, path, by, reason string) Finding {
	return Finding{Rule: RuleResourceRefused, Severity: SeverityWarning, Tool: method + " " + path,
		Message: fmt.Sprintf("%s %s is selected as a resource (by %s) but is not served as one: %s", method, path, by, reason), Source: source, Location: location, Line: line}
}

// RulePlaybookMCP is the ID of the finding for a playbook's mcp: section
// (NoETL's MCP schema extension) that names what it does not declare, or
// declares a name twice: see the catalog's playbookmcp.go.
const RulePlaybookMCP = "MCPG022"

func destructive(t *ToolFacts) bool {
	return t.Annotations.DestructiveHint == nil || *t.Annotations.DestructiveHint
}

// Lint runs every rule over the tools. Findings come in tool order, then rule
// order; a text rule's, in the order of the tool's texts.
func Lint(tools []ToolFacts) []Finding {
	var out []Finding
	for i := range tools {
		t := &tools[i]
		var own *hostSet
		for _, r := range LintRules {
			switch {
			case r.check != nil:
				if msg := r.check(t); msg != "" {
					out = append(out, Finding{Rule: r.ID, Severity: r.Severity, Tool: t.Name,
						Message: t.Name + ": " + msg, Source: t.Source, Location: t.Location, Line: t.Line})
				}
			case r.text != nil:
				if own == nil {
					own = newHostSet(t.OwnHosts)
				}
				for j := range t.Texts {
					out = append(out, lintText(r, t, &t.Texts[j], own)...)
				}
			}
		}
	}
	return out
}

// lintText runs the text rule r over one text: what it finds in the text's
// sources and in the text itself, each thing once, on the line of the first
// source that has it (the tool's line when none does). One finding per line.
func lintText(r Rule, t *ToolFacts, x *Text, own *hostSet) []Finding {
	type found struct {
		hit  textHit
		line int
	}
	var list []found
	index := map[string]int{}
	add := func(hits []textHit, line int) {
		for _, h := range hits {
			if _, ok := index[h.key]; !ok {
				index[h.key] = len(list)
				list = append(list, found{h, line})
			}
		}
	}
	valueLine := t.Line // the text's own line when a source is the text itself
	for _, src := range x.Sources {
		if src.Raw != x.Value {
			add(r.text(src.Raw, own), src.Line)
		} else if src.Line > 0 && valueLine == t.Line {
			valueLine = src.Line
		}
	}
	add(r.text(x.Value, own), valueLine)
	if len(list) == 0 {
		return nil
	}
	var out []Finding
	byLine := map[int]int{} // line → index in out
	field := displayField(x.Field)
	what := field
	if x.Name {
		what += " (a property name)"
	}
	var details [][]string
	for _, f := range list {
		line := f.line
		if line == 0 {
			line = t.Line // a source whose line is not known
		}
		k, ok := byLine[line]
		if !ok {
			k = len(out)
			byLine[line] = k
			out = append(out, Finding{Rule: r.ID, Severity: r.Severity, Tool: t.Name, Source: t.Source,
				Location: t.Location, Line: line, Field: field})
			details = append(details, nil)
		}
		details[k] = append(details[k], f.hit.detail)
		for _, c := range f.hit.runes {
			if cp := fmt.Sprintf("U+%04X", c); !slices.Contains(out[k].CodePoints, cp) {
				out[k].CodePoints = append(out[k].CodePoints, cp)
			}
		}
	}
	for k := range out {
		out[k].Message = t.Name + ": " + what + " " + r.say(details[k], t)
	}
	return out
}

// displayField writes a JSON pointer for a report: the characters the text
// rules flag (which a property name may hold) as \uXXXX.
func displayField(p string) string {
	if !mayHide(p) {
		return p
	}
	var b strings.Builder
	last := 0
	hiddenRunes(p, func(c textRune, _ hiddenKind) {
		b.WriteString(p[last:c.i])
		if c.r > 0xFFFF {
			fmt.Fprintf(&b, `\U%08X`, c.r)
		} else {
			fmt.Fprintf(&b, `\u%04X`, c.r)
		}
		last = c.j
	})
	b.WriteString(p[last:])
	return b.String()
}

// TextFlagged returns a function that reports whether a text rule flags s,
// a text a client reads of an API whose own hosts are ownHosts. The gateway
// asks it of a document's texts, to find where a tool's text that the HTML
// conversion changed comes from.
func TextFlagged(ownHosts []string) func(s string) bool {
	own := newHostSet(ownHosts)
	return func(s string) bool {
		for _, r := range LintRules {
			if r.text != nil && len(r.text(s, own)) > 0 {
				return true
			}
		}
		return false
	}
}
