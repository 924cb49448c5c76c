package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
	"github.com/mcpgate/mcpgate/tagging"
	"github.com/mcpgate/mcpgate/upstream"
)

// ResourceTag marks an operation to serve as an MCP resource
// (orchestrator-core's agent-* tag family).
const ResourceTag = "agent-resource"

// ResourceExtension is the operation extension that makes it a resource:
// true, false (never one, whatever its tags and the rules say), or an
// object {uri, name, title, mimeType, description} that also sets what
// it is served as.
const ResourceExtension = "x-mcp-resource"

// Resource is an OpenAPI GET operation served as an MCP resource: a
// Resource when its URI has no variable (resources/list), else a Template
// (resources/templates/list), read by sending Binding's request with the
// values the read's URI gives (Arguments).
type Resource struct {
	Resource *mcp.Resource         // set when the URI has no variable
	Template *mcp.ResourceTemplate // set otherwise
	Binding  *upstream.Binding
	Upstream string // the upstream's name
	// Operation is the operation read; after DropDocuments only its
	// method, path and the few fields the audit reads.
	Operation tagging.Operation
	// By says what made the operation a resource: "x-mcp-resource", "tag
	// agent-resource" or "rule GET /pets/{petId}".
	By string
	// Source is the document, as configured.
	Source string

	uri  *uriTemplate
	args map[string]string // a URI variable → the binding's argument
	// descriptionSHA hashes the title and description before sanitizing:
	// what the lockfile records.
	descriptionSHA string
}

// URI is the resource's URI, or its template's.
func (r *Resource) URI() string { return r.uri.text }

// Name is the resource's (or template's) name.
func (r *Resource) Name() string {
	if r.Resource != nil {
		return r.Resource.Name
	}
	return r.Template.Name
}

// MIMEType is what the resource is declared to be.
func (r *Resource) MIMEType() string {
	if r.Resource != nil {
		return r.Resource.MIMEType
	}
	return r.Template.MIMEType
}

func (r *Resource) title() string {
	if r.Resource != nil {
		return r.Resource.Title
	}
	return r.Template.Title
}

func (r *Resource) description() string {
	if r.Resource != nil {
		return r.Resource.Description
	}
	return r.Template.Description
}

// DescriptionSHA256 hashes the title and description as the document
// gives them (before sanitize_text): what the lockfile records.
func (r *Resource) DescriptionSHA256() string { return r.descriptionSHA }

// ErrResourceURI says a read's URI is not one the resource's template
// makes, or gives a query parameter it does not take.
var ErrResourceURI = errors.New("catalog: the URI does not match the resource")

// Arguments turns a read's URI into the binding's arguments: each
// variable's value, percent-decoded, under its argument's name, as the
// input schema types it (an integer path parameter "12" is 12; a value
// that does not parse stays a string, for the binding's validation to
// refuse by name). The values then go through the same validation and
// path builder as a tool call's: "..", or "a/b" through an encoded
// slash, is refused or escaped there, never sent as it is. An error wraps
// ErrResourceURI.
func (r *Resource) Arguments(uri string) (map[string]any, error) {
	values, err := r.uri.match(uri)
	if err != nil {
		if errors.Is(err, errNoMatch) {
			return nil, fmt.Errorf("%w %s", ErrResourceURI, r.uri.text)
		}
		return nil, fmt.Errorf("%w: %v", ErrResourceURI, err)
	}
	props, _ := r.Binding.InputSchema["properties"].(map[string]any)
	args := make(map[string]any, len(values))
	for name, v := range values {
		arg := r.args[name]
		schema, _ := props[arg].(map[string]any)
		args[arg] = typedValue(schema, v)
	}
	return args, nil
}

// typedValue reads s as schema's type says: integer, number, boolean,
// or an array of them, comma-separated (RFC 6570's and OpenAPI's simple
// and form styles, unexploded). Anything else, or a value that does not
// parse, is s.
func typedValue(schema map[string]any, s string) any {
	switch schemaType(schema) {
	case "integer":
		// As upstream.DecodeArguments decodes a tool call's numbers:
		// exact, as json.Number.
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(n, 10))
		}
	case "number":
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case "boolean":
		if b, err := strconv.ParseBool(s); err == nil {
			return b
		}
	case "array":
		items, _ := schema["items"].(map[string]any)
		var out []any
		for _, e := range strings.Split(s, ",") {
			out = append(out, typedValue(items, e))
		}
		return out
	}
	return s
}

