package annotations

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/html"
	"golang.org/x/net/publicsuffix"
)

// The text rules (MCPG012…MCPG018) read every text of a tool a client
// reads: its name, title and description, and in its input and output
// schemas every title and description, enum value, const, default, example
// and property name. A document can hide instructions for the model there,
// out of a reviewer's sight: characters that render as nothing or reorder
// the text (hidden.go), HTML comments, <IMPORTANT>-style tags, and images or
// links whose URL carries data to another host.

// Text is one text of a tool a client reads, as the document gives it (the
// gateway removes hidden characters only when it serves the tool: see
// SanitizeText).
type Text struct {
	// Field is the text's JSON pointer in the tool (RFC 6901):
	// "/description", "/inputSchema/properties/status/enum/2".
	Field string
	// Name says the text is the name of the member at Field (a property
	// name), not its value.
	Name bool
	// Value is the text as the tool carries it.
	Value string
	// Sources are the texts of the document Value was made from, when
	// known: the summary and description a tool's description joins, or a
	// description before its HTML was converted to Markdown (which drops
	// HTML comments). A finding names the line of the first source that
	// has what it flags.
	Sources []TextSource
}

// TextSource is a text as the document writes it, and its line (0 when not
// known).
type TextSource struct {
	Raw  string
	Line int
}

// textHit is one thing a text rule found.
type textHit struct {
	key    string // tells two hits apart: a code point, a tag's name, a host
	detail string // how the message names it
	runes  []rune // the characters, for the rules on characters
}

// hiddenHits finds the characters of kind in s, one hit per character.
func hiddenHits(kind hiddenKind) func(s string, _ *hostSet) []textHit {
	return func(s string, _ *hostSet) []textHit {
		var hits []textHit
		hiddenRunes(s, func(c textRune, k hiddenKind) {
			if k == kind {
				hits = append(hits, textHit{key: fmt.Sprintf("U+%04X", c.r), detail: codePoint(c.r), runes: []rune{c.r}})
			}
		})
		return hits
	}
}

// tagHits finds runs of tag characters, each spelling ASCII.
func tagHits(s string, _ *hostSet) []textHit {
	var hits []textHit
	var run []rune
	end := -1
	flush := func() {
		if len(run) == 0 {
			return
		}
		var spelled strings.Builder
		for _, r := range run {
			if c := r - 0xE0000; 0x20 <= c && c < 0x7F {
				spelled.WriteRune(c)
			}
		}
		q := strconv.Quote(truncate(spelled.String(), 80))
		hits = append(hits, textHit{key: q, detail: fmt.Sprintf("%d spelling %s", len(run), q), runes: run})
		run = nil
	}
	hiddenRunes(s, func(c textRune, k hiddenKind) {
		if k != tag {
			return
		}
		if c.i != end {
			flush()
		}
		run, end = append(run, c.r), c.j
	})
	flush()
	return hits
}

// commentHits finds HTML comments outside Markdown code.
func commentHits(s string, _ *hostSet) []textHit {
	var hits []textHit
	for _, c := range htmlComments(s) {
		q := strconv.Quote(truncate(s[c[0]:c[1]], 60))
		hits = append(hits, textHit{key: s[c[0]:c[1]], detail: q})
	}
	return hits
}

// htmlComments returns where the HTML comments of s stand, outside Markdown
// code: "<!--" to the first "-->" after it ("<!-->" and "<!--->" are whole
// comments), or to the end when none follows, as HTML reads an unclosed one.
// upstream.DescriptionMarkdown drops the same comments.
func htmlComments(s string) [][2]int {
	if !strings.Contains(s, "<!--") {
		return nil
	}
	m := maskCode(s)
	var out [][2]int
	for i := 0; ; {
		k := strings.Index(m[i:], "<!--")
		if k < 0 {
			return out
		}
		start := i + k
		end := len(s)
		switch rest := m[start+4:]; {
		case strings.HasPrefix(rest, ">"):
			end = start + 5
		case strings.HasPrefix(rest, "->"):
			end = start + 6
		default:
			if e := strings.Index(rest, "-->"); e >= 0 {
				end = start + 4 + e + 3
			}
		}
		out = append(out, [2]int{start, end})
		i = end
	}
}

