package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/upstream/federation"
)

// Prompt is a prompt the gateway serves from its configuration
// (config.Prompt) or a playbook's mcp.prompts: what prompts/list shows,
// and how prompts/get renders it.
type Prompt struct {
	// Prompt is the prompt as listed: its arguments are the declared ones,
	// in order, then those its placeholders name without declaring them
	// (required), in the order they first appear.
	Prompt   *mcp.Prompt
	Template string // as configured: its hash is what the lock compares
	// Source is where it is declared: "config", or "playbook:PATH" for a
	// playbook's mcp.prompts (playbookmcp.go).
	Source string
	parts  []config.TemplatePart
	enums  map[string][]string // argument → its values, when declared
}

// buildPrompts makes the served prompts of cfg, in configuration order.
// Their texts are cleaned as tools' are when sanitize is set.
func buildPrompts(cfg *config.Config, sanitize bool) ([]*Prompt, error) {
	var out []*Prompt
	for _, c := range cfg.Prompts {
		p, err := newPrompt(c, sanitize)
		if err != nil { // Resolve checked it: not reached
			return nil, fmt.Errorf("prompts (%s): template: %v", c.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// newPrompt makes the prompt c declares (from the configuration, or a
// playbook's mcp.prompts): its declared arguments, then those its
// placeholders name without declaring them, required.
func newPrompt(c config.Prompt, sanitize bool) (*Prompt, error) {
	clean := func(s string) string {
		if sanitize {
			return annotations.SanitizeText(s)
		}
		return s
	}
	parts, err := config.ParseTemplate(c.Template)
	if err != nil {
		return nil, err
	}
	p := &Prompt{
		Prompt:   &mcp.Prompt{Name: c.Name, Title: clean(c.Title), Description: clean(c.Description)},
		Template: c.Template,
		Source:   "config",
		parts:    parts,
		enums:    map[string][]string{},
	}
	declared := map[string]bool{}
	for _, a := range c.Arguments {
		declared[a.Name] = true
		desc := a.Description
		if len(a.Enum) > 0 {
			p.enums[a.Name] = slices.Clone(a.Enum)
			desc = strings.TrimSpace(desc + " One of: " + strings.Join(a.Enum, ", ") + ".")
		}
		// Cleaned whole: the enum values are text clients read too.
		p.Prompt.Arguments = append(p.Prompt.Arguments, &mcp.PromptArgument{Name: a.Name, Title: clean(a.Title), Description: clean(desc), Required: a.Required})
	}
	for _, part := range parts {
		if part.Arg != "" && !declared[part.Arg] {
			declared[part.Arg] = true
			p.Prompt.Arguments = append(p.Prompt.Arguments, &mcp.PromptArgument{Name: part.Arg, Required: true})
		}
	}
	return p, nil
}

// Render is the prompt's text for args: each placeholder replaced by its
// argument's value, as given. A required argument missing (or empty), an
// argument the prompt does not take, or a value outside an argument's enum
// is an error that names it; an optional argument not given renders as
// nothing.
func (p *Prompt) Render(args map[string]string) (string, error) {
	var names []string
	for _, a := range p.Prompt.Arguments {
		names = append(names, a.Name)
		if a.Required && args[a.Name] == "" {
			return "", fmt.Errorf("prompt %q: argument %q is required", p.Prompt.Name, a.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) { // the same error for the same request
		v := args[k]
		if !slices.Contains(names, k) {
			takes := "it takes no arguments"
			if len(names) > 0 {
				takes = "it takes: " + strings.Join(names, ", ")
			}
			return "", fmt.Errorf("prompt %q takes no argument %q (%s)", p.Prompt.Name, clip(k), takes)
		}
		if e, ok := p.enums[k]; ok && v != "" && !slices.Contains(e, v) {
			return "", fmt.Errorf("prompt %q: argument %q is %q, not one of %s", p.Prompt.Name, k, clip(v), strings.Join(e, ", "))
		}
	}
	var b strings.Builder
	for _, part := range p.parts {
		if part.Arg != "" {
			b.WriteString(args[part.Arg])
		} else {
			b.WriteString(part.Text)
		}
	}
	return b.String(), nil
}

// clip shortens a caller's value quoted in an error to 60 characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	return string([]rune(s)[:57]) + "..."
}

// Complete returns the enum values of argument arg that start with
// prefix (case-insensitively), in their declared order; nil for an
// argument without an enum.
func (p *Prompt) Complete(arg, prefix string) []string {
	var out []string
	for _, v := range p.enums[arg] {
		if strings.HasPrefix(strings.ToLower(v), strings.ToLower(prefix)) {
			out = append(out, v)
		}
	}
	return out
}

// Completes reports whether an argument of the prompt has an enum to
// complete from.
func (p *Prompt) Completes() bool { return len(p.enums) > 0 }

// TemplateSHA256 is the hex SHA-256 of the template as configured.
func (p *Prompt) TemplateSHA256() string { return textSHA256(p.Template) }

// LockedPrompts are the prompts served, as the lockfile records them: the
// configuration's (their template's hash included) and each MCP
// upstream's under its served name (its prefix, from cfg), their texts
// as the upstream gives them.
func (c *Catalog) LockedPrompts(cfg *config.Config) []annotations.LockedPrompt {
	var out []annotations.LockedPrompt
	for _, p := range c.Prompts {
		// The enums themselves, not only the descriptions that list them:
		// ["a, b"] and ["a", "b"] read alike and accept different values.
		args := struct {
			Arguments []*mcp.PromptArgument `json:"arguments"`
			Enums     map[string][]string   `json:"enums"`
		}{p.Prompt.Arguments, p.enums}
		out = append(out, annotations.PromptFacts(p.Prompt.Name, p.Source, p.Prompt.Title, p.Prompt.Description, args, p.TemplateSHA256()))
	}
	for _, s := range c.MCP {
		u := cfg.UpstreamNamed(s.Upstream)
		if u == nil || s.Listing == nil {
			continue
		}
		out = append(out, UpstreamLockedPrompts(u, s.Listing)...)
	}
	return out
}

// UpstreamLockedPrompts are MCP upstream u's prompts in its listing l as
// the lockfile records them: under the served name, their texts as the
// upstream gives them. The gateway compares a re-read listing's with the
// lock by them too.
func UpstreamLockedPrompts(u *config.Upstream, l *federation.Listing) []annotations.LockedPrompt {
	var out []annotations.LockedPrompt
	for _, p := range l.Prompts {
		if p != nil {
			out = append(out, annotations.PromptFacts(u.ToolPrefix+p.Name, "upstream:"+u.Name, p.Title, p.Description, p.Arguments, ""))
		}
	}
	return out
}
