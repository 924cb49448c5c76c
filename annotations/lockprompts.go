package annotations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// LockedPrompt is one prompt of a Lock: where it comes from, and hashes of
// what a client is shown (title and description, arguments) and of what
// it renders (a configured prompt's template). A prompt is text a model
// reads whole, so any change to it is a critical one.
type LockedPrompt struct {
	Name string `json:"name"`
	// Source is "config" for a prompt of the configuration,
	// "playbook:PATH" for a playbook's mcp.prompts, or "upstream:NAME" for
	// an MCP upstream's.
	Source            string `json:"source"`
	DescriptionSHA256 string `json:"descriptionSha256"`
	ArgumentsSHA256   string `json:"argumentsSha256"`
	// TemplateSHA256 is a configured or playbook prompt's; an upstream's
	// template is the upstream's to render, and not seen before
	// prompts/get.
	TemplateSHA256 string `json:"templateSha256,omitempty"`
}

// PromptFacts makes the LockedPrompt of a served prompt: title and
// description are hashed as the JSON of the pair (no text can move from
// one to the other unseen), arguments as its JSON.
func PromptFacts(name, source, title, description string, arguments any, templateSHA256 string) LockedPrompt {
	return LockedPrompt{
		Name: name, Source: source,
		DescriptionSHA256: jsonHash([]string{title, description}),
		ArgumentsSHA256:   jsonHash(arguments),
		TemplateSHA256:    templateSHA256,
	}
}

func jsonHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	return textHash(string(b))
}

func textHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// SetPrompts records prompts in the lock, sorted by name.
func (l *Lock) SetPrompts(prompts []LockedPrompt) {
	l.Prompts = slices.Clone(prompts)
	slices.SortFunc(l.Prompts, func(a, b LockedPrompt) int { return strings.Compare(a.Name, b.Name) })
}

// PromptChange is one field of a prompt that differs from the lock.
type PromptChange struct {
	Prompt string `json:"prompt"`
	Field  string `json:"field"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// ComparePrompts adds to d how prompts differ from l: a prompt not in the
// lock is added, one no longer served removed, one whose source or hashes
// differ changed. Prompts are never matched as renames.
func (d *Drift) ComparePrompts(l *Lock, prompts []LockedPrompt) {
	locked := map[string]LockedPrompt{}
	for _, p := range l.Prompts {
		locked[p.Name] = p
	}
	current := map[string]bool{}
	for _, now := range prompts {
		current[now.Name] = true
		was, ok := locked[now.Name]
		if !ok {
			d.PromptsAdded = append(d.PromptsAdded, now.Name)
			continue
		}
		for _, f := range []struct{ field, from, to string }{
			{"source", was.Source, now.Source},
			{"title and description", short(was.DescriptionSHA256), short(now.DescriptionSHA256)},
			{"arguments", short(was.ArgumentsSHA256), short(now.ArgumentsSHA256)},
			{"template", short(was.TemplateSHA256), short(now.TemplateSHA256)},
		} {
			if f.from != f.to {
				d.PromptsChanged = append(d.PromptsChanged, PromptChange{Prompt: now.Name, Field: f.field, From: f.from, To: f.to})
			}
		}
	}
	for _, p := range l.Prompts {
		if !current[p.Name] {
			d.PromptsRemoved = append(d.PromptsRemoved, p.Name)
		}
	}
	slices.Sort(d.PromptsAdded)
	slices.Sort(d.PromptsRemoved)
}

// HeldPrompts returns the prompts `serve --lock` does not serve, sorted:
// those added or changed since the lock.
func (d *Drift) HeldPrompts() []string {
	if d == nil {
		return nil
	}
	held := slices.Clone(d.PromptsAdded)
	for _, c := range d.PromptsChanged {
		held = append(held, c.Prompt)
	}
	slices.Sort(held)
	return slices.Compact(held)
}

// promptLines renders the prompts' drift, one line per prompt, after the
// tools' (see Lines). Every change of a prompt is critical: its texts are
// what the model reads.
func (d *Drift) promptLines() []string {
	var lines []string
	for _, n := range d.PromptsAdded {
		lines = append(lines, "+ prompt "+n+": not in the lock")
	}
	for _, n := range d.PromptsRemoved {
		lines = append(lines, "- prompt "+n+": in the lock, no longer served")
	}
	var order []string
	changes := map[string][]string{}
	for _, c := range d.PromptsChanged {
		if changes[c.Prompt] == nil {
			order = append(order, c.Prompt)
		}
		changes[c.Prompt] = append(changes[c.Prompt], c.Field+" "+orNone(c.From)+" → "+orNone(c.To)+" [CRITICAL]")
	}
	for _, n := range order {
		lines = append(lines, "~ prompt "+n+": "+strings.Join(changes[n], "; "))
	}
	return lines
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// readPrompts checks a lock's prompts: each named, once, with a source
// ("config", "playbook:PATH" or "upstream:NAME"), both text hashes, and a
// template hash exactly when the gateway renders it (not an upstream's).
func (l *Lock) readPrompts() error {
	seen := map[string]bool{}
	for _, p := range l.Prompts {
		fail := func(why string) error {
			return fmt.Errorf("annotations: lockfile: prompt %q %s", p.Name, why)
		}
		switch {
		case p.Name == "":
			return fmt.Errorf("annotations: lockfile: a prompt has no name")
		case seen[p.Name]:
			return fail("appears twice")
		case !validPromptSource(p.Source):
			return fail(fmt.Sprintf("has source %q, not config, playbook:PATH or upstream:NAME", p.Source))
		case p.DescriptionSHA256 == "" || p.ArgumentsSHA256 == "":
			return fail("has no descriptionSha256 or argumentsSha256")
		case strings.HasPrefix(p.Source, "upstream:") == (p.TemplateSHA256 != ""):
			return fail("has a templateSha256 though an upstream renders it, or has none though the gateway does")
		}
		seen[p.Name] = true
	}
	return nil
}

// validPromptSource reports whether s is a source a LockedPrompt may have.
func validPromptSource(s string) bool {
	if s == "config" {
		return true
	}
	for _, prefix := range []string{"playbook:", "upstream:"} {
		if rest, ok := strings.CutPrefix(s, prefix); ok && rest != "" {
			return true
		}
	}
	return false
}
