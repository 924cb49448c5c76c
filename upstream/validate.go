package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Compile compiles the input schema for Validate, once; later calls return
// the first outcome. Bind leaves it to the caller, because a catalog binds a
// tool again when it must shrink, and only the final binding is worth
// compiling. Validate compiles on first use if Compile was not called.
func (b *Binding) Compile() error {
	b.compileOnce.Do(func() {
		if b.compileErr = b.DecodeSchemas(); b.compileErr == nil {
			b.validator, b.compileErr = compileTool(b.InputSchema, "input")
		}
	})
	return b.compileErr
}

// CheckSchema reports whether the input schema compiles, as Compile would,
// without keeping the validator (or compiling it for Validate).
func (b *Binding) CheckSchema() error {
	if err := b.DecodeSchemas(); err != nil {
		return err
	}
	_, err := compileTool(b.InputSchema, "input")
	return err
}

// compileTool compiles one of a tool's schemas (what is "input" or
// "output"), as its JSON.
func compileTool(schema jsonSchema, what string) (*jsonschema.Schema, error) {
	raw, err := json.Marshal(schema)
	if err == nil {
		var s *jsonschema.Schema
		if s, err = compileSchema(raw); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s schema does not compile: %v", what, err)
}

// compileSchema compiles a JSON Schema 2020-12 document. Nothing outside the
// document is ever loaded.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file or network loads
	const loc = "mcpgate:///tool.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// ArgumentError reports tool arguments that do not fit the tool's input schema.
// Its message names each field and says what the schema allows there, and
// what was sent, so that a model can correct the call (see schemaProblems).
type ArgumentError struct {
	Problems []string
}

func (e *ArgumentError) Error() string {
	return "invalid arguments: " + strings.Join(e.Problems, "; ")
}

var printer = message.NewPrinter(language.English)

// Validate checks decoded arguments against the input schema.
func (b *Binding) Validate(args map[string]any) error {
	err := b.Compile() // first: it decodes a restored binding's schemas
	return validateArguments(err, b.validator, b.InputSchema, args)
}

// validateArguments checks args against schema, compiled to v (or not: err).
func validateArguments(err error, v *jsonschema.Schema, schema jsonSchema, args map[string]any) error {
	if args == nil {
		args = map[string]any{}
	}
	if err != nil {
		// Not the caller's fault, and nothing was sent.
		return fmt.Errorf("the gateway cannot check this tool's arguments, so the call was not sent: %v", err)
	}
	if err = v.Validate(any(args)); err == nil {
		return nil
	}
	return &ArgumentError{Problems: schemaProblems(err, schema, args, "(arguments)", 10)}
}

// An ArgumentSchema checks a tool's arguments against an input schema that
// no Binding made: a federated MCP server's tool's, as the server declares
// it, so that what the gateway forwards was checked as a REST call's
// arguments are, with the same wording. It compiles once, on first use;
// it is safe for concurrent use.
type ArgumentSchema struct {
	schema    jsonSchema
	once      sync.Once
	validator *jsonschema.Schema
	err       error
}

// NewArgumentSchema returns the checker of schema, which it does not copy:
// the caller must not change it after.
func NewArgumentSchema(schema map[string]any) *ArgumentSchema {
	return &ArgumentSchema{schema: schema}
}

// Compile compiles the schema, once; an error says it does not compile.
func (a *ArgumentSchema) Compile() error {
	a.once.Do(func() { a.validator, a.err = compileTool(a.schema, "input") })
	return a.err
}

// Validate checks decoded arguments against the schema.
func (a *ArgumentSchema) Validate(args map[string]any) error {
	return validateArguments(a.Compile(), a.validator, a.schema, args)
}

// DecodeArguments decodes raw tool arguments, keeping numbers exact.
func DecodeArguments(raw json.RawMessage) (map[string]any, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, &ArgumentError{Problems: []string{"arguments are not valid JSON: " + err.Error()}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ArgumentError{Problems: []string{"arguments must be a JSON object"}}
	}
	return m, nil
}
