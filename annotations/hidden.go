package annotations

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Characters a reader does not see.
//
// A document can hide instructions for a model in a tool's texts where a
// reviewer reading them does not see them: characters that render as
// nothing (zero-width spaces and joiners, the word joiner, the byte-order
// mark, and the rest of Unicode's Default_Ignorable_Code_Point), the
// bidirectional embedding, override and isolate controls that reorder what
// is shown (CVE-2021-42574, "Trojan Source"), and the tag characters
// U+E0000–U+E007F, an invisible copy of ASCII ("ASCII smuggling"). The
// audit flags them (MCPG012, MCPG013, MCPG014) and the gateway removes them
// from what it serves (SanitizeText).
//
// Ordinary text uses some of these on purpose, and keeps them: a zero-width
// joiner inside an emoji sequence (👩‍💻), after a virama (Indic conjuncts)
// or between letters of a joining script (Arabic, Syriac, Mongolian…); a
// zero-width non-joiner in the same places (Persian's می‌خواهم), as IDNA's
// CONTEXTJ rules allow them (RFC 5892, Appendix A); one variation selector
// after a character (❤️, or an ideographic variant); and the tag characters
// of an emoji subdivision flag (🏴󠁧󠁢󠁳󠁣󠁴󠁿, UTS #51). The left-to-right,
// right-to-left and Arabic letter marks (U+200E, U+200F, U+061C), which
// right-to-left text needs around punctuation and cannot reorder a run of
// text the way overrides and isolates do, are not flagged.
//
// An HTML character reference to one of these (&#x200B;, &zwj;) renders as
// the character in Markdown and HTML, and counts as one.

// hiddenKind is what a character is to a reader.
type hiddenKind uint8

const (
	shown     hiddenKind = iota
	invisible            // MCPG012
	bidi                 // MCPG013
	tag                  // MCPG014
)

// textRune is one character of a text: a rune, or an HTML character
// reference standing for one, at s[i:j].
type textRune struct {
	r    rune
	i, j int
}

// namedRefs are the HTML named character references that stand for
// characters a reader does not see (HTML's list, for these code points).
var namedRefs = map[string]rune{
	"ZeroWidthSpace": 0x200B, "NegativeVeryThinSpace": 0x200B, "NegativeThinSpace": 0x200B,
	"NegativeMediumSpace": 0x200B, "NegativeThickSpace": 0x200B,
	"zwnj": 0x200C, "zwj": 0x200D, "NoBreak": 0x2060, "shy": 0x00AD,
	"ApplyFunction": 0x2061, "af": 0x2061, "InvisibleTimes": 0x2062, "it": 0x2062,
	"InvisibleComma": 0x2063, "ic": 0x2063,
}

// textRunes splits s into characters, an HTML character reference to one
// being one.
func textRunes(s string) []textRune {
	out := make([]textRune, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if r, n := charRef(s[i:]); n > 0 {
				out = append(out, textRune{r, i, i + n})
				i += n
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		out = append(out, textRune{r, i, i + n})
		i += n
	}
	return out
}

// charRef reads an HTML character reference at the start of s: numeric
// (&#8203; &#x200B;) for any character, named only for those of namedRefs.
// n is 0 when there is none.
func charRef(s string) (r rune, n int) {
	// Look no further than a reference can reach: searching the whole rest
	// of s for each '&' made a text of ampersands quadratic.
	end := strings.IndexByte(s[:min(len(s), 33)], ';')
	if end < 2 || end > 32 {
		return 0, 0
	}
	body := s[1:end]
	if body[0] == '#' {
		digits, base := body[1:], 10
		if len(digits) > 0 && (digits[0] == 'x' || digits[0] == 'X') {
			digits, base = digits[1:], 16
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" || v > unicode.MaxRune {
			return 0, 0
		}
		return rune(v), end + 1
	}
	if r, ok := namedRefs[body]; ok {
		return r, end + 1
	}
	return 0, 0
}

// hiddenRunes calls f with every character of s a reader does not see, in
// order, with its kind.
func hiddenRunes(s string, f func(c textRune, kind hiddenKind)) {
	if !mayHide(s) {
		return
	}
	rs := textRunes(s)
	flags := subdivisionFlags(rs)
	for k, c := range rs {
		if kind := classify(rs, k, flags); kind != shown {
			f(c, kind)
		}
	}
}

// mayHide is a quick test: only non-ASCII text, or a character reference,
// can hold a hidden character.
func mayHide(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || s[i] == '&' {
			return true
		}
	}
	return false
}

