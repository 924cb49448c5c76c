package annotations

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is what `mcpgate audit` prints: every tool with its hints and their
// provenance, the lint findings, and the drift from a lock if one was given.
type Report struct {
	Tools    []ToolFacts `json:"tools"`
	Findings []Finding   `json:"findings"`
	Drift    *Drift      `json:"drift,omitempty"`
	// Prompts are the prompts served, as the lockfile records them (JSON
	// only; their drift is in Drift).
	Prompts []LockedPrompt `json:"prompts,omitempty"`
	// Resources are the resources served (OpenAPI operations', playbooks'),
	// with what selected each
	// (their drift is in Drift; operations refused as resources are
	// findings).
	Resources []ResourceFacts `json:"resources,omitempty"`
	// Listing says how tools/list presents the tools (config catalog:);
	// nil when that was not asked.
	Listing *Listing `json:"listing,omitempty"`
}

// Listing is how tools/list presents the tools (config catalog:). In
// search mode it lists only Listed; every tool stays callable by name.
type Listing struct {
	Mode      string `json:"mode"`   // flat, search or auto
	Search    bool   `json:"search"` // tools/list is search mode's
	Threshold int    `json:"search_threshold"`
	// Listed are what tools/list holds in search mode: the meta-tools,
	// then the pinned tools served.
	Listed []string `json:"listed,omitempty"`
}

// Line is the listing's sentence in the table and Markdown reports ("" when
// not in search mode).
func (l *Listing) Line(tools int) string {
	if l == nil || !l.Search {
		return ""
	}
	return fmt.Sprintf("tools/list: search mode (catalog.mode %s, %d tools, threshold %d) lists %s; "+
		"call_read_only_tool claims readOnlyHint and refuses any tool whose hints are not read-only; call_tool is destructive; every tool stays callable by name",
		l.Mode, tools, l.Threshold, strings.Join(l.Listed, ", "))
}

// NewReport lints tools and, with a lock, compares them against it. skipped
// are findings about selected operations that are not tools (see
// SkippedFinding); they come first.
func NewReport(tools []ToolFacts, lock *Lock, skipped ...Finding) *Report {
	r := &Report{Tools: tools, Findings: append(skipped, Lint(tools)...)}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if lock != nil {
		r.Drift = Compare(lock, tools)
	}
	return r
}

// ExitCode is the audit's exit status: 1 when a finding is at least as severe
// as failOn ("error", the default; "warning"; or "never"), or the lock
// drifted; 0 otherwise.
func (r *Report) ExitCode(failOn string) int {
	if !r.Drift.Empty() {
		return 1
	}
	threshold := Severity(failOn)
	if failOn == "" {
		threshold = SeverityError
	}
	if failOn == "never" {
		return 0
	}
	for _, f := range r.Findings {
		if f.Severity.rank() >= threshold.rank() {
			return 1
		}
	}
	return 0
}

// Write writes the report in format: table, json, markdown or sarif.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "table", "":
		return r.writeTable(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	case "markdown":
		return r.writeMarkdown(w)
	case "sarif":
		return r.writeSARIF(w)
	}
	return fmt.Errorf("annotations: unknown report format %q (want table, json, markdown or sarif)", format)
}

// hint renders one hint with its provenance: "yes (tag:agent-readonly)".
func hint(v bool, why string) string {
	s := "no"
	if v {
		s = "yes"
	}
	return s + " (" + why + ")"
}

// row is a tool's line in the table and Markdown reports: the operation, the
// four hints with their provenance, auth, and large.
func row(t *ToolFacts) [7]string {
	a, p := t.Annotations, t.Provenance
	large := ""
	if t.Large {
		large = "yes"
	}
	op := t.Method + " " + t.Path
	if up := federatedFrom(t); up != "" {
		op = "MCP " + up + "/" + t.OperationID
	}
	return [7]string{
		op,
		hint(a.ReadOnlyHint, p.ReadOnly),
		hint(a.DestructiveHint == nil || *a.DestructiveHint, p.Destructive),
		hint(a.IdempotentHint, p.Idempotent),
		hint(a.OpenWorldHint == nil || *a.OpenWorldHint, p.OpenWorld),
		auth(t),
		large,
	}
}

// where is a finding's place: source:line when the line is known, else the
// JSON pointer of the operation.
func (f Finding) where() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d", f.Source, f.Line)
	}
	return f.Location
}

