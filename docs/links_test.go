package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestLinks walks README.md and every page of docs/ and checks each relative
// Markdown link: the file or folder it names exists, and a #fragment names a
// heading of its target page (GitHub's anchors, see anchors). Links with a
// scheme (https:, mailto:) are not fetched: that is a network test, and a
// flaky one.
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	for _, p := range pages {
		for _, problem := range checkPage(p) {
			t.Errorf("%s", problem)
		}
	}
}

// TestCheckPageFindsBrokenLinks feeds checkPage a page with one link of each
// kind that must fail, and some that must not, so that a checker that found
// nothing could not pass TestLinks.
func TestCheckPageFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("other.md", "# Other page\n\n## Security and bounds\n\n## `mcpgate serve`: flags\n\n## Twice\n\n## Twice\n")
	write("page.md", strings.Join([]string{
		"# Page",
		"## A (small) heading",
		"[ok](other.md) [ok](other.md#security-and-bounds) [ok](#a-small-heading)",
		"[ok](other.md#mcpgate-serve-flags) [ok](other.md#twice-1) [ok](https://example.com/x.md#nope)",
		"[ok][ref] and `[not a link](nowhere.md)`",
		"```",
		"[not a link either](nowhere.md)",
		"```",
		"[missing file](nowhere.md) [missing anchor](other.md#nope)",
		"[missing local anchor](#security-and-bounds) [missing second twice](other.md#twice-2)",
		"[ref]: other.md#other-page",
		"[badref]: gone.md",
	}, "\n"))
	got := checkPage(filepath.Join(dir, "page.md"))
	want := []string{"nowhere.md", "other.md#nope", "#security-and-bounds", "other.md#twice-2", "gone.md"}
	if len(got) != len(want) {
		t.Fatalf("found %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], "("+w+")") {
			t.Errorf("problem %d: %s; want one about %s", i, got[i], w)
		}
	}
}

// TestAnchor pins GitHub's rule for a heading's anchor on the headings
// these pages use.
func TestAnchor(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Embedding (in-process)", "embedding-in-process"},
		{"Security and bounds", "security-and-bounds"},
		{"What a tool call returns", "what-a-tool-call-returns"},
		{"`mcpgate audit`", "mcpgate-audit"},
		{"Tasks (2025-11-25)", "tasks-2025-11-25"},
		{"The NoETL-compatible endpoint", "the-noetl-compatible-endpoint"},
		{"[Linked](x.md) heading", "linked-heading"},
		{"snake_case stays", "snake_case-stays"},
		{"Front door → fast path", "front-door--fast-path"},
	} {
		if got := anchor(tt.heading); got != tt.want {
			t.Errorf("anchor(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

var (
	// inlineLink is [text](target) or ![alt](target), with an optional
	// "title" after the target.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition is a reference-style link's definition: [label]: target.
	refDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan      = regexp.MustCompile("`[^`]*`")
	heading       = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme        = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// linkText is a link or image inside a heading, which renders as its text.
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// checkPage returns a line for every relative link of the page at path that
// leads nowhere, in the order they appear.
func checkPage(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, l := range links(string(data)) {
		if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
			continue
		}
		file, frag, _ := strings.Cut(l.target, "#")
		target := path
		if file != "" {
			target = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			if _, err := os.Stat(target); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s): no such file or folder", path, l.line, l.target))
				continue
			}
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(target, ".md") {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s): an anchor into a file that is not Markdown", path, l.line, l.target))
			continue
		}
		text, err := os.ReadFile(target)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s): %v", path, l.line, l.target, err))
			continue
		}
		if !slices.Contains(anchors(string(text)), frag) {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s): %s has no heading with that anchor", path, l.line, l.target, target))
		}
	}
	return problems
}

type link struct {
	line   int
	target string
}

// links returns the link targets of a Markdown text, outside fenced code
// blocks and code spans.
func links(text string) []link {
	var out []link
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = append(out, link{i + 1, m[1]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown text,
// in order: a heading met again gets -1, -2, … appended.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor for a heading: the heading's text as rendered
// (links become their text; code and emphasis marks go), lower-cased, every
// character that is not a letter, a digit, '_', '-' or a space dropped, and
// each space made '-'.
func anchor(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
