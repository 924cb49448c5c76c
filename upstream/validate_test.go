package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRejectedBeforeUpstream checks that arguments that break the schema, or
// would smuggle a header, never reach the upstream, and that the error names
// the field.
func TestRejectedBeforeUpstream(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	client, rec := recordingClient(t, "")
	tests := []struct {
		name, op, args, wantInMsg string
	}{
		{"missing path param", "getItem", `{}`, "id__path"},
		{"wrong type", "getItem", `{"id__path":"1","limit":"ten"}`, "limit"},
		{"out of range", "getItem", `{"id__path":"1","limit":1000}`, "limit"},
		{"CRLF in header", "getItem", `{"id__path":"1","X-Request-Tag":"a\r\nX-Evil: 1"}`, "X-Request-Tag"},
		{"control character in header", "getItem", `{"id__path":"1","X-Request-Tag":"a\u0001b"}`, "X-Request-Tag: header values must not contain control characters"},
		{"DEL in cookie", "getItem", `{"id__path":"1","session":"a\u007fb"}`, "session"},
		{"semicolon in cookie", "getItem", `{"id__path":"1","session":"a; admin=1"}`, "session"},
		{"missing body field", "putItem", `{"id":"1"}`, "name"},
		{"nested rule", "putItem", `{"id":"1","name":"x","children":[{"name":""}]}`, "children"},
		{"not base64", "postBlob", `{"body":"%%%"}`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.count()
			res, _ := client.Call(context.Background(), bindOp(t, doc, tt.op), args(t, tt.args), Credentials{})
			if !res.IsError {
				t.Fatal("want IsError")
			}
			msg := res.Content[0].(*mcp.TextContent).Text
			t.Log(msg)
			if !strings.Contains(msg, tt.wantInMsg) {
				t.Errorf("message %q does not name %q", msg, tt.wantInMsg)
			}
			if rec.count() != before {
				t.Errorf("a request reached the upstream")
			}
		})
	}
}

func TestDecodeArguments(t *testing.T) {
	for _, in := range []string{`[1]`, `"x"`, `{`, `{"a":1}x`} {
		if _, err := DecodeArguments(json.RawMessage(in)); err == nil {
			t.Errorf("DecodeArguments(%s): want error", in)
		}
	}
	for _, in := range []string{``, `null`, ` {} `} {
		m, err := DecodeArguments(json.RawMessage(in))
		if err != nil || m == nil {
			t.Errorf("DecodeArguments(%q) = %v, %v", in, m, err)
		}
	}
}

// TestSchemaThatDoesNotCompile checks the mechanism for an input schema the
// validator cannot compile (here a lookahead, which RE2 lacks): CheckSchema
// says so without keeping a validator, and a call is refused, in words that
// do not blame the arguments, before anything is sent.
func TestSchemaThatDoesNotCompile(t *testing.T) {
	doc := loadTestDoc(t, "encodings.yaml")
	client, rec := recordingClient(t, "")
	b := bindOp(t, doc, "getItem")
	if err := b.CheckSchema(); err != nil {
		t.Fatalf("CheckSchema of a bound tool: %v", err)
	}
	b.InputSchema = map[string]any{"type": "object", "properties": map[string]any{"id__path": map[string]any{"type": "string", "pattern": "^(?!admin)"}}}
	if err := b.CheckSchema(); err == nil || !strings.Contains(err.Error(), "input schema does not compile") {
		t.Fatalf("CheckSchema = %v, want the compile error", err)
	}
	if b.validator != nil {
		t.Fatal("CheckSchema kept a validator")
	}
	res, rep := client.Call(context.Background(), b, args(t, `{"id__path":"1"}`), Credentials{})
	if !res.IsError || rec.count() != 0 {
		t.Fatalf("IsError %v, %d requests sent; want a refusal and none", res.IsError, rec.count())
	}
	msg := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(msg, "cannot check this tool's arguments, so the call was not sent") || strings.Contains(msg, "invalid arguments") {
		t.Errorf("message %q", msg)
	}
	if rep.Outcome != OutcomeInvalidArguments {
		t.Errorf("outcome %q", rep.Outcome)
	}
}
