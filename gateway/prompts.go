package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/catalog"
)

// configPrompt serves a prompt of the configuration: prompts/get renders
// its template into one user message; an argument missing, unknown or
// outside its enum is -32602 naming it.
func configPrompt(p *catalog.Prompt) mcp.PromptHandler {
	return func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		text, err := p.Render(req.Params.Arguments)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		return &mcp.GetPromptResult{
			Description: p.Prompt.Description,
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
		}, nil
	}
}

// completion is the server's completion/complete: a configured prompt's
// enum arguments from their values, everything else from the MCP
// upstream that serves it (federatedCompletion). Nil — no completions
// capability — when neither has anything to complete.
func (g *Gateway) completion() func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	prompts := map[string]*catalog.Prompt{}
	for _, p := range g.catalog.Prompts {
		if p.Completes() && !g.heldPrompts[p.Prompt.Name] { // a withheld prompt is not served in any way
			prompts[p.Prompt.Name] = p
		}
	}
	federated := g.federatedCompletion()
	if len(prompts) == 0 {
		return federated
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		ref := req.Params.Ref
		if ref != nil && ref.Type == "ref/prompt" {
			if p, ok := prompts[ref.Name]; ok {
				values := p.Complete(req.Params.Argument.Name, req.Params.Argument.Value)
				if values == nil {
					values = []string{}
				}
				total := len(values)
				if len(values) > 100 { // the specification's most per answer
					values = values[:100]
				}
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: total, HasMore: total > len(values)}}, nil
			}
		}
		if federated == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: ref names no prompt with enum arguments"}
		}
		return federated(ctx, req)
	}
}