// classify says what rs[k] is to a reader; inFlag marks the tag characters
// of emoji subdivision flags.
func classify(rs []textRune, k int, inFlag []bool) hiddenKind {
	r := rs[k].r
	switch {
	case r < 0xAD:
		return shown
	case 0xE0000 <= r && r <= 0xE007F:
		if inFlag != nil && inFlag[k] {
			return shown
		}
		return tag
	case 0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:
		return bidi
	case r == 0x200E, r == 0x200F, r == 0x061C:
		return shown // LRM, RLM, ALM: see above
	case r == 0x200C, r == 0x200D:
		if joinerInContext(rs, k) {
			return shown
		}
		return invisible
	case isVariationSelector(r):
		if k > 0 && !isVariationSelector(rs[k-1].r) && !unicode.IsSpace(rs[k-1].r) && classify(rs, k-1, inFlag) == shown {
			return shown // one selector after a character: ❤️
		}
		return invisible // a run of them carries data, not a variant
	case isDefaultIgnorable(r):
		return invisible
	}
	return shown
}

func isVariationSelector(r rune) bool {
	return 0xFE00 <= r && r <= 0xFE0F || 0xE0100 <= r && r <= 0xE01EF ||
		0x180B <= r && r <= 0x180D || r == 0x180F // Mongolian free variation selectors
}

// isDefaultIgnorable is Unicode's Default_Ignorable_Code_Point
// (DerivedCoreProperties.txt, Unicode 15): characters a renderer shows
// nothing for.
func isDefaultIgnorable(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x061C, r == 0x115F, r == 0x1160,
		r == 0x17B4, r == 0x17B5, 0x180B <= r && r <= 0x180F,
		0x200B <= r && r <= 0x200F, 0x202A <= r && r <= 0x202E, 0x2060 <= r && r <= 0x206F,
		r == 0x3164, 0xFE00 <= r && r <= 0xFE0F, r == 0xFEFF, r == 0xFFA0, 0xFFF0 <= r && r <= 0xFFF8,
		0x1BCA0 <= r && r <= 0x1BCA3, 0x1D173 <= r && r <= 0x1D17A, 0xE0000 <= r && r <= 0xE0FFF:
		return true
	}
	return false
}

// joiningScripts are the scripts whose letters join, where ZWJ and ZWNJ
// between two letters choose a form (RFC 5892's CONTEXTJ rule for ZWNJ reads
// joining types; a letter of one of these scripts on each side stands for
// it).
var joiningScripts = []*unicode.RangeTable{
	unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian, unicode.Phags_Pa, unicode.Manichaean,
	unicode.Psalter_Pahlavi, unicode.Adlam, unicode.Hanifi_Rohingya, unicode.Sogdian, unicode.Old_Uyghur,
}

// joinerInContext reports whether the ZWJ or ZWNJ at rs[k] is where ordinary
// text puts one: after a virama (Indic conjuncts, RFC 5892 A.1 and A.2),
// between letters of a joining script, or (ZWJ) inside an emoji sequence.
func joinerInContext(rs []textRune, k int) bool {
	prev, next := -1, -1
	// Marks (a harakat, a skin tone, a variation selector) sit between the
	// letters or emoji joined; look past them.
	for i := k - 1; i >= 0; i-- {
		if !isJoinTransparent(rs[i].r) {
			prev = i
			break
		}
	}
	for i := k + 1; i < len(rs); i++ {
		if !isJoinTransparent(rs[i].r) {
			next = i
			break
		}
	}
	if k > 0 && norm.NFC.PropertiesString(string(rs[k-1].r)).CCC() == 9 {
		return true // after a virama
	}
	if prev < 0 || next < 0 {
		return false
	}
	p, n := rs[prev].r, rs[next].r
	if rs[k].r == 0x200D && isEmoji(p) && isEmoji(n) {
		return true
	}
	if unicode.IsLetter(p) && unicode.IsLetter(n) {
		for _, script := range joiningScripts {
			if unicode.Is(script, p) && unicode.Is(script, n) {
				return true
			}
		}
	}
	return false
}

func isJoinTransparent(r rune) bool {
	return unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || isVariationSelector(r) || 0x1F3FB <= r && r <= 0x1F3FF
}

// isEmoji approximates Extended_Pictographic, which Go's unicode package
// does not have: emoji are symbols (So).
func isEmoji(r rune) bool { return r >= 0x2000 && unicode.Is(unicode.So, r) }

