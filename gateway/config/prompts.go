package config

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/tagging"
)

// Prompt is a prompt template the gateway serves (`prompts:`), in the
// shape of NoETL's playbook MCP schema extension (mcp.prompts): a name,
// a description, declared arguments and a template whose only
// placeholders are {{ input.NAME }}. prompts/get renders the template
// into one user message, the arguments' values put in as they are: no
// expressions, nothing evaluated.
type Prompt struct {
	Name        string           `yaml:"name"`
	Title       string           `yaml:"title"`
	Description string           `yaml:"description"`
	Arguments   []PromptArgument `yaml:"arguments"`
	Template    string           `yaml:"template"`
}

// PromptArgument is one argument of a Prompt. A placeholder naming an
// argument that is not declared declares it, required.
type PromptArgument struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	Required    bool   `yaml:"required"`
	// Enum lists the values the argument takes: prompts/get refuses any
	// other, and completion/complete offers them.
	Enum []string `yaml:"enum"`
}

// TemplatePart is a piece of a parsed template: literal Text, or the
// placeholder of argument Arg.
type TemplatePart struct {
	Text string
	Arg  string
}

var (
	placeholderRE = regexp.MustCompile(`^\s*input\.([A-Za-z_][A-Za-z0-9_-]*)\s*$`)
	argNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// ParseTemplate splits a prompt template into its literal text and its
// {{ input.NAME }} placeholders. Anything else between {{ and }} — an
// expression, a filter, a bare name, nothing — and a {{ never closed are
// errors that quote it.
func ParseTemplate(s string) ([]TemplatePart, error) {
	var parts []TemplatePart
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			if s != "" {
				parts = append(parts, TemplatePart{Text: s})
			}
			return parts, nil
		}
		if i > 0 {
			parts = append(parts, TemplatePart{Text: s[:i]})
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q is not closed with }}", clip(s[i:]))
		}
		inner := s[i+2 : i+j]
		m := placeholderRE.FindStringSubmatch(inner)
		if m == nil {
			return nil, fmt.Errorf("placeholder %q is not {{ input.NAME }} (the only form a template takes: no expressions)", clip(s[i:i+j+2]))
		}
		parts = append(parts, TemplatePart{Arg: m[1]})
		s = s[i+j+2:]
	}
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	return string([]rune(s)[:57]) + "..."
}

// validatePrompts checks the prompts' shape: names the clients take
// (name_style) and used once, templates that parse, arguments named once
// with sensible enums. What a template's placeholders add to the
// arguments is the catalog's to work out (catalog.BuildPrompts).
func (c *Config) validatePrompts() error {
	style := tagging.StrictNames
	if c.NameStyle == "spec" {
		style = tagging.SpecNames
	}
	names := map[string]bool{}
	for i, p := range c.Prompts {
		at := fmt.Sprintf("prompts[%d]", i)
		if p.Name != "" {
			at = fmt.Sprintf("prompts[%d] (%s)", i, p.Name)
		}
		switch {
		case p.Name == "":
			return fmt.Errorf("%s: name is required", at)
		case !style.Valid(p.Name):
			return fmt.Errorf("%s: name %q is not one clients accept under name_style %s", at, p.Name, c.NameStyle)
		case names[p.Name]:
			return fmt.Errorf("%s: name %q is used twice", at, p.Name)
		case strings.TrimSpace(p.Template) == "":
			return fmt.Errorf("%s: template is required", at)
		}
		names[p.Name] = true
		if _, err := ParseTemplate(p.Template); err != nil {
			return fmt.Errorf("%s: template: %v", at, err)
		}
		args := map[string]bool{}
		for j, a := range p.Arguments {
			switch {
			case !argNameRE.MatchString(a.Name):
				return fmt.Errorf("%s: arguments[%d]: name %q is not a placeholder name (letters, digits, _ and -, not first a digit)", at, j, a.Name)
			case args[a.Name]:
				return fmt.Errorf("%s: argument %q is declared twice", at, a.Name)
			}
			args[a.Name] = true
			seen := map[string]bool{}
			for _, v := range a.Enum {
				if seen[v] {
					return fmt.Errorf("%s: argument %q: enum value %q is listed twice", at, a.Name, v)
				}
				seen[v] = true
			}
		}
	}
	return nil
}
