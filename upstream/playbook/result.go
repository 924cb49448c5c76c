package playbook

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result _meta keys, after NoETL's MCP endpoint.
const (
	MetaExecutionID = "noetl_execution_id"
	MetaPath        = "noetl_path"
)

// textKeys are the status fields whose text is the result, first found
// first: at the status's top level, then in its "result" object.
var textKeys = []string{"text", "summary", "message", "output"}

func (r *Runner) successResult(id, path string, st map[string]any) *mcp.CallToolResult {
	text, ok := firstText(st)
	if !ok {
		v := any(st)
		if res, has := st["result"]; has && res != nil {
			v = res
		}
		raw, _ := json.Marshal(v)
		text = string(raw)
	}
	res := &mcp.CallToolResult{Meta: mcp.Meta{MetaExecutionID: id, MetaPath: path}}
	if raw, err := json.Marshal(st); err == nil && len(raw) <= r.opts.MaxStructured {
		res.StructuredContent = json.RawMessage(raw)
	}
	if len(text) > r.opts.MaxResultText {
		note := "the result is cut here"
		if res.StructuredContent != nil {
			note += "; the whole status is in structuredContent"
		}
		text = shorten(text, r.opts.MaxResultText) + fmt.Sprintf("\n\n[%s (%d bytes)]", note, len(text))
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	return res
}

func firstText(st map[string]any) (string, bool) {
	for _, m := range []any{st, st["result"]} {
		obj, ok := m.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range textKeys {
			if s, ok := obj[k].(string); ok && s != "" {
				return s, true
			}
		}
	}
	return "", false
}

func failureText(path, id string, st map[string]any) string {
	why := ""
	for _, k := range []string{"error", "message", "text", "summary", "output"} {
		if s, ok := st[k].(string); ok && s != "" {
			why = ": " + shorten(s, 2000)
			break
		}
	}
	return fmt.Sprintf("playbook %s failed (execution %s)%s", path, id, why)
}

// errorResult is an isError result with the run's ids in _meta and, when it
// fits, the last status as structuredContent.
func errorResult(msg, id, path string, st map[string]any, maxStructured int) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}, Meta: mcp.Meta{MetaPath: path}}
	if id != "" {
		res.Meta[MetaExecutionID] = id
	}
	if st != nil {
		if raw, err := json.Marshal(st); err == nil && len(raw) <= maxStructured {
			res.StructuredContent = json.RawMessage(raw)
		}
	}
	return res
}

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
