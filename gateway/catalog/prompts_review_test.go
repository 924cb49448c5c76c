package catalog

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/config"
)

// TestReviewEnumSplitIsNotDrift: enum [“a, b”] and enum [“a”, “b”] give
// the same argument description, hence the same lock hash, though
// prompts/get accepts different values.
func TestReviewEnumSplitIsNotDrift(t *testing.T) {
	hash := func(enum ...string) string {
		cfg := &config.Config{Prompts: []config.Prompt{{Name: "p", Template: "{{ input.a }}",
			Arguments: []config.PromptArgument{{Name: "a", Enum: enum}}}}}
		ps, err := buildPrompts(cfg, true)
		if err != nil {
			t.Fatal(err)
		}
		c := &Catalog{Prompts: ps}
		lp := c.LockedPrompts(cfg)
		return lp[0].ArgumentsSHA256 + lp[0].DescriptionSHA256 + lp[0].TemplateSHA256
	}
	if hash("a, b") == hash("a", "b") {
		t.Error(`enum ["a, b"] and enum ["a", "b"] lock the same: an enum change is not drift`)
	}
}

// TestReviewEnumValuesSanitized: the description is cleaned, then the enum
// values are appended raw — hidden characters reach the client.
func TestReviewEnumValuesSanitized(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "{{ input.a }}",
		Arguments: []config.PromptArgument{{Name: "a", Description: "x\u200b", Enum: []string{"dry\u200b\u202eIgnore"}}}})
	d := p.Prompt.Arguments[0].Description
	if strings.ContainsAny(d, "\u200b\u202e") {
		t.Errorf("sanitize_text on, description %q still carries hidden characters (from the enum)", d)
	}
}

// TestReviewRenderNoArgumentsMessage: a prompt that takes no argument
// says "(it takes: )".
func TestReviewRenderNoArgumentsMessage(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "Hello"})
	_, err := p.Render(map[string]string{"x": "1"})
	if err == nil || strings.Contains(err.Error(), "(it takes: )") {
		t.Errorf("error %v: want one saying the prompt takes no arguments", err)
	}
}

// TestReviewRenderHugeValueEchoed: a value outside the enum is quoted
// whole in the -32602 message.
func TestReviewRenderHugeValueEchoed(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "{{ input.a }}",
		Arguments: []config.PromptArgument{{Name: "a", Enum: []string{"x"}}}})
	_, err := p.Render(map[string]string{"a": strings.Repeat("A", 1<<20)})
	if err == nil || len(err.Error()) > 1000 {
		t.Errorf("error of %d bytes for a 1 MiB value: want it clipped", len(err.Error()))
	}
}

// TestReviewRenderDeterministicError: two unknown arguments; which one the
// error names depends on map order.
func TestReviewRenderDeterministicError(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "{{ input.a }}"})
	args := map[string]string{"a": "1"}
	for _, k := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		args[k] = "1"
	}
	seen := map[string]bool{}
	for range 50 {
		_, err := p.Render(args)
		seen[err.Error()] = true
	}
	if len(seen) > 1 {
		t.Errorf("one request, %d different errors", len(seen))
	}
}

// TestReviewNoReexpansion (sound): a value holding a placeholder is put in
// as it is.
func TestReviewNoReexpansion(t *testing.T) {
	p := promptOf(t, config.Prompt{Name: "p", Template: "[{{ input.a }}|{{ input.b }}]",
		Arguments: []config.PromptArgument{{Name: "b"}}})
	got, err := p.Render(map[string]string{"a": "{{ input.b }}{{ input.a }}", "b": "{{"})
	if err != nil || got != "[{{ input.b }}{{ input.a }}|{{]" {
		t.Errorf("%q %v", got, err)
	}
	if got, err := p.Render(nil); err == nil {
		t.Errorf("nil arguments rendered %q", got)
	}
}
