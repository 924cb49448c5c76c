package catalog

import (
	"reflect"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/catalog/search"
	"github.com/mcpgate/mcpgate/tagging"
)

func TestSearchDoc(t *testing.T) {
	op := &openapi3.Operation{
		Tags: []string{"issues"},
		Parameters: openapi3.Parameters{
			{Value: &openapi3.Parameter{Name: "state", In: "query", Description: "Either open or closed."}},
		},
	}
	item := &openapi3.PathItem{Parameters: openapi3.Parameters{
		{Value: &openapi3.Parameter{Name: "owner", In: "path", Description: "The account owner."}},
	}}
	tool := &Tool{
		Tool: &mcp.Tool{
			Name:        "issues_list-for-repo",
			Title:       "Issues List For Repo",
			Description: "List repository issues\n\nNote: outputSchema left out to fit the size budget.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"state": map[string]any{"type": "string"}, // cut by the budget: the operation's is used
				"owner": map[string]any{"type": "string"},
				"page":  map[string]any{"type": "integer", "description": "Page number."},
			}},
		},
		Upstream:        "github",
		Operation:       tagging.Operation{Method: "GET", Path: "/repos/{owner}/{repo}/issues", PathItem: item, Operation: op},
		baseDescription: "List repository issues",
	}
	want := search.Doc{
		Name:        "issues_list-for-repo",
		Title:       "Issues List For Repo",
		Description: "List repository issues",
		Params: []search.Field{
			{Name: "owner", Description: "The account owner."},
			{Name: "page", Description: "Page number."},
			{Name: "state", Description: "Either open or closed."},
		},
		Tags:     []string{"issues"},
		Path:     "/repos/{owner}/{repo}/issues",
		Method:   "GET",
		Upstream: "github",
	}
	if got := tool.SearchDoc(); !reflect.DeepEqual(got, want) {
		t.Errorf("SearchDoc:\n got %+v\nwant %+v", got, want)
	}

	// A federated tool: no operation path or method, a schema of another
	// type than map[string]any, and a served description that differs
	// from the base (sanitized) is kept as served.
	fed := &Tool{
		Tool: &mcp.Tool{Name: "read_file", Description: "Reads a file.", InputSchema: struct {
			Properties map[string]any `json:"properties"`
		}{map[string]any{"path": map[string]any{"description": "Where."}}}},
		Upstream:        "fs",
		Operation:       tagging.Operation{Operation: &openapi3.Operation{OperationID: "read_file"}},
		baseDescription: "Reads a file.\u200b",
	}
	got := fed.SearchDoc()
	if got.Description != "Reads a file." || got.Path != "" || got.Method != "" ||
		!reflect.DeepEqual(got.Params, []search.Field{{Name: "path", Description: "Where."}}) {
		t.Errorf("federated SearchDoc: %+v", got)
	}
}
