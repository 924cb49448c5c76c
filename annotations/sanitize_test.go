package annotations

import (
	"strings"
	"testing"
)

// TestSanitizeTextIsClean: removing a character cannot leave a new hidden one
// behind (a reference whose pieces it joined), however deep the nesting.
func TestSanitizeTextIsClean(t *testing.T) {
	deep := "&#x202E;"
	for range 10 {
		deep = deep[:3] + "&#8203;" + deep[3:]
	}
	for _, in := range []string{
		"&#x2\u200b02E;", "&\u200b#x202E;", "&&#8203;#x202E;", "&#xE00\u200b69;", deep,
		"plain & simple; a &amp; b", "caf\u00e9 \u00a0 \U0001F680",
	} {
		out := SanitizeText(in)
		if again := SanitizeText(out); again != out {
			t.Errorf("SanitizeText(%q) = %q, and again %q", in, out, again)
		}
		hiddenRunes(out, func(c textRune, _ hiddenKind) {
			t.Errorf("SanitizeText(%q) = %q still holds %q", in, out, out[c.i:c.j])
		})
	}
	if got := SanitizeText("plain & simple; a &amp; b"); got != "plain & simple; a &amp; b" {
		t.Errorf("ordinary text changed: %q", got)
	}
}

// BenchmarkSanitizeAmpersands reads 1 MiB of ampersands, which each used
// to search the whole rest of the text for their ';' (44 s a MiB through the
// lint and sanitizing; now linear).
func BenchmarkSanitizeAmpersands(b *testing.B) {
	s := strings.Repeat("&", 1<<20)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		SanitizeText(s)
	}
}
