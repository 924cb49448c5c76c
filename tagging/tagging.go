// Package tagging decides which OpenAPI operations become MCP tools, and what
// each tool is called.
//
// By default an operation is exposed when its tags include "agent-exposed"
// (orchestrator-core's convention). The gate tags can be replaced, or every
// operation exposed, or the gate replaced by include rules; exclude rules then
// take operations out (see [Options] and [Rule]). An operation's
// `x-mcp-exposed: false` hides it whatever its tags and the rules say;
// `x-mcp-exposed: true` exposes it likewise. Webhooks never become tools: only
// the document's paths are read. [Explain] says, for every operation, what
// decided.
//
// The package is pure: no HTTP, no serving.
package tagging

import (
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// DefaultExposeTag is the tag that marks an operation as exposed.
const DefaultExposeTag = "agent-exposed"

// Options configures [Select]. The zero value selects operations tagged
// DefaultExposeTag.
//
// The first of these that speaks decides: the operation's x-mcp-exposed
// (true or false); an Exclude rule that matches (out); then the gate: All
// (in), else Include when it has rules (in if one matches, else out), else
// the gate tags. So exclude wins over include and All, and x-mcp-exposed over
// everything.
type Options struct {
	// ExposeTags are the gate tags: an operation carrying any of them is
	// exposed. Empty means [DefaultExposeTag]. Not read when Include has
	// rules or All is set.
	ExposeTags []string
	// All exposes every operation, whatever its tags; Exclude still applies
	// and Include is not read. It is the "show me everything" switch.
	All bool
	// Include, when it has rules, replaces the gate tags: an operation
	// matching one of them is exposed, any other is not. To keep a tag gate
	// beside other rules, write it as a rule: "tag:agent-exposed".
	Include []Rule
	// Exclude takes out every operation matching one of its rules, whatever
	// the gate says. Only x-mcp-exposed wins over it.
	Exclude []Rule
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
	var out []Operation
	for _, d := range Explain(doc, opts) {
		if d.Selected {
			out = append(out, d.Operation)
		}
	}
	return out
}

// Explain returns a Decision for every operation of doc, selected or not, in
// Select's order.
func Explain(doc *openapi3.T, opts *Options) []Decision {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.ExposeTags) == 0 {
		o.ExposeTags = []string{DefaultExposeTag}
	}
	var out []Decision
	for op := range operations(doc) {
		out = append(out, decide(op, &o))
	}
	return out
}

// decide applies the order documented on [Options].
func decide(op Operation, o *Options) Decision {
	d := Decision{Operation: op}
	if v, ok := op.Operation.Extensions["x-mcp-exposed"].(bool); ok {
		d.Selected, d.Cause = v, CauseExtension
		return d
	}
	for _, r := range o.Exclude {
		if r.Match(op) {
			d.Cause, d.By = CauseExclude, r.String()
			return d
		}
	}
	switch {
	case o.All:
		d.Selected, d.Cause = true, CauseAll
	case len(o.Include) > 0:
		d.Cause = CauseNoInclude
		for _, r := range o.Include {
			if r.Match(op) {
				d.Selected, d.Cause, d.By = true, CauseInclude, r.String()
				break
			}
		}
	default:
		d.Cause = CauseNoTag
		d.By = strings.Join(o.ExposeTags, ", ")
		for _, t := range o.ExposeTags {
			if slices.Contains(op.Operation.Tags, t) {
				d.Selected, d.Cause, d.By = true, CauseTag, t
				break
			}
		}
	}
	return d
}

// Cause names what decided whether an operation is selected.
type Cause uint8

// The causes, in the order [Options] consults them.
const (
	CauseExtension Cause = iota + 1 // the operation's x-mcp-exposed
	CauseExclude                    // an exclude rule matched: out
	CauseAll                        // Options.All: in
	CauseInclude                    // an include rule matched: in
	CauseNoInclude                  // include has rules, none matched: out
	CauseTag                        // a gate tag: in
	CauseNoTag                      // no gate tag: out
)

// A Decision is one operation of a document, whether it is selected, and why.
type Decision struct {
	Operation
	Selected bool
	Cause    Cause
	// By is what decided, as the configuration writes it: the rule
	// (CauseInclude, CauseExclude), the gate tag (CauseTag), or the gate
	// tags joined by ", " (CauseNoTag). Empty for the other causes.
	By string
}

// Reason says in one line why d is or is not selected, for a person reading
// `mcpgate tools --explain`: "included by rule `GET /v1/customers*` of
// upstream stripe", "excluded: no agent-exposed tag", "excluded by
// x-mcp-exposed: false". upstream names whose rules they are; empty leaves
// it out.
func (d Decision) Reason(upstream string) string {
	of := ""
	if upstream != "" {
		of = " of upstream " + upstream
	}
	switch d.Cause {
	case CauseExtension:
		return fmt.Sprintf("%s by x-mcp-exposed: %t", inOut(d.Selected), d.Selected)
	case CauseExclude:
		return "excluded by rule `" + d.By + "`" + of
	case CauseAll:
		return "included: every operation is exposed (--all, expose_all)"
	case CauseInclude:
		return "included by rule `" + d.By + "`" + of
	case CauseNoInclude:
		return "excluded: no include rule" + of + " matches"
	case CauseTag:
		return "included by tag " + d.By
	case CauseNoTag:
		if !strings.Contains(d.By, ", ") {
			return "excluded: no " + d.By + " tag"
		}
		return "excluded: none of the tags " + d.By
	}
	return inOut(d.Selected)
}

func inOut(selected bool) string {
	if selected {
		return "included"
	}
	return "excluded"
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
