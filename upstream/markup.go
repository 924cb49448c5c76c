package upstream

import (
	"strings"
	"sync"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// DescriptionMarkdown returns an OpenAPI description as a model should read
// it. OpenAPI descriptions are CommonMark, and most are kept as they are; but
// some APIs write HTML instead (Stripe's are <p>…</p> with links, Asana's
// carry <strong style=…> and tables), which reaches a model as markup noise.
// A description that holds HTML elements of the kinds such documents use
// (paragraphs, links, lists, tables, emphasis, code, line breaks) is converted
// to CommonMark by html-to-markdown; a stray "<" or an unknown tag is not
// HTML, and leaves the text alone.
//
// Documents mix the two (Asana's open with an HTML line, then go on in
// Markdown), and HTML reads a blank line as a space: so the text is converted
// a paragraph (blank-line-separated chunk) at a time, and only the chunks
// that hold HTML.
//
// HTML comments are dropped, in Markdown as in HTML (outside Markdown code,
// where they are shown as they are): a reader of the rendered text never
// sees one, so a comment is where a document hides instructions for the
// model (issue 20; the audit's MCPG015 names them).
func DescriptionMarkdown(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if !strings.Contains(s, "<") {
		return s // the common case, and a cheap one
	}
	if strings.Contains(s, "<!--") {
		s = strings.TrimSpace(dropHTMLComments(s))
	}
	chunks := strings.Split(s, "\n\n")
	out := chunks[:0]
	for _, c := range chunks {
		if looksHTML(c) {
			if md, err := markdownConverter().ConvertString(c); err == nil {
				c = strings.TrimSpace(md)
			}
		}
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, "\n\n")
}

// markdownConverter is built once: the converter holds only its plugins and
// rules, and is safe for concurrent use.
var markdownConverter = sync.OnceValue(func() *htmltomarkdown.Converter {
	return htmltomarkdown.NewConverter(htmltomarkdown.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
	))
})

// htmlElements are the elements whose presence makes a description HTML.
var htmlElements = map[atom.Atom]bool{
	atom.P: true, atom.A: true, atom.Br: true, atom.Ul: true, atom.Ol: true, atom.Li: true,
	atom.Strong: true, atom.B: true, atom.Em: true, atom.I: true, atom.Code: true, atom.Pre: true,
	atom.Table: true, atom.Tr: true, atom.Td: true, atom.Th: true, atom.Div: true, atom.Span: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Blockquote: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
}

// looksHTML reports whether s holds at least one of htmlElements as a tag.
func looksHTML(s string) bool {
	if !strings.Contains(s, "<") {
		return false
	}
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return false
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, _ := z.TagName()
			if htmlElements[atom.Lookup(name)] {
				return true
			}
		}
	}
}

// dropHTMLComments removes the HTML comments of s outside Markdown code:
// "<!--" to the first "-->" after it ("<!-->" and "<!--->" are whole
// comments), or to the end when none follows, as HTML reads an unclosed one.
// annotations' MCPG015 flags the same comments (its htmlComments; the
// gateway's TestCommentsDroppedAreFlagged holds the two together).
func dropHTMLComments(s string) string {
	m := maskCode(s)
	var b strings.Builder
	last := 0
	for i := 0; ; {
		k := strings.Index(m[i:], "<!--")
		if k < 0 {
			break
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
		b.WriteString(s[last:start])
		last, i = end, end
	}
	b.WriteString(s[last:])
	return b.String()
}

// maskCode returns s with its Markdown code (fenced blocks and code spans,
// CommonMark's rules) blanked out, byte for byte, so that offsets in the
// result are offsets in s. It is annotations' maskCode: the audit must flag
// exactly the comments this package drops, and neither package may import
// the other.
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
	// Code spans: a run of n backticks to the next run of exactly n, found
	// along the list of runs of each length (linear in the text).
	type run struct{ at, n int }
	var runs []run
	for i := 0; i < len(b); {
		switch b[i] {
		case '\\':
			i += 2
		case '`':
			n := 0
			for i+n < len(b) && b[i+n] == '`' {
				n++
			}
			runs = append(runs, run{i, n})
			i += n
		default:
			i++
		}
	}
	byLen := map[int][]int{}
	for k, r := range runs {
		byLen[r.n] = append(byLen[r.n], k)
	}
	seen := map[int]int{}
	for k := 0; k < len(runs); k++ {
		r := runs[k]
		same := byLen[r.n]
		for seen[r.n] < len(same) && same[seen[r.n]] <= k {
			seen[r.n]++
		}
		if seen[r.n] == len(same) {
			continue
		}
		c := same[seen[r.n]]
		blank(r.at, runs[c].at+r.n)
		k = c
	}
	return string(b)
}