// auth renders the security alternatives so that AND and OR cannot be
// confused: "(apiKey AND oauth2[read]) OR anonymous".
func auth(t *ToolFacts) string {
	if len(t.Security) == 0 {
		return "none declared"
	}
	alts := make([]string, 0, len(t.Security))
	for _, alt := range t.Security {
		if len(alt) == 0 {
			alts = append(alts, "anonymous")
			continue
		}
		schemes := make([]string, 0, len(alt))
		for _, s := range alt {
			scheme := s.Scheme
			if len(s.Scopes) > 0 {
				scheme += "[" + strings.Join(s.Scopes, " ") + "]"
			}
			schemes = append(schemes, scheme)
		}
		all := strings.Join(schemes, " AND ")
		if len(schemes) > 1 && len(t.Security) > 1 {
			all = "(" + all + ")"
		}
		alts = append(alts, all)
	}
	return strings.Join(alts, " OR ")
}

func (r *Report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tOPERATION\tREAD-ONLY\tDESTRUCTIVE\tIDEMPOTENT\tOPEN-WORLD\tAUTH\tLARGE")
	for i := range r.Tools {
		c := row(&r.Tools[i])
		fmt.Fprintf(tw, "%s\t%s\n", r.Tools[i].Name, strings.Join(c[:], "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Prompts) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nPROMPT\tSOURCE\tTEMPLATE")
		for _, p := range r.Prompts {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, p.Source, orNone(short(p.TemplateSHA256)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Resources) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nRESOURCE\tNAME\tMIME TYPE\tOPERATION\tSELECTED BY")
		for _, x := range r.Resources {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.Key(), x.Name, orNone(x.MIMEType), x.Upstream+" "+x.Method+" "+x.Path, x.SelectedBy)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if l := r.Listing.Line(len(r.Tools)); l != "" {
		fmt.Fprintf(w, "\n%s\n", l)
	}
	fmt.Fprintf(w, "\n%d tools, %d findings\n", len(r.Tools), len(r.Findings))
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%-7s %s %s [%s]\n", f.Severity, f.Rule, f.Message, f.where())
	}
	if r.Drift != nil {
		fmt.Fprintln(w)
		return r.Drift.WriteText(w)
	}
	return nil
}

// mdEscape keeps a table cell in its column.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func (r *Report) writeMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "# mcpgate audit\n\n%d tools, %d findings.\n\n## Tools\n\n", len(r.Tools), len(r.Findings))
	fmt.Fprintln(w, "| tool | operation | readOnly | destructive | idempotent | openWorld | auth | large |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for i := range r.Tools {
		c := row(&r.Tools[i])
		for j := range c {
			c[j] = mdEscape(c[j])
		}
		fmt.Fprintf(w, "| `%s` | `%s` | %s |\n", r.Tools[i].Name, c[0], strings.Join(c[1:], " | "))
	}
	if len(r.Prompts) > 0 {
		fmt.Fprintln(w, "\n## Prompts\n\n| prompt | source | template |\n|---|---|---|")
		for _, p := range r.Prompts {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", mdEscape(p.Name), mdEscape(p.Source), orNone(short(p.TemplateSHA256)))
		}
	}
	if len(r.Resources) > 0 {
		fmt.Fprintln(w, "\n## Resources\n\n| resource | name | mimeType | operation | selected by |\n|---|---|---|---|---|")
		for _, x := range r.Resources {
			fmt.Fprintf(w, "| `%s` | %s | %s | `%s %s` (%s) | %s |\n", mdEscape(x.Key()), mdEscape(x.Name), mdEscape(orNone(x.MIMEType)),
				x.Method, mdEscape(x.Path), mdEscape(x.Upstream), mdEscape(x.SelectedBy))
		}
	}
	if l := r.Listing.Line(len(r.Tools)); l != "" {
		fmt.Fprintf(w, "\n%s.\n", mdEscape(l))
	}
	fmt.Fprintln(w, "\n## Findings")
	fmt.Fprintln(w)
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "None.")
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "- **%s** %s: %s (`%s`)\n", f.Severity, f.Rule, mdEscape(f.Message), f.where())
	}
	if r.Drift != nil {
		fmt.Fprintln(w, "\n## Lock drift\n\n```diff")
		r.Drift.WriteText(w)
		fmt.Fprintln(w, "```")
	}
	return nil
}