// schemaType is schema's type, the first but "null" of a list (OpenAPI
// 3.1's nullable form).
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// resourceChoice is why an operation is a resource: by (the provenance),
// and the object form of x-mcp-resource, if given.
type resourceChoice struct {
	by       string
	explicit map[string]any
}

// chooseResource says whether op is selected as a resource, and by what:
// x-mcp-resource first (false keeps it out, whatever follows), then the
// agent-resource tag, then the upstream's resources rules. A wrong-typed
// x-mcp-resource is a problem, and ignored.
func chooseResource(op tagging.Operation, rules []tagging.Rule) (resourceChoice, bool, string) {
	if v, ok := op.Operation.Extensions[ResourceExtension]; ok {
		switch v := v.(type) {
		case bool:
			return resourceChoice{by: ResourceExtension}, v, ""
		case map[string]any:
			return resourceChoice{by: ResourceExtension, explicit: v}, true, ""
		default:
			return resourceChoice{}, false, fmt.Sprintf("%s %s: %s is %T, not a boolean or an object: ignored", op.Method, op.Path, ResourceExtension, v)
		}
	}
	if slices.Contains(op.Operation.Tags, ResourceTag) {
		return resourceChoice{by: "tag " + ResourceTag}, true, ""
	}
	for _, r := range rules {
		if r.Match(op) {
			return resourceChoice{by: "rule " + r.String()}, true, ""
		}
	}
	return resourceChoice{}, false, ""
}

// buildResources makes u's resources from every operation of doc that
// x-mcp-resource, the agent-resource tag or u's resources rules select,
// whether or not it is a tool. One that cannot be a resource (not a GET;
// a required header, cookie or body; a URI that does not parse, or is
// served already) is a finding and a warning, and its explain line says
// so.
func (c *Catalog) buildResources(u *config.Upstream, doc *upstream.Document, taken map[string]string) error {
	rules, err := u.ResourceRules()
	if err != nil {
		return fmt.Errorf("upstream %s: %v", u.Name, err)
	}
	for _, d := range tagging.Explain(doc.T, &tagging.Options{All: true}) {
		op := d.Operation
		choice, selected, problem := chooseResource(op, rules)
		if problem != "" {
			c.Warnings = append(c.Warnings, u.Name+": "+problem)
		}
		if !selected {
			continue
		}
		r, err := newResource(u, op, choice)
		if err == nil {
			if holder, ok := taken[r.URI()]; ok {
				err = fmt.Errorf("its URI %s is %s's already", r.URI(), holder)
			}
		}
		if err != nil {
			c.refuseResource(u.Name, u.OpenAPI, op, choice.by, err)
			continue
		}
		taken[r.URI()] = u.Name + " " + op.Method + " " + op.Path
		r.Source = u.OpenAPI
		if c.sanitized {
			// Hashed as the document gives them (newResource), served
			// clean, as tools' texts are.
			if r.Resource != nil {
				r.Resource.Title, r.Resource.Description = annotations.SanitizeText(r.Resource.Title), annotations.SanitizeText(r.Resource.Description)
			} else {
				r.Template.Title, r.Template.Description = annotations.SanitizeText(r.Template.Title), annotations.SanitizeText(r.Template.Description)
			}
		}
		c.Resources = append(c.Resources, r)
		c.explainResource(u.Name, op, "resource "+r.URI()+" (by "+choice.by+")")
	}
	return nil
}

// refuseResource records that op, selected as a resource by by, is not
// one, and why: a warning, an audit finding and its explain line.
func (c *Catalog) refuseResource(upstreamName, source string, op tagging.Operation, by string, err error) {
	c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s %s: not a resource (selected by %s): %v", upstreamName, op.Method, op.Path, by, err))
	line := 0
	if o := op.Operation.Origin; o != nil && o.Key != nil {
		line = o.Key.Line
	}
	c.Skipped = append(c.Skipped, annotations.ResourceRefusedFinding(source, operationPointer(op), line, op.Method, op.Path, by, err.Error()))
	c.explainResource(upstreamName, op, "not a resource (selected by "+by+"): "+err.Error())
}