// maskCode returns s with its Markdown code (fenced blocks and code spans,
// CommonMark's rules) blanked out, byte for byte, so that offsets in the
// result are offsets in s: what is inside code is shown as it is, never read
// as a comment, a tag or a link.
func maskCode(s string) string {
	if !strings.ContainsAny(s, "`~") {
		return s
	}
	b := []byte(s)
	blank := func(i, j int) {
		for ; i < j; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	// Fenced code blocks, a line at a time.
	var fence byte
	fenceLen := 0
	for start := 0; start < len(b); {
		end := start + strings.IndexByte(s[start:], '\n')
		if end < start {
			end = len(s)
		}
		line := s[start:end]
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		run := 0
		if indent <= 3 && trimmed != "" && (trimmed[0] == '`' || trimmed[0] == '~') {
			for run < len(trimmed) && trimmed[run] == trimmed[0] {
				run++
			}
		}
		switch {
		case fence != 0:
			if run >= fenceLen && trimmed[0] == fence && strings.TrimSpace(trimmed[run:]) == "" {
				fence = 0
			}
			blank(start, end)
		case run >= 3 && !(trimmed[0] == '`' && strings.Contains(trimmed[run:], "`")):
			fence, fenceLen = trimmed[0], run
			blank(start, end)
		}
		start = end + 1
	}
	// Code spans: a run of n backticks to the next run of exactly n. The
	// runs are listed first, so that finding each one's closer is a step
	// along the list of runs of its length, not a scan of the text: a text
	// of many unmatched runs stays linear.
	type run struct{ at, n int }
	var runs []run
	for i := 0; i < len(b); {
		switch b[i] {
		case '\\':
			i += 2
		case '`':
			n := backticks(b, i)
			runs = append(runs, run{i, n})
			i += n
		default:
			i++
		}
	}
	byLen := map[int][]int{} // run length → indexes in runs, in order
	for k, r := range runs {
		byLen[r.n] = append(byLen[r.n], k)
	}
	seen := map[int]int{} // run length → how many of byLen's are behind us
	for k := 0; k < len(runs); k++ {
		r := runs[k]
		same := byLen[r.n]
		for seen[r.n] < len(same) && same[seen[r.n]] <= k {
			seen[r.n]++
		}
		if seen[r.n] == len(same) {
			continue // no closer: literal backticks
		}
		c := same[seen[r.n]]
		blank(r.at, runs[c].at+r.n)
		k = c
	}
	return string(b)
}

func backticks(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

// instructionTag matches an HTML-like tag; instructionMarker the special
// tokens of chat templates (ChatML's <|im_start|>, Llama's [INST] and
// <<SYS>>). instructionTag is compiled on first use: its {0,200} makes
// it 3 ms of every process's start, which a start from a snapshot (no
// text checked) never needs.
var (
	instructionTag    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<\s*(/?)\s*([A-Za-z][A-Za-z0-9_:-]*)[^<>]{0,200}>`) })
	instructionMarker = regexp.MustCompile(`<\|[A-Za-z0-9_]+\|>|\[/?INST\]|<</?SYS>>`)
)

// strongTags are tag names that address a model whatever follows them;
// weakTags only when the text closes them too (alone, <user> or <prompt> is a
// placeholder: "Bearer <token>").
var (
	strongTags = map[string]bool{
		"important": true, "critical": true, "urgent": true, "system": true, "system-prompt": true,
		"system-message": true, "instructions": true, "instruction": true, "admin": true, "secret": true,
		"hidden": true, "override": true,
	}
	weakTags = map[string]bool{
		"user": true, "human": true, "assistant": true, "ai": true, "model": true, "prompt": true,
		"context": true, "tool": true, "note": true,
	}
)

// instructionHits finds instruction-like tags outside Markdown code.
func instructionHits(s string, _ *hostSet) []textHit {
	if !strings.ContainsAny(s, "<[") {
		return nil
	}
	m := maskCode(s)
	var hits []textHit
	closed := map[string]bool{}
	matches := instructionTag().FindAllStringSubmatchIndex(m, -1)
	for _, mt := range matches {
		if mt[3] > mt[2] { // a closing tag
			closed[tagName(m[mt[4]:mt[5]])] = true
		}
	}
	for _, mt := range matches {
		name := tagName(m[mt[4]:mt[5]])
		if strongTags[name] || weakTags[name] && closed[name] {
			written := "<" + m[mt[2]:mt[3]] + m[mt[4]:mt[5]] + ">"
			hits = append(hits, textHit{key: name, detail: written})
		}
	}
	for _, mt := range instructionMarker.FindAllStringIndex(m, -1) {
		hits = append(hits, textHit{key: m[mt[0]:mt[1]], detail: m[mt[0]:mt[1]]})
	}
	return hits
}

func tagName(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }

// A link is a URL a text points to, and whether a renderer loads it by
// itself (an image, a frame, a script…) rather than when it is followed.
type link struct {
	url   string
	loads bool
}

var (
	refDefinition = regexp.MustCompile(`(?m)^ {0,3}\[([^\]\n]+)\]:[ \t]*(?:\r?\n[ \t]*)?<?([^\s>]+)`)
	refImage      = regexp.MustCompile(`!\[([^\]\n]*)\](?:\[([^\]\n]*)\])?`)
	autolink      = regexp.MustCompile(`<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>`)
)

// loadAttrs are, per HTML element, the attributes holding a URL a renderer
// fetches by itself; followAttrs those it follows when asked.
var (
	loadAttrs = map[string][]string{
		"img": {"src", "srcset"}, "image": {"href", "xlink:href"}, "iframe": {"src"}, "frame": {"src"},
		"embed": {"src"}, "object": {"data"}, "script": {"src"}, "video": {"src", "poster"},
		"audio": {"src"}, "source": {"src", "srcset"}, "track": {"src"}, "link": {"href"},
		"input": {"src"}, "body": {"background"}, "table": {"background"}, "td": {"background"},
	}
	followAttrs = map[string][]string{"a": {"href"}, "area": {"href"}, "form": {"action"}}
)

// links finds the URLs s points to outside Markdown code: Markdown inline
// links and images, reference definitions (an image when an image uses
// them), autolinks, and HTML elements' URL attributes. A bare URL in the
// text is not one: a reader sees it.
func links(s string) []link {
	if !strings.ContainsAny(s, "](<") {
		return nil
	}
	m := maskCode(s)
	var out []link
	// Inline: [text](dest) and ![alt](dest), brackets matched with a stack.
	var open []int
	for i := 0; i < len(m); i++ {
		switch m[i] {
		case '\\':
			i++
		case '[':
			open = append(open, i)
		case ']':
			if len(open) == 0 {
				continue
			}
			o := open[len(open)-1]
			open = open[:len(open)-1]
			if i+1 < len(m) && m[i+1] == '(' {
				if dest := destination(m[i+2:]); dest != "" {
					out = append(out, link{url: markdownDest(dest), loads: o > 0 && m[o-1] == '!'})
				}
			}
		}
	}
	// Reference definitions, and the images that use them.
	if defs := refDefinition.FindAllStringSubmatch(m, -1); len(defs) > 0 {
		images := map[string]bool{}
		for _, mt := range refImage.FindAllStringSubmatchIndex(m, -1) {
			if mt[1] < len(m) && m[mt[1]] == '(' {
				continue // inline, done above
			}
			label := m[mt[2]:mt[3]]
			if mt[4] >= 0 && mt[5] > mt[4] {
				label = m[mt[4]:mt[5]]
			}
			images[refLabel(label)] = true
		}
		for _, d := range defs {
			out = append(out, link{url: markdownDest(d[2]), loads: images[refLabel(d[1])]})
		}
	}
	for _, mt := range autolink.FindAllStringSubmatch(m, -1) {
		out = append(out, link{url: mt[1]})
	}
	if strings.Contains(m, "<") {
		z := html.NewTokenizer(strings.NewReader(m))
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				break
			}
			if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
				continue
			}
			name, more := z.TagName()
			load, follow := loadAttrs[string(name)], followAttrs[string(name)]
			for more {
				var key, val []byte
				key, val, more = z.TagAttr()
				k := string(key)
				switch {
				case contains(load, k) && strings.HasSuffix(k, "srcset"):
					for _, cand := range strings.Split(string(val), ",") {
						if f := strings.Fields(cand); len(f) > 0 {
							out = append(out, link{url: f[0], loads: true})
						}
					}
				case contains(load, k):
					out = append(out, link{url: string(val), loads: true})
				case contains(follow, k):
					out = append(out, link{url: string(val)})
				}
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// maxDestination bounds how much of a link destination is read: its host is
// near its start, and a text of many "[](" must not be read once for each.
const maxDestination = 512

// destination reads a Markdown link destination at the start of s (after
// "]("): <…>, or up to a space or an unbalanced ")"; at most
// maxDestination bytes of it.
func destination(s string) string {
	if len(s) > maxDestination+8 {
		s = s[:maxDestination+8]
	}
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "\n") {
		s = strings.TrimLeft(s[1:], " \t")
	}
	if strings.HasPrefix(s, "<") {
		if e := strings.IndexAny(s, ">\n"); e > 0 && s[e] == '>' {
			return s[1:e]
		}
		return ""
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return s[:i]
			}
			depth--
		case c <= ' ':
			return s[:i]
		}
	}
	return s
}

// hostSet is the API's own hosts: a URL to one of them, or to another host
// of the same registrable domain (docs.example.com beside api.example.com),
// is the API's own.
type hostSet struct {
	exact   map[string]bool
	domains map[string]bool
}

func newHostSet(hosts []string) *hostSet {
	h := &hostSet{exact: map[string]bool{}, domains: map[string]bool{}}
	for _, host := range hosts {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if host == "" {
			continue
		}
		h.exact[host] = true
		if d := registrableDomain(host); d != "" {
			h.domains[d] = true
		}
	}
	return h
}

// markdownDest is a Markdown link destination as CommonMark reads it: a
// backslash before ASCII punctuation escapes it, and entity and numeric
// character references are decoded ("&#104;ttps://evil.example" is an
// https URL, "api.example.com\\.evil.example" the host
// api.example.com.evil.example).
func markdownDest(d string) string {
	if strings.IndexByte(d, '\\') >= 0 {
		var b strings.Builder
		for i := 0; i < len(d); i++ {
			if d[i] == '\\' && i+1 < len(d) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", d[i+1]) >= 0 {
				i++
			}
			b.WriteByte(d[i])
		}
		d = b.String()
	}
	if strings.IndexByte(d, '&') >= 0 {
		d = html.UnescapeString(d)
	}
	return d
}

// refLabel matches reference labels as CommonMark does: case-folded, with
// runs of whitespace as one space, trimmed.
func refLabel(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// registrableDomain is host's eTLD+1 ("example.co.uk"), "" for an IP
// address, a single label (localhost) or a public suffix.
func registrableDomain(host string) string {
	if net.ParseIP(host) != nil || !strings.Contains(host, ".") {
		return ""
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return ""
	}
	return d
}

// foreign returns the host u points to when it is not one of the API's own;
// "" when it is, or u names no host (a relative link, mailto:, data:).
func (h *hostSet) foreign(u string) string {
	host := urlHost(u)
	if host == "" || h.exact[host] {
		return ""
	}
	if d := registrableDomain(host); d != "" && h.domains[d] {
		return ""
	}
	return host
}

// urlHost reads the host of a URL as browsers do (the WHATWG URL
// standard), "" when it names none (a relative URL, mailto:, data:): tabs
// and line breaks are dropped; after a special scheme (http, https, ws,
// wss, ftp, file) any run of "/" and "\" leads to the authority, which runs
// to the first "/", "\", "?" or "#"; the host is what follows its last "@",
// less a port, percent-decoded and lower-cased. Go's url.Parse reads
// "https://api.example.com\@evil.example/" or "https:evil.example"
// otherwise than a browser, which is how a URL passes a check and goes
// elsewhere.
func urlHost(u string) string {
	u = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, strings.TrimSpace(u))
	special := true // a relative URL resolves against the API's http(s) base
	rest := u
	if c := strings.IndexByte(u, ':'); c > 0 && isScheme(u[:c]) {
		switch strings.ToLower(u[:c]) {
		case "http", "https", "ws", "wss", "ftp", "file":
			rest = strings.TrimLeft(u[c+1:], "/\\")
		default:
			special = false
			if rest = u[c+1:]; !strings.HasPrefix(rest, "//") {
				return "" // mailto:, data:, javascript:
			}
			rest = rest[2:]
		}
	} else {
		// No scheme: only "//host" (or "\\host") names a host.
		if !strings.HasPrefix(u, "//") && !strings.HasPrefix(u, "\\\\") && !strings.HasPrefix(u, "/\\") && !strings.HasPrefix(u, "\\/") {
			return ""
		}
		rest = strings.TrimLeft(u, "/\\")
	}
	ends := "/?#"
	if special {
		ends += "\\"
	}
	if e := strings.IndexAny(rest, ends); e >= 0 {
		rest = rest[:e]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if e := strings.IndexByte(rest, ']'); e > 0 {
			return strings.ToLower(rest[1:e])
		}
	}
	if c := strings.LastIndexByte(rest, ':'); c >= 0 {
		rest = rest[:c]
	}
	if dec, err := url.PathUnescape(rest); err == nil {
		rest = dec
	}
	return strings.ToLower(strings.TrimSuffix(rest, "."))
}

func isScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// linkHits finds the URLs to other hosts than the API's that a renderer
// loads by itself (loads) or that a reader follows (!loads).
func linkHits(loads bool) func(s string, own *hostSet) []textHit {
	return func(s string, own *hostSet) []textHit {
		var hits []textHit
		for _, l := range links(s) {
			if l.loads != loads {
				continue
			}
			// One hit per host: the HTML conversion may write a URL
			// otherwise ({ as %7B), and the host is what the finding is
			// about; the first URL shows what it carries.
			if host := own.foreign(l.url); host != "" {
				hits = append(hits, textHit{key: host, detail: fmt.Sprintf("%s (%s)", host, strconv.Quote(truncate(l.url, 80)))})
			}
		}
		return hits
	}
}

// truncate cuts s to at most n bytes on a character boundary, marking the
// cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