// subdivisionFlags marks the tag characters of emoji subdivision flags
// (UTS #51 ED-14a: U+1F3F4, then a subdivision code in tag letters and
// digits, then U+E007F CANCEL TAG, as in 🏴󠁧󠁢󠁳󠁣󠁴󠁿); nil when s has none.
// A code is a region and a subdivision, 3 to 6 characters: too few to carry
// anything.
func subdivisionFlags(rs []textRune) []bool {
	var in []bool
	for k := 0; k < len(rs); k++ {
		if rs[k].r != 0x1F3F4 {
			continue
		}
		j := k + 1
		for j < len(rs) && j-k <= 7 && (0xE0061 <= rs[j].r && rs[j].r <= 0xE007A || 0xE0030 <= rs[j].r && rs[j].r <= 0xE0039) {
			j++
		}
		if n := j - k - 1; n < 3 || n > 6 || j >= len(rs) || rs[j].r != 0xE007F {
			continue
		}
		if in == nil {
			in = make([]bool, len(rs))
		}
		for i := k + 1; i <= j; i++ {
			in[i] = true
		}
		k = j
	}
	return in
}

// SanitizeText returns s without the characters a reader does not see that
// the audit flags (MCPG012, MCPG013, MCPG014), character references to them
// included; ordinary text (see above) comes back unchanged, s itself when
// nothing is removed. Bytes that are not UTF-8 become U+FFFD first, as
// encoding/json would send them: removing a character between two of them
// must not make a new one.
//
// Removing a character can join the pieces of a new reference around it
// ("&#x2" + U+200B + "02E;" is "&#x202E;" once the U+200B is gone), so it
// removes until nothing is left to remove. A text still not clean after
// maxSanitizePasses (nested on purpose) has every '&' written as "&amp;":
// no reference in it reads as a character any more, and a reader sees the
// text as it was written.
func SanitizeText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for range maxSanitizePasses {
		t := sanitizeOnce(s)
		if len(t) == len(s) { // nothing removed: every pass removes bytes
			return t
		}
		s = t
	}
	if t := sanitizeOnce(s); len(t) != len(s) {
		return sanitizeOnce(strings.ReplaceAll(t, "&", "&amp;"))
	}
	return s
}

// maxSanitizePasses bounds SanitizeText's passes: each reads the whole text.
const maxSanitizePasses = 4

// sanitizeOnce removes what hiddenRunes finds in s, once.
func sanitizeOnce(s string) string {
	var b strings.Builder
	last := 0
	hiddenRunes(s, func(c textRune, _ hiddenKind) {
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:c.i])
		last = c.j
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// codePoint names a character for a report: "U+202E RIGHT-TO-LEFT
// OVERRIDE", "U+E0069 TAG LATIN SMALL LETTER I".
func codePoint(r rune) string {
	s := fmt.Sprintf("U+%04X", r)
	if name := runeName(r); name != "" {
		s += " " + name
	}
	return s
}

// runeName is the Unicode name of the characters the audit names most, ""
// for others (Go's standard library has no name table, and x/text's is
// half a megabyte).
func runeName(r rune) string {
	switch {
	case 0xE0020 <= r && r <= 0xE007E:
		c := r - 0xE0000
		switch {
		case 'a' <= c && c <= 'z':
			return "TAG LATIN SMALL LETTER " + string(c-'a'+'A')
		case 'A' <= c && c <= 'Z':
			return "TAG LATIN CAPITAL LETTER " + string(c)
		case '0' <= c && c <= '9':
			return "TAG DIGIT " + strings.ToUpper(digitNames[c-'0'])
		case c == ' ':
			return "TAG SPACE"
		}
		return "TAG " + strconv.QuoteRune(c)
	case 0xFE00 <= r && r <= 0xFE0F:
		return fmt.Sprintf("VARIATION SELECTOR-%d", r-0xFE00+1)
	case 0xE0100 <= r && r <= 0xE01EF:
		return fmt.Sprintf("VARIATION SELECTOR-%d", r-0xE0100+17)
	}
	return runeNames[r]
}

var digitNames = [10]string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}

var runeNames = map[rune]string{
	0x00AD: "SOFT HYPHEN", 0x034F: "COMBINING GRAPHEME JOINER", 0x115F: "HANGUL CHOSEONG FILLER",
	0x1160: "HANGUL JUNGSEONG FILLER", 0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION", 0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE", 0x3164: "HANGUL FILLER", 0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
	0xFFA0: "HALFWIDTH HANGUL FILLER", 0xE0001: "LANGUAGE TAG", 0xE007F: "CANCEL TAG",
}