// explainResource adds what became of op as a resource to its explain
// line.
func (c *Catalog) explainResource(upstreamName string, op tagging.Operation, what string) {
	for i := range c.Selection {
		if s := &c.Selection[i]; s.Upstream == upstreamName && s.Method == op.Method && s.Path == op.Path {
			s.Resource = what
			return
		}
	}
}

// newResource makes op's resource, or says why it cannot be one.
func newResource(u *config.Upstream, op tagging.Operation, choice resourceChoice) (*Resource, error) {
	if op.Method != http.MethodGet && op.Method != openapi3.MethodQuery {
		return nil, fmt.Errorf("only GET operations are resources, not %s", op.Method)
	}
	explicit := func(key string) (string, error) {
		v, ok := choice.explicit[key]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("%s.%s is not a non-empty string", ResourceExtension, key)
		}
		return s, nil
	}
	for k := range choice.explicit {
		if !slices.Contains([]string{"uri", "name", "title", "mimeType", "description"}, k) {
			return nil, fmt.Errorf("%s has an unknown key %q (want uri, name, title, mimeType, description)", ResourceExtension, k)
		}
	}
	b, err := upstream.Bind(op.Method, op.Path, op.PathItem, op.Operation, &upstream.BindOptions{NoOutputSchema: true})
	if err != nil {
		return nil, err
	}
	if has, required := b.HasBody(); has && required {
		return nil, errors.New("it requires a request body, which a resource URI cannot carry")
	}
	r := &Resource{Binding: b, Upstream: u.Name, Operation: op, By: choice.by, args: map[string]string{}}
	// The URI's variables: each path parameter in the path, every query
	// parameter in a last {?…}. A required header or cookie has no place
	// in a URI: such an operation is no resource.
	taken := map[string]bool{}
	byParam := map[string]string{} // a path parameter's name → its variable
	var query []string
	for _, p := range b.Params() {
		switch p.In {
		case openapi3.ParameterInPath:
			v := varName(p.Arg, taken)
			byParam[p.Name] = v
			r.args[v] = p.Arg
		case openapi3.ParameterInQuery:
			v := varName(p.Arg, taken)
			query = append(query, v)
			r.args[v] = p.Arg
		default:
			if p.Required {
				return nil, fmt.Errorf("it requires the %s parameter %s, which a resource URI cannot carry", p.In, p.Name)
			}
		}
	}
	text, err := explicit("uri")
	if err != nil {
		return nil, err
	}
	if text == "" {
		text = defaultResourceURI(u.Name, op.Path, byParam, query)
	}
	if r.uri, err = parseURITemplate(text); err != nil {
		return nil, fmt.Errorf("URI template %s: %v", text, err)
	}
	if err := checkURIVars(r.uri, r.args, b); err != nil {
		return nil, fmt.Errorf("URI template %s: %v", text, err)
	}
	name, err := explicit("name")
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = op.NameSource("")
	}
	title, err := explicit("title")
	if err != nil {
		return nil, err
	}
	if title == "" {
		title = op.Operation.Summary
	}
	if title == "" {
		title = annotations.Title(name)
	}
	desc, err := explicit("description")
	if err != nil {
		return nil, err
	}
	if desc == "" {
		desc = toolDescription(op.Operation.Summary, op.Operation.Description)
	}
	mt, err := explicit("mimeType")
	if err != nil {
		return nil, err
	}
	if mt == "" {
		mt = responseMediaType(op.Operation)
	} else if _, _, err := mime.ParseMediaType(mt); err != nil {
		return nil, fmt.Errorf("%s.mimeType %q: %v", ResourceExtension, mt, err)
	}
	r.descriptionSHA = textSHA256(title + "\x00" + desc)
	if len(r.uri.vars()) == 0 {
		r.Resource = &mcp.Resource{URI: text, Name: name, Title: title, Description: desc, MIMEType: mt}
	} else {
		r.Template = &mcp.ResourceTemplate{URITemplate: text, Name: name, Title: title, Description: desc, MIMEType: mt}
	}
	return r, nil
}

