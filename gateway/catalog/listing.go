package catalog

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
)

// Listing is the catalog as `mcpgate tools` prints it.
type Listing struct {
	Tools    []ListedTool `json:"tools"`
	Warnings []string     `json:"warnings"`
	// Selection, set by Catalog.ExplainListing (`--explain`), is every
	// operation and why it is or is not a tool; WriteTable then prints it
	// instead of the tools.
	Selection []Selection `json:"selection,omitempty"`
	// PlaybookMCP, set with Selection, are the entries of playbooks' mcp:
	// sections and what became of each.
	PlaybookMCP []PlaybookPart `json:"playbook_mcp,omitempty"`
	// Prompts are the configuration's prompts (`prompts:`); none: left out.
	Prompts []ListedPrompt `json:"prompts,omitempty"`
	// Resources are the resources served (OpenAPI operations, then
	// playbooks' http resources); none: left out.
	Resources []ListedResource `json:"resources,omitempty"`
	// CatalogMode, when set (Catalog.ListingMode), says what search
	// mode's tools/list would hold; left out in flat mode.
	CatalogMode *annotations.Listing `json:"catalog_mode,omitempty"`
}

// ListedResource is one resource or resource template of a Listing: what
// resources/list or resources/templates/list shows, the operation a read
// sends, and what selected it.
type ListedResource struct {
	URI         string         `json:"uri,omitempty"`
	URITemplate string         `json:"uriTemplate,omitempty"`
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description,omitempty"`
	MIMEType    string         `json:"mimeType,omitempty"`
	Upstream    ListedUpstream `json:"upstream"`
	SelectedBy  string         `json:"selectedBy"`
}

// ListedPrompt is one prompt of a Listing: what prompts/list shows, where
// it comes from, and the hash of its template (what the lockfile would
// compare).
type ListedPrompt struct {
	Name           string                `json:"name"`
	Title          string                `json:"title,omitempty"`
	Description    string                `json:"description,omitempty"`
	Arguments      []*mcp.PromptArgument `json:"arguments"`
	Source         string                `json:"source"`
	TemplateSHA256 string                `json:"templateSha256"`
}

// ListedTool is one tool of a Listing.
type ListedTool struct {
	Name         string                 `json:"name"`
	Title        string                 `json:"title,omitempty"`
	Description  string                 `json:"description,omitempty"`
	Annotations  *mcp.ToolAnnotations   `json:"annotations"`
	InputSchema  any                    `json:"inputSchema"`
	OutputSchema any                    `json:"outputSchema,omitempty"`
	Upstream     ListedUpstream         `json:"upstream"`
	Provenance   annotations.Provenance `json:"provenance"`
	Large        bool                   `json:"large,omitempty"`
}

