package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// strictDoc declares one object answer whose properties are the shapes real
// APIs document every day. Each row of TestStrictClientAcceptsSuccess
// answers one of them with a value real APIs send.
const strictDoc = `openapi: 3.1.0
info: {title: strict, version: "1"}
paths:
  /t:
    get:
      operationId: getT
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  created: {type: string, format: date-time}
                  link: {type: string, format: uri}
                  email: {type: string, format: email}
                  id: {type: string, format: uuid}
                  price: {type: number, multipleOf: 0.01}
                  count: {type: integer, format: int32}
                  pair:
                    type: array
                    prefixItems: [{type: string}]
                    items: {type: integer}
`

// TestStrictClientAcceptsSuccess: issue 7 requires that, for a tool with
// an outputSchema, every success carries structuredContent the official TS
// SDK client accepts. That client validates structuredContent with Ajv
// (draft-07 class, ajv-formats, validateFormats: true) and throws "Structured
// content does not match the tool's output schema" otherwise. The gateway
// checks with santhosh-tekuri/jsonschema, Draft 2020-12, formats as
// annotations only and exact decimal arithmetic, so every row below is
// answered as a success that the TS client then throws on.
//
// Each row was checked against the TS SDK's own AjvJsonSchemaValidator
// (test/e2e/node_modules, @modelcontextprotocol/sdk 1.32.2); when node and
// those modules are present the test asks it again, else it uses the Go
// emulation below (format assertion on, float64 multipleOf).
func TestStrictClientAcceptsSuccess(t *testing.T) {
	doc, err := ParseDocument(context.Background(), []byte(strictDoc))
	if err != nil {
		t.Fatal(err)
	}
	b := bindOp(t, doc.T, "getT")
	if b.OutputSchema == nil {
		t.Fatal("want an outputSchema")
	}
	tests := []struct{ name, body string }{
		{"naive date-time (FastAPI/pydantic datetime without tz)", `{"created":"2024-01-01T10:00:00"}`},
		{"relative uri", `{"link":"/v1/things/1"}`},
		{"empty email", `{"email":""}`},
		{"uuid that is not one", `{"id":"0"}`},
		{"price 1.13 with multipleOf 0.01", `{"price":1.13}`},
		{"int32 format beyond int32", `{"count":3000000000}`},
		{"prefixItems then items (2020-12 tuple)", `{"pair":["a",1,2]}`},
	}
	client := clientAjv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(answer(200, "application/json", tt.body))
			defer srv.Close()
			c, _ := NewRemote(srv.URL, nil)
			res, _ := c.Call(context.Background(), b, map[string]any{}, Credentials{})
			if res.IsError {
				t.Errorf("a success the API documents is answered as an error: %v", res.Content)
				return
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if ok, why := client(b.OutputSchema, sc); !ok {
				t.Errorf("success with structuredContent %s, which the official TS SDK client rejects (%s): it throws", sc, why)
			}
		})
	}
}

// clientAjv returns a check of structuredContent against an outputSchema as
// the TS SDK client makes it: through node and the SDK's validator when
// available, else a Go emulation of Ajv's differences that matter here.
func clientAjv(t *testing.T) func(schema map[string]any, sc []byte) (bool, string) {
	modules, _ := filepath.Abs("../test/e2e/node_modules/@modelcontextprotocol/sdk")
	if _, err := exec.LookPath("node"); err == nil {
		if _, err := os.Stat(modules); err == nil {
			return func(schema map[string]any, sc []byte) (bool, string) {
				in, _ := json.Marshal(map[string]any{"schema": schema, "data": json.RawMessage(sc)})
				cmd := exec.Command("node", "--input-type=module", "-e", `
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
let s = ''; process.stdin.on('data', d => s += d).on('end', () => {
  const { schema, data } = JSON.parse(s);
  const r = new AjvJsonSchemaValidator().getValidator(schema)(data);
  process.stdout.write(r.valid ? 'ok' : 'Ajv: ' + r.errorMessage);
});`)
				cmd.Dir = "../test/e2e"
				cmd.Stdin = bytes.NewReader(in)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("node: %v: %s", err, out)
				}
				return string(out) == "ok", string(out)
			}
		}
	}
	t.Log("node or test/e2e/node_modules missing: emulating Ajv in Go")
	return func(schema map[string]any, sc []byte) (bool, string) {
		raw, _ := json.Marshal(schema)
		d, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft7) // Ajv's default class
		c.AssertFormat()                  // ajv-formats, validateFormats: true
		c.AddResource("test:///out.json", d)
		s, err := c.Compile("test:///out.json")
		if err != nil {
			return false, err.Error()
		}
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(sc))
		if err := s.Validate(v); err != nil {
			return false, err.Error()
		}
		// Ajv's multipleOf: data/m must be an integer in float64; ajv-formats'
		// int32: within int32. Only where the advertised schema says so.
		props, _ := schema["properties"].(map[string]any)
		says := func(prop, keyword string) bool {
			p, _ := props[prop].(map[string]any)
			_, ok := p[keyword]
			return ok
		}
		if m, ok := v.(map[string]any); ok {
			if p, ok := m["price"].(json.Number); ok && says("price", "multipleOf") {
				f, _ := p.Float64()
				if q := f / 0.01; q != math.Trunc(q) {
					return false, "multipleOf 0.01 in float64"
				}
			}
			if n, ok := m["count"].(json.Number); ok && says("count", "format") {
				f, _ := n.Float64()
				if f > math.MaxInt32 || f < math.MinInt32 {
					return false, "format int32"
				}
			}
		}
		return true, ""
	}
}
