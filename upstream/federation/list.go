package federation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds on what a listing accepts from an upstream: every answer is
// treated as hostile, and a server that pages forever must not hold the
// gateway.
var (
	maxPages = 100   // per list method
	maxItems = 10000 // per list method
)

// Listing is everything an upstream offers, every page read.
type Listing struct {
	Tools           []*mcp.Tool
	Prompts         []*mcp.Prompt
	Resources       []*mcp.Resource
	Templates       []*mcp.ResourceTemplate
	ProtocolVersion string
	ServerInfo      *mcp.Implementation
	// Completions: the upstream offers completion/complete for its
	// prompts' and resource templates' arguments.
	Completions bool
	// Subscribe: the upstream offers resources/subscribe (its
	// resources.subscribe capability; see [Upstream.Subscribe]).
	Subscribe bool
}

// hostileError is an upstream answer that arrived but cannot be used: the
// session is fine, so it is neither replaced nor the request retried.
type hostileError struct{ msg string }

func (e *hostileError) Error() string { return e.msg }

func hostile(format string, args ...any) error {
	return &hostileError{fmt.Sprintf(format, args...)}
}

// List reads every page of tools/list, prompts/list, resources/list and
// resources/templates/list (those the upstream's capabilities advertise)
// on the shared, credential-less session.
func (u *Upstream) List(ctx context.Context) (*Listing, error) {
	var l *Listing
	err := u.do(ctx, "", "list", true, nil, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		l, err = list(ctx, cs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func list(ctx context.Context, cs *mcp.ClientSession) (*Listing, error) {
	init := cs.InitializeResult()
	if init == nil {
		return nil, hostile("initialize: no result")
	}
	l := &Listing{ProtocolVersion: init.ProtocolVersion, ServerInfo: init.ServerInfo}
	caps := init.Capabilities
	if caps == nil {
		return l, nil
	}
	l.Completions = caps.Completions != nil
	l.Subscribe = caps.Resources != nil && caps.Resources.Subscribe
	var err error
	if caps.Tools != nil {
		l.Tools, err = pages(ctx, "tools/list", func(ctx context.Context, cursor string) ([]*mcp.Tool, string, error) {
			r, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil || r == nil {
				return nil, "", orNoResult(err)
			}
			return r.Tools, r.NextCursor, nil
		}, func(t *mcp.Tool) bool { return t.Name != "" })
		if err != nil {
			return nil, err
		}
	}
	if caps.Prompts != nil {
		l.Prompts, err = pages(ctx, "prompts/list", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil || r == nil {
				return nil, "", orNoResult(err)
			}
			return r.Prompts, r.NextCursor, nil
		}, func(p *mcp.Prompt) bool { return p.Name != "" })
		if err != nil {
			return nil, err
		}
	}
	if caps.Resources != nil {
		l.Resources, err = pages(ctx, "resources/list", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, error) {
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil || r == nil {
				return nil, "", orNoResult(err)
			}
			return r.Resources, r.NextCursor, nil
		}, func(r *mcp.Resource) bool { return r.URI != "" })
		if err != nil {
			return nil, err
		}
		l.Templates, err = pages(ctx, "resources/templates/list", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil || r == nil {
				return nil, "", orNoResult(err)
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}, func(t *mcp.ResourceTemplate) bool { return t.URITemplate != "" })
		if err != nil {
			return nil, err
		}
	}
	return l, nil
}

func orNoResult(err error) error {
	if err != nil {
		return err
	}
	return hostile("no result")
}

// pages reads every page of a list method, within the bounds.
func pages[T any](ctx context.Context, method string, fetch func(context.Context, string) ([]*T, string, error), valid func(*T) bool) ([]*T, error) {
	var all []*T
	cursor := ""
	seen := map[string]bool{}
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, hostile("%s: more than %d pages", method, maxPages)
		}
		items, next, err := fetch(ctx, cursor)
		if err != nil {
			if _, ok := err.(*hostileError); ok {
				return nil, hostile("%s: %v", method, err)
			}
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if len(all)+len(items) > maxItems {
			return nil, hostile("%s: more than %d items", method, maxItems)
		}
		for i, it := range items {
			if it == nil || !valid(it) {
				return nil, hostile("%s: page %d, item %d: malformed (null, or no name or URI)", method, page, i)
			}
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, hostile("%s: the cursor of page %d was seen before: the upstream pages in a loop", method, page)
		}
		seen[next] = true
		cursor = next
	}
}

// digest identifies a listing's content, to tell whether it changed.
func (l *Listing) digest() string {
	b, err := json.Marshal([]any{l.Tools, l.Prompts, l.Resources, l.Templates})
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
