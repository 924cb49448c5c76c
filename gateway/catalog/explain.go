package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/tagging"
)

// Selection is one operation of an upstream's document, selected or not, and
// why: a line of `mcpgate tools --explain`, an entry of the "selection" of
// `mcpgate audit --explain --format json`. It lets a reviewer see what each
// include or exclude rule, tag and x-mcp-exposed did.
type Selection struct {
	Upstream    string `json:"upstream"`
	Method      string `json:"method"`
	Path        string `json:"path"`
	OperationID string `json:"operationId,omitempty"`
	// Selected says the selection (x-mcp-exposed, exclude, the gate or
	// include) chose the operation.
	Selected bool `json:"selected"`
	// Tool is the tool's name when the operation is served. A selected
	// operation without one could not be made a tool; Reason says why.
	Tool string `json:"tool,omitempty"`
	// Reason is one line: "included by rule `GET /v1/customers*` of upstream
	// stripe", "excluded: no agent-exposed tag", "excluded by x-mcp-exposed:
	// false", "skipped: path template … has {x}, which no path parameter
	// declares".
	Reason string `json:"reason"`
	// Resource says what became of an operation selected as a resource
	// (x-mcp-resource, the agent-resource tag, the resources rules):
	// "resource petstore://pets/{petId} (by tag agent-resource)", or "not
	// a resource (selected by …): why". Empty when none selected it.
	Resource string `json:"resource,omitempty"`
}

// operation names what s is about: "METHOD /path", or "MCP name" for a
// federated server's tool.
func (s Selection) operation() string {
	if s.Method == "" && s.Path == "" {
		return "MCP " + s.OperationID
	}
	return s.Method + " " + s.Path
}

// why is the reason, and what became of the operation as a resource when
// something selected it as one.
func (s Selection) why() string {
	if s.Resource == "" {
		return s.Reason
	}
	return s.Reason + "; " + s.Resource
}

// explain records the decisions about upstream's operations and returns the
// selected ones.
func (c *Catalog) explain(upstream string, ds []tagging.Decision) []tagging.Operation {
	var ops []tagging.Operation
	for _, d := range ds {
		c.Selection = append(c.Selection, Selection{
			Upstream:    upstream,
			Method:      d.Method,
			Path:        d.Path,
			OperationID: d.Operation.Operation.OperationID,
			Selected:    d.Selected,
			Reason:      d.Reason(upstream),
		})
		if d.Selected {
			ops = append(ops, d.Operation)
		}
	}
	return ops
}

// skipSelection replaces the reason of a selected operation that could not
// be made a tool.
func (c *Catalog) skipSelection(upstream string, op tagging.Operation, err error) {
	for i := range c.Selection {
		if s := &c.Selection[i]; s.Upstream == upstream && s.Method == op.Method && s.Path == op.Path {
			s.Reason = "skipped: " + err.Error()
			return
		}
	}
}

// nameSelection sets the tool name of every served operation, once the
// catalog's tools are final.
func (c *Catalog) nameSelection() {
	names := make(map[[3]string]string, len(c.Tools))
	for _, t := range c.Tools {
		names[[3]string{t.Upstream, t.Operation.Method, t.Operation.Path}] = t.Tool.Name
	}
	for i := range c.Selection {
		if s := &c.Selection[i]; s.Method != "" || s.Path != "" { // a federated tool's is named already
			s.Tool = names[[3]string{s.Upstream, s.Method, s.Path}]
		}
	}
}

// ExplainListing is Listing with the Selection: `mcpgate tools --explain`.
func (c *Catalog) ExplainListing() *Listing {
	l := c.Listing()
	l.Selection = c.Selection
	if l.Selection == nil {
		l.Selection = []Selection{}
	}
	l.PlaybookMCP = c.PlaybookParts
	return l
}

// WriteSelection writes one line per operation: upstream, operation, tool
// name ("-" when not served) and the reason, then a count.
func WriteSelection(w io.Writer, sel []Selection) error {
	return writeSelection(w, sel, 0)
}

// writeSelection is WriteSelection, saying how many warnings there are.
func writeSelection(w io.Writer, sel []Selection, warnings int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tOPERATION\tTOOL\tWHY")
	served := 0
	for _, s := range sel {
		tool := s.Tool
		if tool == "" {
			tool = "-"
		} else {
			served++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Upstream, s.operation(), tool, s.why())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d operations, %d tools", len(sel), served)
	if warnings > 0 {
		fmt.Fprintf(w, ", %d warnings (see --format json)", warnings)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// ExplainedReport is the audit report with the selection of every operation
// (`mcpgate audit --explain`): in JSON a "selection" list beside "tools" and
// "findings"; in the table and Markdown formats a section after the report.
type ExplainedReport struct {
	*annotations.Report
	Selection []Selection `json:"selection"`
	// PlaybookMCP are the entries of playbooks' mcp: sections and what
	// became of each.
	PlaybookMCP []PlaybookPart `json:"playbook_mcp,omitempty"`
}

// Write writes the report in format: table, json or markdown. SARIF has no
// place for operations that are not tools, so it is refused.
func (r *ExplainedReport) Write(w io.Writer, format string) error {
	sel := r.Selection
	if sel == nil {
		sel = []Selection{}
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(&ExplainedReport{Report: r.Report, Selection: sel, PlaybookMCP: r.PlaybookMCP})
	case "sarif":
		return errors.New("--explain: not available with --format sarif (use table, json or markdown)")
	}
	if err := r.Report.Write(w, format); err != nil {
		return err
	}
	if format == "markdown" {
		fmt.Fprintf(w, "\n## Selection\n\n| operation | tool | why |\n|---|---|---|\n")
		for _, s := range sel {
			tool := "-"
			if s.Tool != "" {
				tool = "`" + s.Tool + "`"
			}
			fmt.Fprintf(w, "| `%s` (%s) | %s | %s |\n", s.operation(), s.Upstream, tool, mdCell(s.why()))
		}
		if len(r.PlaybookMCP) > 0 {
			fmt.Fprintf(w, "\n## Playbooks' mcp sections\n\n| playbook | entry | served as | why |\n|---|---|---|---|\n")
			for _, p := range r.PlaybookMCP {
				fmt.Fprintf(w, "| `%s` (%s) | `mcp.%s.%s` | %s | %s |\n", p.Playbook, p.Upstream, p.Section, p.Name, orDash(p.Served), mdCell(p.Reason))
			}
		}
		return nil
	}
	fmt.Fprintln(w, "\nSELECTION")
	if err := WriteSelection(w, sel); err != nil {
		return err
	}
	return writePlaybookParts(w, r.PlaybookMCP)
}

// mdCell keeps a Markdown table cell in its column.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
