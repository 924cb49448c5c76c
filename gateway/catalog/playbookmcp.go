package catalog

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// A playbook's `mcp:` section is NoETL's MCP schema extension: the models,
// tools, resources, prompts and turns of a playbook that talks to a model.
// The gateway serves what a client can use without the engine:
//
//   - mcp.prompts, as prompts named <playbook tool>_<prompt>, rendered as
//     the configuration's prompts are ({{ input.NAME }} placeholders only);
//   - mcp.resources of type http whose spec is a GET, as resources (see
//     playbookResources), without any credential.
//
// Tools and resources of every other type (postgres, duckdb, python, an
// http POST) run only inside the engine, as steps of the playbook's run:
// `--explain` lists them as not served, saying so. The section is checked
// as the extension asks ("validation errors are clear for unresolved
// references"): a turn's tools_allowed naming no declared tool, a `use:
// resource:NAME` or a model naming nothing, a name used twice within a
// section, a prompt without a name or template — each a start-up warning
// and an audit finding (MCPG022) naming the playbook, the field and the
// name. The rest of a playbook is the engine's: the section is read, never
// run.
type playbookMCP struct {
	Models    []mcpEntry  `yaml:"models"`
	Tools     []mcpEntry  `yaml:"tools"`
	Resources []mcpEntry  `yaml:"resources"`
	Prompts   []mcpPrompt `yaml:"prompts"`
	Turns     []mcpTurn   `yaml:"turns"`
}

// mcpEntry is a model, tool or resource of the section.
type mcpEntry struct {
	Name        string         `yaml:"name"`
	Type        string         `yaml:"type"`
	Description string         `yaml:"description"`
	MimeType    string         `yaml:"mimeType"`
	Spec        map[string]any `yaml:"spec"`
}

// mcpPrompt is a prompt of the section: the configuration's prompt shape.
type mcpPrompt struct {
	Name        string                  `yaml:"name"`
	Title       string                  `yaml:"title"`
	Description string                  `yaml:"description"`
	Arguments   []config.PromptArgument `yaml:"arguments"`
	Template    any                     `yaml:"template"`
}

// mcpTurn is a turn: a model call that may use resources and tools.
type mcpTurn struct {
	Name         string           `yaml:"name"`
	Model        string           `yaml:"model"`
	User         []map[string]any `yaml:"user"`
	ToolsAllowed []string         `yaml:"tools_allowed"`
}

// PlaybookPart is one entry of a playbook's `mcp:` section and what the
// gateway made of it: `--explain` lists every one.
type PlaybookPart struct {
	Upstream string `json:"upstream"`
	Playbook string `json:"playbook"` // its path
	Section  string `json:"section"`  // tools, resources, prompts
	Name     string `json:"name"`     // as the playbook names it
	Type     string `json:"type,omitempty"`
	// Served is the name (a prompt) or URI template (a resource) it is
	// served under; "" when it is not served, and Reason says why.
	Served string `json:"served,omitempty"`
	Reason string `json:"reason"`
}

// PlaybookHTTPResource is an mcp.resources entry of type http whose spec
// is a GET: a resource whose URL the gateway reads, its {{ input.x }}
// placeholders being the template's variables.
type PlaybookHTTPResource struct {
	Upstream    string
	Playbook    string
	Name        string // as served: <playbook tool>_<name>
	Description string
	MimeType    string
	URL         string // as the playbook writes it
	// Parts is the URL split at its placeholders.
	Parts []config.TemplatePart
}

// URI is the resource's URI, or its URI template when template: the URL
// with {x} for each {{ input.x }}.
func (r *PlaybookHTTPResource) URI() (uri string, template bool) {
	var b strings.Builder
	for _, part := range r.Parts {
		if part.Arg != "" {
			b.WriteString("{" + part.Arg + "}")
			template = true
		} else {
			b.WriteString(part.Text)
		}
	}
	return b.String(), template
}

// by is what selected the resource, as the audit and listing say it.
func (r *PlaybookHTTPResource) by() string {
	return "playbook " + r.Playbook + " mcp.resources"
}

// locked is the resource as the lockfile records it: its URL is both its
// key and its "operation".
func (r *PlaybookHTTPResource) locked() annotations.LockedResource {
	uri, template := r.URI()
	l := annotations.LockedResource{Name: r.Name, MIMEType: r.MimeType, DescriptionSHA256: textSHA256(r.Description),
		Upstream: r.Upstream, Method: "GET", Path: r.URL}
	if template {
		l.URITemplate = uri
	} else {
		l.URI = uri
	}
	return l
}

