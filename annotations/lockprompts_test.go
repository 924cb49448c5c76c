package annotations

import (
	"bytes"
	"strings"
	"testing"
)

// TestComparePrompts: prompts added, removed and changed (each field) are
// drift, every change critical; serve --lock holds the added and changed;
// a lock round-trips its prompts, and refuses one named twice.
func TestComparePrompts(t *testing.T) {
	p := func(name, desc, tmpl string) LockedPrompt {
		return PromptFacts(name, "config", "", desc, []string{"text"}, textHash(tmpl))
	}
	l := NewLock(nil)
	l.SetPrompts([]LockedPrompt{p("summarize", "Summarize", "a"), p("gone", "x", "x"), p("same", "s", "s")})
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	read, err := ReadLock(&buf)
	if err != nil || len(read.Prompts) != 3 || read.Prompts[0].Name != "gone" {
		t.Fatalf("round trip: %v %+v", err, read)
	}
	now := []LockedPrompt{p("summarize", "Summarize", "b"), p("same", "s", "s"), p("new", "n", "n")}
	d := Compare(read, nil)
	d.ComparePrompts(read, now)
	if d.Empty() {
		t.Fatal("no drift")
	}
	if got := strings.Join(d.HeldPrompts(), " "); got != "new summarize" {
		t.Errorf("held %q, want new summarize", got)
	}
	var out bytes.Buffer
	d.WriteText(&out)
	for _, want := range []string{
		"lock: 3 prompts drifted: 1 added, 1 removed, 1 changed",
		"+ prompt new: not in the lock",
		"- prompt gone: in the lock, no longer served",
		"~ prompt summarize: template ",
		"[CRITICAL]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("drift text lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "prompt same") {
		t.Errorf("an unchanged prompt is drift:\n%s", out.String())
	}
	// Each field on its own.
	base := p("x", "d", "t")
	for field, changed := range map[string]LockedPrompt{
		"title and description": p("x", "d2", "t"),
		"template":              p("x", "d", "t2"),
		"arguments":             PromptFacts("x", "config", "", "d", []string{"text", "more"}, textHash("t")),
		"source":                {Name: "x", Source: "upstream:fs", DescriptionSHA256: base.DescriptionSHA256, ArgumentsSHA256: base.ArgumentsSHA256, TemplateSHA256: base.TemplateSHA256},
	} {
		l := NewLock(nil)
		l.SetPrompts([]LockedPrompt{base})
		d := Compare(l, nil)
		d.ComparePrompts(l, []LockedPrompt{changed})
		if len(d.PromptsChanged) != 1 || d.PromptsChanged[0].Field != field {
			t.Errorf("%s changed: %+v", field, d.PromptsChanged)
		}
	}
	if _, err := ReadLock(strings.NewReader(`{"version":2,"tools":[],"prompts":[{"name":"a","source":"config","descriptionSha256":"x","argumentsSha256":"y","templateSha256":"z"},{"name":"a","source":"config","descriptionSha256":"x","argumentsSha256":"y","templateSha256":"z"}]}`)); err == nil || !strings.Contains(err.Error(), `prompt "a" appears twice`) {
		t.Errorf("a prompt twice: %v", err)
	}
}

// TestReportListsPrompts: the table and Markdown audits list the prompts
// served, with their source and template hash; a report without prompts
// prints no section for them.
func TestReportListsPrompts(t *testing.T) {
	r := NewReport(nil, nil)
	r.Prompts = []LockedPrompt{
		PromptFacts("summarize", "config", "", "d", nil, textHash("t")),
		PromptFacts("fs_greet", "upstream:fs", "", "d", nil, ""),
	}
	for format, want := range map[string][]string{
		"table":    {"PROMPT", "summarize", "config", textHash("t")[:12], "fs_greet", "upstream:fs", "none"},
		"markdown": {"## Prompts", "| `summarize` | config | " + textHash("t")[:12] + " |", "| `fs_greet` | upstream:fs | none |"},
	} {
		var b bytes.Buffer
		if err := r.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s report lacks %q:\n%s", format, w, b.String())
			}
		}
		var none bytes.Buffer
		NewReport(nil, nil).Write(&none, format)
		if strings.Contains(none.String(), "rompt") {
			t.Errorf("%s report without prompts mentions them:\n%s", format, none.String())
		}
	}
}

// TestReadLockPromptSources: a lockfile `audit --write-lock` writes is read
// back whatever its prompts' sources — the configuration's, a playbook's
// (with its template's hash) or an upstream's (without one) — and one
// that breaks those rules is refused.
func TestReadLockPromptSources(t *testing.T) {
	l := NewLock(nil)
	l.SetPrompts([]LockedPrompt{
		PromptFacts("summarize", "config", "", "d", nil, textHash("t")),
		PromptFacts("demo_fast_greet", "playbook:demo/fast", "", "d", nil, textHash("t")),
		PromptFacts("fs_review", "upstream:fs", "", "d", nil, ""),
	})
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if read, err := ReadLock(&buf); err != nil || len(read.Prompts) != 3 {
		t.Fatalf("round trip: %v %+v", err, read)
	}
	for _, bad := range []LockedPrompt{
		PromptFacts("p", "playbook:", "", "d", nil, textHash("t")),
		PromptFacts("p", "playbook:demo/fast", "", "d", nil, ""),
		PromptFacts("p", "upstream:fs", "", "d", nil, textHash("t")),
	} {
		l.SetPrompts([]LockedPrompt{bad})
		buf.Reset()
		l.Write(&buf)
		if _, err := ReadLock(&buf); err == nil {
			t.Errorf("%+v: read without error", bad)
		}
	}
}