// ListedUpstream says where a tool's calls go: an operation (Method,
// Path), or an MCP server's tool (Tool, its name there).
type ListedUpstream struct {
	Name   string `json:"name"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Tool   string `json:"tool,omitempty"`
}

// Listing returns the catalog in printable form.
func (c *Catalog) Listing() *Listing {
	l := &Listing{Tools: make([]ListedTool, 0, len(c.Tools)), Warnings: c.Warnings}
	if l.Warnings == nil {
		l.Warnings = []string{}
	}
	for _, t := range c.Tools {
		lt := ListedTool{
			Name:        t.Tool.Name,
			Title:       t.Tool.Title,
			Description: t.Tool.Description,
			Annotations: t.Tool.Annotations,
			InputSchema: t.Tool.InputSchema,
			Upstream:    ListedUpstream{Name: t.Upstream, Method: t.Operation.Method, Path: t.Operation.Path},
			Provenance:  t.Derived.Provenance,
			Large:       t.Derived.Large,
		}
		if t.Tool.OutputSchema != nil {
			lt.OutputSchema = t.Tool.OutputSchema
		}
		if t.Federated != nil {
			lt.Upstream.Tool = t.Federated.Name
		}
		l.Tools = append(l.Tools, lt)
	}
	for _, p := range c.Prompts {
		args := p.Prompt.Arguments
		if args == nil {
			args = []*mcp.PromptArgument{}
		}
		l.Prompts = append(l.Prompts, ListedPrompt{
			Name: p.Prompt.Name, Title: p.Prompt.Title, Description: p.Prompt.Description,
			Arguments: args, Source: p.Source, TemplateSHA256: p.TemplateSHA256(),
		})
	}
	for _, r := range c.Resources {
		lr := ListedResource{Name: r.Name(), Title: r.title(), Description: r.description(), MIMEType: r.MIMEType(),
			Upstream: ListedUpstream{Name: r.Upstream, Method: r.Operation.Method, Path: r.Operation.Path}, SelectedBy: r.By}
		if r.Template != nil {
			lr.URITemplate = r.URI()
		} else {
			lr.URI = r.URI()
		}
		l.Resources = append(l.Resources, lr)
	}
	for _, r := range c.PlaybookResources {
		lr := ListedResource{Name: r.Name, Description: r.Description, MIMEType: r.MimeType,
			Upstream: ListedUpstream{Name: r.Upstream, Method: "GET", Path: r.URL}, SelectedBy: r.by()}
		if uri, template := r.URI(); template {
			lr.URITemplate = uri
		} else {
			lr.URI = uri
		}
		l.Resources = append(l.Resources, lr)
	}
	return l
}

// WriteJSON writes the listing as indented JSON.
func (l *Listing) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(l)
}

// WriteTable writes one line per tool: name, method, path and the four hints;
// with a Selection, one line per operation (see WriteSelection).
func (l *Listing) WriteTable(w io.Writer) error {
	if l.Selection != nil {
		if err := writeSelection(w, l.Selection, len(l.Warnings)); err != nil {
			return err
		}
		if err := writePlaybookParts(w, l.PlaybookMCP); err != nil {
			return err
		}
		return l.writeCatalogMode(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMETHOD\tPATH\tREAD-ONLY\tDESTRUCTIVE\tIDEMPOTENT\tOPEN-WORLD")
	for _, t := range l.Tools {
		a := t.Annotations
		method, path := t.Upstream.Method, t.Upstream.Path
		if t.Upstream.Tool != "" {
			method, path = "MCP", t.Upstream.Tool
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, method, path,
			yn(a.ReadOnlyHint), yn(deref(a.DestructiveHint, true)), yn(a.IdempotentHint), yn(deref(a.OpenWorldHint, true)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(l.Prompts) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nPROMPT\tARGUMENTS\tSOURCE")
		for _, p := range l.Prompts {
			var args []string
			for _, a := range p.Arguments {
				n := a.Name
				if !a.Required {
					n += "?"
				}
				args = append(args, n)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, strings.Join(args, ", "), p.Source)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(l.Resources) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nRESOURCE\tNAME\tMIME TYPE\tOPERATION\tSELECTED BY")
		for _, r := range l.Resources {
			mt := r.MIMEType
			if mt == "" {
				mt = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\n", r.URI+r.URITemplate, r.Name, mt, r.Upstream.Method, r.Upstream.Path, r.SelectedBy)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n%d tools", len(l.Tools))
	for _, c := range []struct {
		n    int
		noun string
	}{{len(l.Prompts), "prompt"}, {len(l.Resources), "resource"}} {
		switch c.n {
		case 0:
		case 1:
			fmt.Fprintf(w, ", 1 %s", c.noun)
		default:
			fmt.Fprintf(w, ", %d %ss", c.n, c.noun)
		}
	}
	if n := len(l.Warnings); n > 0 {
		fmt.Fprintf(w, ", %d warnings (see --format json)", n)
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return l.writeCatalogMode(w)
}

// writeCatalogMode says, in search mode, what tools/list holds.
func (l *Listing) writeCatalogMode(w io.Writer) error {
	if line := l.CatalogMode.Line(len(l.Tools)); line != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", line)
		return err
	}
	return nil
}

func yn(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func deref(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}