// defaultResourceURI is "<upstream>://<path>": the path's literal text
// escaped, each path parameter its variable, and the query parameters in a
// last {?…} ("petstore://pets/{petId}{?fields}").
func defaultResourceURI(upstreamName, path string, byParam map[string]string, query []string) string {
	var sb strings.Builder
	sb.WriteString(SchemeName(upstreamName) + "://")
	rest := strings.TrimPrefix(path, "/")
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		end := strings.IndexByte(rest, '}')
		if open < 0 || end < open {
			sb.WriteString(escapeURILiteral(rest))
			break
		}
		sb.WriteString(escapeURILiteral(rest[:open]))
		sb.WriteString("{" + byParam[rest[open+1:end]] + "}")
		rest = rest[end+1:]
	}
	if len(query) > 0 {
		sb.WriteString("{?" + strings.Join(query, ",") + "}")
	}
	return sb.String()
}

// checkURIVars checks that a URI template names every path parameter in
// its path and nothing but the operation's parameters: an explicit uri
// may leave query parameters out, not path parameters, and a variable it
// names must be one the request has a place for.
func checkURIVars(t *uriTemplate, args map[string]string, b *upstream.Binding) error {
	inPath := map[string]bool{}
	for _, p := range t.parts {
		if p.name != "" {
			inPath[p.name] = true
		}
	}
	params := map[string]string{} // argument → in
	for _, p := range b.Params() {
		params[p.Arg] = p.In
	}
	for v, arg := range args {
		if params[arg] == openapi3.ParameterInPath && !inPath[v] {
			return fmt.Errorf("has no {%s} for path parameter %s", v, arg)
		}
	}
	for _, v := range t.vars() {
		arg, ok := args[v]
		if !ok {
			return fmt.Errorf("names {%s}, which is no path or query parameter of the operation", v)
		}
		if inPath[v] != (params[arg] == openapi3.ParameterInPath) {
			return fmt.Errorf("has %s in the wrong place: path parameters in the path, query parameters in {?…}", v)
		}
	}
	return nil
}

// responseMediaType is what the operation's success answer is declared
// as: JSON when it offers it, else its first media type by name; "" when
// it declares none.
func responseMediaType(op *openapi3.Operation) string {
	if op.Responses == nil {
		return ""
	}
	for _, code := range []string{"200", "203", "206", "2XX", "default"} {
		resp := op.Responses.Value(code)
		if resp == nil || resp.Value == nil || len(resp.Value.Content) == 0 {
			continue
		}
		keys := make([]string, 0, len(resp.Value.Content))
		for k := range resp.Value.Content {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if mt, _, err := mime.ParseMediaType(k); err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
				return mt
			}
		}
		if mt, _, err := mime.ParseMediaType(keys[0]); err == nil && !strings.Contains(mt, "*") {
			return mt
		}
		return ""
	}
	return ""
}

// ResourceFacts are the resources served (OpenAPI operations, then
// playbooks' http resources) as the audit lists them: what
// the lockfile records, and what selected each.
func (c *Catalog) ResourceFacts() []annotations.ResourceFacts {
	out := make([]annotations.ResourceFacts, 0, len(c.Resources))
	for _, r := range c.Resources {
		l := annotations.LockedResource{Name: r.Name(), MIMEType: r.MIMEType(), DescriptionSHA256: r.descriptionSHA,
			Upstream: r.Upstream, Method: r.Operation.Method, Path: r.Operation.Path}
		if r.Template != nil {
			l.URITemplate = r.URI()
		} else {
			l.URI = r.URI()
		}
		out = append(out, annotations.ResourceFacts{LockedResource: l, SelectedBy: r.By})
	}
	for _, r := range c.PlaybookResources {
		out = append(out, annotations.ResourceFacts{LockedResource: r.locked(), SelectedBy: r.by()})
	}
	return out
}

// LockedResources are the resources served, as the lockfile records
// them.
func (c *Catalog) LockedResources() []annotations.LockedResource {
	facts := c.ResourceFacts()
	out := make([]annotations.LockedResource, len(facts))
	for i, f := range facts {
		out[i] = f.LockedResource
	}
	return out
}
