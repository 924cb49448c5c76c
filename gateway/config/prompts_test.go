package config

import (
	"strings"
	"testing"
)

// TestPrompts checks the prompts: contract: each broken prompt is an
// error naming it and what is wrong; a good one passes.
func TestPrompts(t *testing.T) {
	good := Prompt{Name: "summarize", Template: "Summarize:\n{{ input.text }}", Arguments: []PromptArgument{{Name: "text", Required: true}}}
	for _, tc := range []struct {
		name    string
		p       Prompt
		style   string
		wantErr string
	}{
		{"good", good, "", ""},
		{"undeclared placeholder", Prompt{Name: "p", Template: "{{input.x}} and {{  input.y-z  }}"}, "", ""},
		{"no name", Prompt{Template: "x"}, "", "prompts[0]: name is required"},
		{"bad name", Prompt{Name: "sum marize", Template: "x"}, "", `prompts[0] (sum marize): name "sum marize" is not one clients accept under name_style strict`},
		{"dots need spec", Prompt{Name: "a.b", Template: "x"}, "spec", ""},
		{"dots under strict", Prompt{Name: "a.b", Template: "x"}, "", "not one clients accept"},
		{"no template", Prompt{Name: "p", Template: "  \n"}, "", "prompts[0] (p): template is required"},
		{"an expression", Prompt{Name: "p", Template: "Hi {{ input.name | upper }}"}, "", `placeholder "{{ input.name | upper }}" is not {{ input.NAME }}`},
		{"a bare name", Prompt{Name: "p", Template: "Hi {{ name }}"}, "", `placeholder "{{ name }}" is not {{ input.NAME }}`},
		{"no argument name", Prompt{Name: "p", Template: "Hi {{ input. }}"}, "", `placeholder "{{ input. }}"`},
		{"empty placeholder", Prompt{Name: "p", Template: "Hi {{}}"}, "", `placeholder "{{}}"`},
		{"not closed", Prompt{Name: "p", Template: "Hi {{ input.name"}, "", `"{{ input.name" is not closed with }}`},
		{"argument twice", Prompt{Name: "p", Template: "x", Arguments: []PromptArgument{{Name: "a"}, {Name: "a"}}}, "", `argument "a" is declared twice`},
		{"argument name", Prompt{Name: "p", Template: "x", Arguments: []PromptArgument{{Name: "1a"}}}, "", `arguments[0]: name "1a" is not a placeholder name`},
		{"enum twice", Prompt{Name: "p", Template: "x", Arguments: []PromptArgument{{Name: "a", Enum: []string{"x", "x"}}}}, "", `enum value "x" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{NameStyle: tc.style, Prompts: []Prompt{tc.p}, Upstreams: []Upstream{{Name: "api", OpenAPI: "x.json"}}}
			_, err := c.Resolve()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v; want one containing %q", err, tc.wantErr)
			}
		})
	}
	// Two prompts of one name.
	c := &Config{Prompts: []Prompt{good, good}, Upstreams: []Upstream{{Name: "api", OpenAPI: "x.json"}}}
	if _, err := c.Resolve(); err == nil || !strings.Contains(err.Error(), `prompts[1] (summarize): name "summarize" is used twice`) {
		t.Errorf("a name used twice: %v", err)
	}
}

// TestPromptsYAML reads the shape from YAML.
func TestPromptsYAML(t *testing.T) {
	c, err := Parse([]byte(`upstreams: [{name: api, openapi: x.json}]
prompts:
  - name: summarize
    description: Summarize a text
    arguments: [{name: text, description: The text, required: true}, {name: tone, enum: [dry, warm]}]
    template: |
      Summarize the following text:
      {{ input.text }}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Prompts[0]
	if p.Name != "summarize" || len(p.Arguments) != 2 || !p.Arguments[0].Required || p.Arguments[1].Enum[1] != "warm" || !strings.Contains(p.Template, "{{ input.text }}") {
		t.Errorf("parsed %+v", p)
	}
	if _, err := Parse([]byte("upstreams: [{name: api, openapi: x.json}]\nprompts: [{name: p, template: x, argumnets: []}]\n")); err == nil || !strings.Contains(err.Error(), "argumnets") {
		t.Errorf("a misspelt key: %v", err)
	}
}

// FuzzParseTemplate: a template parses or is refused, never a panic; what
// parses comes back the same when its parts are written out again in the
// one placeholder form.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"", "plain", "{{ input.a }}", "a {{input.b}} c {{ input.d_e }}", "{{", "}}", "{{ x }}", "{{{{ input.a }}}}", "{{ input.a }"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := ParseTemplate(s)
		if err != nil {
			return
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Arg != "" {
				b.WriteString("{{ input." + p.Arg + " }}")
			} else {
				b.WriteString(p.Text)
			}
		}
		again, err := ParseTemplate(b.String())
		if err != nil {
			t.Fatalf("%q parsed, its rewrite %q does not: %v", s, b.String(), err)
		}
		if len(again) != len(parts) {
			t.Fatalf("%q: %d parts, its rewrite %d", s, len(parts), len(again))
		}
		for i := range parts {
			if parts[i] != again[i] {
				t.Fatalf("%q: part %d %+v, its rewrite %+v", s, i, parts[i], again[i])
			}
		}
	})
}
