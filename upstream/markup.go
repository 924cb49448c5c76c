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
func DescriptionMarkdown(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	if !strings.Contains(s, "<") {
		return s // the common case, and a cheap one
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
