package federation

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcpgate/mcpgate/upstream"
)

// decodeCallToolResult decodes a tools/call result as go-sdk v1.8.0's
// (*mcp.CallToolResult).UnmarshalJSON does, reached through
// encoding/json.Unmarshal as [hop.result] used to: the same values, and
// the same decision to accept or refuse, held to it by
// TestDecodeCallToolResultMatchesSDK and FuzzDecodeCallToolResult.
//
// It is hand-written because go-sdk's decodes through a fresh streaming
// decoder per call, which copies the bytes in hand into a new buffer of at
// least 32 KiB (docs/go-sdk-decoder.md): 7.6% of the gateway's CPU per
// forwarded call at c=1, and most of what it allocated
// (BenchmarkDecodeCallToolResult measures both). The steps are go-sdk's:
//
//   - encoding/json's validity check (json.Unmarshal checks the whole
//     value before it hands it to an UnmarshalJSON method);
//   - go-sdk's nesting bound (internal/json.checkMaxDepth, 1000 levels);
//   - segmentio's parser with fields matched case-sensitively (go-sdk's
//     decoder's only flag), into go-sdk's wire shape: the result's own
//     fields, content as raw wire blocks, resultType;
//   - each content block built as go-sdk's contentFromWire builds it:
//     text, image, audio, resource_link, resource, tool_use and
//     tool_result (its nested content limited to the first five), any
//     other type an error.
//
// Fields go-sdk drops (unknown keys, a block's fields its type does not
// have) are dropped here too.
func decodeCallToolResult(data []byte) (*mcp.CallToolResult, error) {
	if !json.Valid(data) {
		// encoding/json's own error text, as json.Unmarshal gives it.
		var v struct{}
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("invalid JSON")
	}
	if !upstream.WithinDepth(data, maxDepth) {
		return nil, fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)
	}
	type res mcp.CallToolResult // its fields, not its UnmarshalJSON
	var wire struct {
		res
		Content    []*wireContent `json:"content"`
		ResultType string         `json:"resultType"`
	}
	if _, err := sjson.Parse(data, &wire, sjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, err
	}
	content, err := contentsFromWire(wire.Content, nil)
	if err != nil {
		return nil, err
	}
	r := mcp.CallToolResult(wire.res)
	r.Content = content
	// resultType is go-sdk's unexported field, read only by NeedsInput:
	// a forwarded result is rebuilt without it (hop.result), as
	// CallTool's is.
	return &r, nil
}

// wireContent is go-sdk v1.8.0's content block as it arrives (mcp's
// unexported wireContent, content.go): the union of every type's fields.
type wireContent struct {
	Type              string                `json:"type"`
	Text              string                `json:"text,omitempty"`
	MIMEType          string                `json:"mimeType,omitempty"`
	Data              []byte                `json:"data,omitempty"`
	Resource          *mcp.ResourceContents `json:"resource,omitempty"`
	URI               string                `json:"uri,omitempty"`
	Name              string                `json:"name,omitempty"`
	Title             string                `json:"title,omitempty"`
	Description       string                `json:"description,omitempty"`
	Size              *int64                `json:"size,omitempty"`
	Meta              mcp.Meta              `json:"_meta,omitempty"`
	Annotations       *mcp.Annotations      `json:"annotations,omitempty"`
	Icons             []mcp.Icon            `json:"icons,omitempty"`
	ID                string                `json:"id,omitempty"`
	Input             map[string]any        `json:"input,omitempty"`
	ToolUseID         string                `json:"toolUseId,omitempty"`
	NestedContent     []*wireContent        `json:"content,omitempty"`
	StructuredContent any                   `json:"structuredContent,omitempty"`
	IsError           bool                  `json:"isError,omitempty"`
}

// toolResultContentAllow is what a tool_result block may nest (go-sdk's
// contentFromWire).
var toolResultContentAllow = map[string]bool{"text": true, "image": true, "audio": true, "resource_link": true, "resource": true}

// contentsFromWire is go-sdk's: never nil, so that a result without
// content re-encodes as "content":[] as go-sdk's would.
func contentsFromWire(wires []*wireContent, allow map[string]bool) ([]mcp.Content, error) {
	blocks := make([]mcp.Content, 0, len(wires))
	for _, w := range wires {
		b, err := contentFromWire(w, allow)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// contentFromWire is go-sdk's, with each type's fromWire written out.
func contentFromWire(w *wireContent, allow map[string]bool) (mcp.Content, error) {
	if w == nil {
		return nil, errors.New("nil content")
	}
	if allow != nil && !allow[w.Type] {
		return nil, fmt.Errorf("invalid content type %q", w.Type)
	}
	switch w.Type {
	case "text":
		return &mcp.TextContent{Text: w.Text, Meta: w.Meta, Annotations: w.Annotations}, nil
	case "image":
		return &mcp.ImageContent{MIMEType: w.MIMEType, Data: w.Data, Meta: w.Meta, Annotations: w.Annotations}, nil
	case "audio":
		return &mcp.AudioContent{MIMEType: w.MIMEType, Data: w.Data, Meta: w.Meta, Annotations: w.Annotations}, nil
	case "resource_link":
		return &mcp.ResourceLink{URI: w.URI, Name: w.Name, Title: w.Title, Description: w.Description, MIMEType: w.MIMEType,
			Size: w.Size, Meta: w.Meta, Annotations: w.Annotations, Icons: w.Icons}, nil
	case "resource":
		return &mcp.EmbeddedResource{Resource: w.Resource, Meta: w.Meta, Annotations: w.Annotations}, nil
	case "tool_use":
		return &mcp.ToolUseContent{ID: w.ID, Name: w.Name, Input: w.Input, Meta: w.Meta}, nil
	case "tool_result":
		v := &mcp.ToolResultContent{ToolUseID: w.ToolUseID, StructuredContent: w.StructuredContent, IsError: w.IsError, Meta: w.Meta}
		if w.NestedContent != nil {
			nested, err := contentsFromWire(w.NestedContent, toolResultContentAllow)
			if err != nil {
				return nil, fmt.Errorf("tool_result nested content: %w", err)
			}
			v.Content = nested
		}
		return v, nil
	}
	return nil, fmt.Errorf("unrecognized content type %q", w.Type)
}
