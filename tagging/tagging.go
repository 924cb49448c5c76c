// Package tagging decides which OpenAPI operations become MCP tools, and what
// each tool is called.
//
// By default an operation is exposed when its tags include "agent-exposed"
// (orchestrator-core's convention). The gate tags can be replaced, or every
// operation exposed. An operation's `x-mcp-exposed: false` hides it whatever
// its tags; `x-mcp-exposed: true` exposes it without a gate tag. Webhooks never
// become tools: only the document's paths are read.
//
// The package is pure: no HTTP, no serving.
package tagging

import (
	"fmt"
	"iter"
	"net/http"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// DefaultExposeTag is the tag that marks an operation as exposed.
const DefaultExposeTag = "agent-exposed"

// Options configures [Select]. The zero value selects operations tagged
// DefaultExposeTag.
type Options struct {
	// ExposeTags are the gate tags: an operation carrying any of them is
	// exposed. Empty means [DefaultExposeTag].
	ExposeTags []string
	// All exposes every operation, whatever its tags.
	All bool
}

// Operation is one selected operation of a document.
type Operation struct {
	Method    string // upper case: GET, POST, ...
	Path      string // the path template as written in the document
	PathItem  *openapi3.PathItem
	Operation *openapi3.Operation
}

// Select returns the operations that become tools, ordered by path then method
// (GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE), so that the same
// document always gives the same order.
func Select(doc *openapi3.T, opts *Options) []Operation {
	var o Options
	if opts != nil {
		o = *opts
	}
	gates := o.ExposeTags
	if len(gates) == 0 {
		gates = []string{DefaultExposeTag}
	}
	var out []Operation
	for op := range operations(doc) {
		if exposed(op.Operation, gates, o.All) {
			out = append(out, op)
		}
	}
	return out
}

// operations yields every operation of doc, ordered by path then method.
func operations(doc *openapi3.T) iter.Seq[Operation] {
	return func(yield func(Operation) bool) {
		if doc == nil || doc.Paths == nil {
			return
		}
		paths := doc.Paths.Keys()
		slices.Sort(paths)
		for _, path := range paths {
			item := doc.Paths.Value(path)
			if item == nil {
				continue
			}
			for _, m := range methods {
				if op := item.GetOperation(m); op != nil {
					if !yield(Operation{Method: m, Path: path, PathItem: item, Operation: op}) {
						return
					}
				}
			}
		}
	}
}

// methods in the order kin-openapi's PathItem.Operations documents them.
var methods = []string{
	http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete,
	http.MethodOptions, http.MethodHead, http.MethodPatch, http.MethodTrace,
}

// exposed applies the gate: an explicit x-mcp-exposed wins, then --all, then
// the gate tags.
func exposed(op *openapi3.Operation, gates []string, all bool) bool {
	if v, ok := op.Extensions["x-mcp-exposed"].(bool); ok {
		return v
	}
	if all {
		return true
	}
	for _, t := range op.Tags {
		for _, g := range gates {
			if t == g {
				return true
			}
		}
	}
	return false
}

// Problems lists the mcpgate extensions of doc's operations that have the
// wrong type, and so are ignored: x-mcp-exposed must be a boolean (the string
// "false" exposes nothing by itself: it is not read at all) and x-mcp-name a
// non-empty string. Each problem names the operation.
func Problems(doc *openapi3.T) []string {
	var out []string
	for op := range operations(doc) {
		where := op.Method + " " + op.Path
		if v, ok := op.Operation.Extensions["x-mcp-exposed"]; ok {
			if _, isBool := v.(bool); !isBool {
				out = append(out, fmt.Sprintf("%s: x-mcp-exposed is %T %v, not a boolean: ignored", where, v, v))
			}
		}
		if v, ok := op.Operation.Extensions["x-mcp-name"]; ok {
			if s, isString := v.(string); !isString || s == "" {
				out = append(out, where+": x-mcp-name is not a non-empty string: ignored")
			}
		}
	}
	return out
}
