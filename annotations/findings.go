package annotations

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

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
}

// destructiveWords are verbs that, in an operation's name or path, suggest it
// destroys something.
var destructiveWords = regexp.MustCompile(`(?i)(^|[^a-z])(delete|remove|purge|destroy|cancel|terminate|abort|wipe|erase|revoke|drop)`)

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
			if strings.TrimSpace(t.Description) == "" {
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
			if m := destructiveWords.FindStringSubmatch(splitWords(t.OperationID) + " " + t.Path + " " + splitWords(t.Name)); m != nil {
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
	{ID: "MCPG019", Name: "name-clash", Severity: SeverityWarning,
		Description: "Two tools asked for one name (two upstreams, or two operations of one): the first keeps it and this one is served under a hashed name, which a client or a prompt that names the tool will not expect. Rename one (rename, x-mcp-name or tool_prefix).",
		check: func(t *ToolFacts) string {
			if t.NameTakenBy != "" {
				return fmt.Sprintf("name %q is taken by %s: this tool is served as %q", t.SourceName, t.NameTakenBy, t.Name)
			}
			return ""
		}},
	{ID: RuleOperationSkipped, Name: "operation-skipped", Severity: SeverityWarning,
		Description: "A selected operation could not be made a tool and is not served, e.g. its path template has a placeholder no parameter declares."},
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

func destructive(t *ToolFacts) bool {
	return t.Annotations.DestructiveHint == nil || *t.Annotations.DestructiveHint
}

// Lint runs every rule over the tools. Findings come in tool order, then rule
// order.
func Lint(tools []ToolFacts) []Finding {
	var out []Finding
	for i := range tools {
		t := &tools[i]
		for _, r := range LintRules {
			if r.check == nil {
				continue
			}
			if msg := r.check(t); msg != "" {
				out = append(out, Finding{Rule: r.ID, Severity: r.Severity, Tool: t.Name,
					Message: t.Name + ": " + msg, Source: t.Source, Location: t.Location, Line: t.Line})
			}
		}
	}
	return out
}