// parsePlaybookMCP reads the `mcp:` section of a playbook's YAML source;
// nil when it has none. An error says what does not decode.
func parsePlaybookMCP(src string) (*playbookMCP, error) {
	var doc struct {
		MCP *playbookMCP `yaml:"mcp"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, fmt.Errorf("its mcp section does not decode: %v", firstLine(err.Error()))
	}
	return doc.MCP, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// mcpProblem is one unresolved reference or duplicate of a section.
type mcpProblem struct {
	field, message string
}

// check returns the section's problems, in section order.
func (m *playbookMCP) check() []mcpProblem {
	var out []mcpProblem
	names := func(section string, n int, name func(int) string) map[string]bool {
		seen := map[string]bool{}
		for i := range n {
			nm := name(i)
			field := fmt.Sprintf("mcp.%s[%d]", section, i)
			switch {
			case nm == "":
				out = append(out, mcpProblem{field, "has no name"})
			case seen[nm]:
				out = append(out, mcpProblem{field + ".name", fmt.Sprintf("%q is declared twice in mcp.%s", nm, section)})
			}
			seen[nm] = true
		}
		return seen
	}
	models := names("models", len(m.Models), func(i int) string { return m.Models[i].Name })
	tools := names("tools", len(m.Tools), func(i int) string { return m.Tools[i].Name })
	resources := names("resources", len(m.Resources), func(i int) string { return m.Resources[i].Name })
	prompts := names("prompts", len(m.Prompts), func(i int) string { return m.Prompts[i].Name })
	names("turns", len(m.Turns), func(i int) string { return m.Turns[i].Name })
	for i, p := range m.Prompts {
		if p.Template == nil || p.Template == "" {
			out = append(out, mcpProblem{fmt.Sprintf("mcp.prompts[%d].template", i), fmt.Sprintf("prompt %q has no template", p.Name)})
		}
	}
	for i, t := range m.Turns {
		field := fmt.Sprintf("mcp.turns[%d]", i)
		if t.Model != "" && !models[t.Model] {
			out = append(out, mcpProblem{field + ".model", fmt.Sprintf("names model %q, which mcp.models does not declare", t.Model)})
		}
		for j, n := range t.ToolsAllowed {
			if !tools[n] {
				out = append(out, mcpProblem{fmt.Sprintf("%s.tools_allowed[%d]", field, j), fmt.Sprintf("names tool %q, which mcp.tools does not declare", n)})
			}
		}
		for j, u := range t.User {
			use, _ := u["use"].(string)
			kind, name, ok := strings.Cut(use, ":")
			if use == "" {
				continue
			}
			f := fmt.Sprintf("%s.user[%d].use", field, j)
			switch {
			case !ok || kind != "resource" && kind != "prompt":
				out = append(out, mcpProblem{f, fmt.Sprintf("%q is not resource:NAME or prompt:NAME", use)})
			case kind == "resource" && !resources[name]:
				out = append(out, mcpProblem{f, fmt.Sprintf("names resource %q, which mcp.resources does not declare", name)})
			case kind == "prompt" && !prompts[name]:
				out = append(out, mcpProblem{f, fmt.Sprintf("names prompt %q, which mcp.prompts does not declare", name)})
			}
		}
	}
	return out
}

// playbookMCPFinding is the audit finding of one problem of playbook
// path's section.
func playbookMCPFinding(upstream, path string, p mcpProblem) annotations.Finding {
	return annotations.Finding{Rule: annotations.RulePlaybookMCP, Severity: annotations.SeverityWarning, Tool: "playbook " + path,
		Message: fmt.Sprintf("playbook %s: %s %s", path, p.field, p.message), Source: "playbook " + path, Location: p.field}
}

// addPlaybookMCP serves what the `mcp:` section of playbook it (served as
// tool t) offers clients: its prompts, and its http GET resources; the
// rest is listed as not served. Problems are warnings and findings.
func (c *Catalog) addPlaybookMCP(u *config.Upstream, t *Tool, it config.PlaybookItem, sanitize bool) {
	if it.Source == "" {
		return
	}
	// report makes a problem a start-up warning (with tail) and a finding.
	report := func(p mcpProblem, tail string) {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s: playbook %s: %s %s%s", u.Name, it.Path, p.field, p.message, tail))
		c.Skipped = append(c.Skipped, playbookMCPFinding(u.Name, it.Path, p))
	}
	m, err := parsePlaybookMCP(it.Source)
	if err != nil {
		report(mcpProblem{"mcp", err.Error()}, "")
		return
	}
	if m == nil {
		return
	}
	if c.resourceURIs == nil {
		c.resourceURIs = map[string]string{}
	}
	for _, p := range m.check() {
		report(p, "")
	}
	part := func(section string, e mcpEntry, served, reason string) {
		c.PlaybookParts = append(c.PlaybookParts, PlaybookPart{Upstream: u.Name, Playbook: it.Path, Section: section, Name: e.Name, Type: e.Type, Served: served, Reason: reason})
	}
	for _, e := range m.Tools {
		part("tools", e, "", fmt.Sprintf("not served: a %s tool runs inside the engine, as a step of the playbook's run (call the playbook's tool %s)", orNone(e.Type), t.Tool.Name))
	}
	seen := map[string]bool{}
	for i, e := range m.Resources {
		if e.Name == "" || seen[e.Name] {
			continue // a problem already
		}
		seen[e.Name] = true
		r, reason := httpResource(e)
		if r == nil {
			part("resources", e, "", "not served: "+reason)
			continue
		}
		r.Upstream, r.Playbook, r.Name = u.Name, it.Path, t.Tool.Name+"_"+e.Name
		uri, _ := r.URI()
		if by, ok := c.resourceURIs[uri]; ok {
			prob := mcpProblem{fmt.Sprintf("mcp.resources[%d]", i), fmt.Sprintf("serves %q, which %s serves already", uri, by)}
			report(prob, "; not served")
			part("resources", e, "", "not served: "+prob.message)
			continue
		}
		c.resourceURIs[uri] = "playbook " + it.Path + " (mcp.resources " + e.Name + ")"
		if sanitize {
			r.Description = annotations.SanitizeText(r.Description)
		}
		c.PlaybookResources = append(c.PlaybookResources, r)
		part("resources", e, r.URL, "served as resource template "+r.Name)
	}
	taken := map[string]bool{}
	for _, p := range c.Prompts {
		taken[p.Prompt.Name] = true
	}
	seen = map[string]bool{}
	for i, mp := range m.Prompts {
		e := mcpEntry{Name: mp.Name}
		if mp.Name == "" || seen[mp.Name] {
			continue
		}
		seen[mp.Name] = true
		tmpl, ok := mp.Template.(string)
		if !ok || tmpl == "" {
			part("prompts", e, "", "not served: its template is not a text")
			continue
		}
		name := t.Tool.Name + "_" + mp.Name
		if taken[name] {
			prob := mcpProblem{fmt.Sprintf("mcp.prompts[%d].name", i), fmt.Sprintf("serves as %q, a name another prompt has", name)}
			report(prob, "; not served")
			part("prompts", e, "", "not served: "+prob.message)
			continue
		}
		cp := config.Prompt{Name: name, Title: mp.Title, Description: mp.Description, Arguments: mp.Arguments, Template: tmpl}
		if cp.Description == "" {
			cp.Description = fmt.Sprintf("Prompt %s of playbook %s.", mp.Name, it.Path)
		}
		pr, err := newPrompt(cp, sanitize)
		if err != nil {
			report(mcpProblem{fmt.Sprintf("mcp.prompts[%d].template", i), err.Error()}, "; not served")
			part("prompts", e, "", "not served: "+err.Error())
			continue
		}
		pr.Source = "playbook:" + it.Path
		taken[name] = true
		c.Prompts = append(c.Prompts, pr)
		part("prompts", e, name, "served as prompt "+name)
	}
}

// httpResource is the resource an mcp.resources entry of type http with a
// GET spec makes; otherwise nil and why it is not one.
func httpResource(e mcpEntry) (*PlaybookHTTPResource, string) {
	if e.Type != "http" {
		return nil, fmt.Sprintf("a %s resource runs inside the engine", orNone(e.Type))
	}
	method, _ := e.Spec["method"].(string)
	if method != "" && !strings.EqualFold(method, "GET") {
		return nil, fmt.Sprintf("an http resource whose spec is a %s, not a GET, runs inside the engine", strings.ToUpper(method))
	}
	raw, _ := e.Spec["url"].(string)
	if raw == "" {
		raw, _ = e.Spec["endpoint"].(string)
	}
	if raw == "" {
		return nil, "its spec has no url"
	}
	parts, err := config.ParseTemplate(raw)
	if err != nil {
		return nil, fmt.Sprintf("its url: %v", err)
	}
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return nil, fmt.Sprintf("its url %q is not an http(s) URL", raw)
	}
	// The origin is fixed by the playbook: a placeholder may not reach it.
	head := parts[0].Text
	if rest := strings.TrimPrefix(strings.TrimPrefix(head, "http://"), "https://"); !strings.ContainsAny(rest, "/?#") && len(parts) > 1 {
		return nil, "a placeholder is in its URL's host: the gateway reads only a URL whose origin the playbook fixes"
	}
	// A user name or password in the URL would be shown to every client
	// in the URI (and is not sent: reads carry no credential).
	if o, err := url.Parse(head); err != nil || o.User != nil {
		return nil, "its url carries credentials (user:password@): the gateway reads a playbook's resources with none, and would show them to every client"
	}
	mime := e.MimeType
	if mime == "" {
		mime = "application/json"
	}
	return &PlaybookHTTPResource{Description: e.Description, MimeType: mime, URL: raw, Parts: parts}, ""
}

func orNone(s string) string {
	if s == "" {
		return "(untyped)"
	}
	return s
}

// writePlaybookParts writes `--explain`'s table of playbooks' mcp
// entries; nothing when there are none.
func writePlaybookParts(w io.Writer, parts []PlaybookPart) error {
	if len(parts) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nUPSTREAM\tPLAYBOOK\tENTRY\tTYPE\tSERVED AS\tWHY")
	for _, p := range parts {
		fmt.Fprintf(tw, "%s\t%s\tmcp.%s.%s\t%s\t%s\t%s\n", p.Upstream, p.Playbook, p.Section, p.Name, orDash(p.Type), orDash(p.Served), p.Reason)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
