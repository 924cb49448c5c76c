package catalog

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/config"
)

func promptOf(t *testing.T, p config.Prompt) *Prompt {
	t.Helper()
	ps, err := buildPrompts(&config.Config{Prompts: []config.Prompt{p}}, true)
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

// TestPromptArguments: the declared arguments in order, then those only a
// placeholder names, required; enums said in the description.
func TestPromptArguments(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "{{ input.b }} {{ input.c }} {{ input.a }} {{ input.c }}",
		Arguments: []config.PromptArgument{{Name: "a", Description: "First."}, {Name: "d", Enum: []string{"x", "y"}}}})
	var got []string
	for _, a := range p.Prompt.Arguments {
		got = append(got, a.Name+map[bool]string{true: "!", false: ""}[a.Required])
	}
	if strings.Join(got, " ") != "a d b! c!" {
		t.Errorf("arguments %v, want a d b! c!", got)
	}
	if d := p.Prompt.Arguments[1].Description; d != "One of: x, y." {
		t.Errorf("enum argument's description %q", d)
	}
}

// TestPromptRender renders and refuses as prompts/get does.
func TestPromptRender(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "summarize", Template: "Summarize ({{ input.tone }}):\n{{ input.text }}\n",
		Arguments: []config.PromptArgument{{Name: "text", Required: true}, {Name: "tone", Enum: []string{"dry", "warm"}}}})
	for _, tc := range []struct {
		name    string
		args    map[string]string
		want    string
		wantErr string
	}{
		{"all", map[string]string{"text": "A {{ input.tone }} text", "tone": "warm"}, "Summarize (warm):\nA {{ input.tone }} text\n", ""},
		{"optional left out", map[string]string{"text": "T"}, "Summarize ():\nT\n", ""},
		{"required missing", map[string]string{"tone": "dry"}, "", `prompt "summarize": argument "text" is required`},
		{"required empty", map[string]string{"text": ""}, "", `argument "text" is required`},
		{"unknown", map[string]string{"text": "T", "style": "x"}, "", `prompt "summarize" takes no argument "style" (it takes: text, tone)`},
		{"outside the enum", map[string]string{"text": "T", "tone": "loud"}, "", `argument "tone" is "loud", not one of dry, warm`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Render(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got := p.Complete("tone", "W"); len(got) != 1 || got[0] != "warm" {
		t.Errorf("completing tone from W: %v", got)
	}
	if got := p.Complete("text", ""); got != nil {
		t.Errorf("completing an argument without an enum: %v", got)
	}
}
