package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/upstream"
)

// A tool's texts: what a client reads of it, where a document can hide
// instructions for the model (issue 20). The catalog hashes the description
// and title for the lockfile, keeps the texts for the audit when asked, and
// serves them without the characters a reader does not see
// (Config.SanitizeText).

// finishTexts runs once every tool is final: it hashes each tool's
// description and title, keeps its texts when audit is set, and then, when
// the configuration says so, sanitizes what is served.
func (c *Catalog) finishTexts(audit bool) {
	for _, t := range c.Tools {
		desc := t.baseDescription
		if desc == "" {
			desc = t.Tool.Description
		}
		t.descriptionSHA, t.titleSHA = textSHA256(desc), textSHA256(t.Tool.Title)
		if audit {
			t.texts = toolTexts(t)
		}
		if c.sanitized {
			t.sanitize()
		}
	}
}

func textSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// toolTexts lists the texts of t a client reads: name, title, description,
// the annotations' title when it differs, and the texts of both schemas.
func toolTexts(t *Tool) []annotations.Text {
	tool := t.Tool
	texts := []annotations.Text{
		{Field: "/name", Value: tool.Name},
		{Field: "/title", Value: tool.Title},
		{Field: "/description", Value: tool.Description},
	}
	if a := tool.Annotations; a != nil && a.Title != tool.Title {
		texts = append(texts, annotations.Text{Field: "/annotations/title", Value: a.Title})
	}
	add := func(pointer string, name bool, text string) {
		texts = append(texts, annotations.Text{Field: pointer, Name: name, Value: text})
	}
	if in, ok := tool.InputSchema.(map[string]any); ok {
		upstream.SchemaTexts(in, "/inputSchema", add)
	}
	if out, ok := tool.OutputSchema.(map[string]any); ok {
		upstream.SchemaTexts(out, "/outputSchema", add)
	}
	return texts
}

// sanitize removes the characters a reader does not see from every text of
// t that is served (see Config.SanitizeText), in the binding's schemas too,
// which calls and answers are checked against. What is cleaned is a copy:
// the document, and the schema DeclaredInputSHA256 hashes, keep theirs.
func (t *Tool) sanitize() {
	clean := annotations.SanitizeText
	tool := *t.Tool
	changed := false
	for _, s := range []*string{&tool.Name, &tool.Title, &tool.Description} {
		if c := clean(*s); c != *s {
			*s, changed = c, true
		}
	}
	if a := tool.Annotations; a != nil {
		if c := clean(a.Title); c != a.Title {
			ac := *a // shared with t.Derived
			ac.Title = c
			tool.Annotations, changed = &ac, true
		}
	}
	if in, ok := tool.InputSchema.(map[string]any); ok {
		if c, ok := upstream.CleanSchema(in, clean, false); ok {
			tool.InputSchema, changed = c, true
			if t.Binding != nil {
				t.Binding.InputSchema = c // before any call: the binding is not in use yet
			}
		}
	}
	if out, ok := tool.OutputSchema.(map[string]any); ok {
		if c, ok := upstream.CleanSchema(out, clean, true); ok {
			tool.OutputSchema, changed = c, true
			if t.Binding != nil {
				t.Binding.OutputSchema = c
			}
		}
	}
	if f := t.Federated; f != nil && f.declared != nil {
		// Calls carry cleaned values: check them against the declared
		// schema cleaned the same way.
		if c, ok := upstream.CleanSchema(f.declared, clean, false); ok {
			f.declared, f.Arguments = c, upstream.NewArgumentSchema(c)
		}
	}
	if changed {
		t.Tool = &tool
		t.size = toolSize(&tool)
	}
}

// textSource is what the audit reads of an upstream besides its tools: the
// document's strings, to find where a tool's text comes from and its line,
// and the API's own hosts.
type textSource struct {
	strings *upstream.Strings // nil without IncludeOrigin
	hosts   []string

	convertOnce sync.Once
	// converted maps a text as a tool carries it to the document's strings
	// it was converted from (HTML to Markdown, which drops comments and
	// tags), for the strings a text rule flags.
	converted map[string][]annotations.TextSource
}

// sources finds where value, a text of a tool whose operation spans the
// lines [from, to] (0 when not known), comes from in the document: the
// string itself (a key, when the text is a name), or one the HTML conversion
// made it from.
func (s *textSource) sources(value string, name bool, from, to int) []annotations.TextSource {
	if s == nil || s.strings == nil {
		return nil
	}
	lines := s.strings.Lines(value)
	if keys := s.strings.KeyLines(value); name && len(keys) > 0 {
		lines = keys
	}
	if len(lines) > 0 {
		return []annotations.TextSource{{Raw: value, Line: pickLine(lines, from, to)}}
	}
	s.convertOnce.Do(func() {
		s.converted = map[string][]annotations.TextSource{}
		flagged := annotations.TextFlagged(s.hosts)
		s.strings.Each(func(raw string, lines []int) {
			if !flagged(raw) {
				return
			}
			if md := upstream.DescriptionMarkdown(raw); md != raw {
				s.converted[md] = append(s.converted[md], annotations.TextSource{Raw: raw, Line: lines[0]})
			}
		})
		for _, srcs := range s.converted {
			slices.SortFunc(srcs, func(a, b annotations.TextSource) int { return a.Line - b.Line })
		}
	})
	return s.converted[value]
}

// pickLine picks, of the lines a string stands on, one inside the
// operation's lines [from, to] if any (the same description may be written
// for several operations), else the first.
func pickLine(lines []int, from, to int) int {
	for _, l := range lines {
		if from > 0 && l >= from && (to == 0 || l <= to) {
			return l
		}
	}
	return lines[0]
}

// serverVariable is a {name} in a server URL.
var serverVariable = regexp.MustCompile(`\{[^{}]*\}`)

// ownHosts are the API's own hosts, which its texts may link to without a
// finding (MCPG017, MCPG018): where its calls go (base), where the
// document was fetched from, every server the document names (each
// variable at its default and at each of its enum values; a variable in the
// host left as a label, so that the host's domain counts), and the hosts of
// its documentation (externalDocs of the document, its tags and its
// operations). The audit compares registrable domains, so
// docs.example.com goes with api.example.com.
func ownHosts(doc *upstream.Document, base baseURL) []string {
	var hosts []string
	add := func(raw string, ref *url.URL) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if ref != nil {
			u = ref.ResolveReference(u)
		}
		if h := u.Hostname(); h != "" && !slices.Contains(hosts, strings.ToLower(h)) {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	add(base.url, nil)
	if doc == nil {
		return hosts
	}
	if doc.URL != nil {
		add(doc.URL.String(), nil)
	}
	for _, s := range doc.T.Servers {
		if s == nil {
			continue
		}
		urls := []string{s.URL}
		for name, v := range s.Variables {
			if v == nil {
				continue
			}
			var next []string
			for _, u := range urls {
				for _, val := range append([]string{v.Default}, v.Enum...) {
					if len(next) < 64 {
						next = append(next, strings.ReplaceAll(u, "{"+name+"}", val))
					}
				}
			}
			urls = next
		}
		for _, u := range urls {
			add(serverVariable.ReplaceAllString(u, "x"), doc.URL)
		}
	}
	if d := doc.T.ExternalDocs; d != nil {
		add(d.URL, doc.URL)
	}
	for _, tag := range doc.T.Tags {
		if tag != nil && tag.ExternalDocs != nil {
			add(tag.ExternalDocs.URL, doc.URL)
		}
	}
	for _, item := range doc.T.Paths.Map() {
		if item == nil {
			continue
		}
		for _, op := range item.Operations() {
			if op.ExternalDocs != nil {
				add(op.ExternalDocs.URL, doc.URL)
			}
		}
	}
	return hosts
}
