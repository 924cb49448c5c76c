package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/annotations"
	"github.com/mcpgate/mcpgate/gateway/config"
)

// petSnapshot writes a snapshot of resourcesDoc (base_url
// http://127.0.0.1:1, every operation a tool, GETs resources) by build,
// and returns its configuration, header line and payload.
func petSnapshot(tb testing.TB, build string) (cfg *config.Config, header, payload []byte) {
	tb.Helper()
	doc := filepath.Join(tb.TempDir(), "pets.yaml")
	if err := os.WriteFile(doc, []byte(resourcesDoc), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg = &config.Config{Upstreams: []config.Upstream{{Name: "petstore", OpenAPI: doc, ExposeAll: true,
		BaseURL: "http://127.0.0.1:1", Resources: []string{"GET *"}}}}
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := WriteSnapshot(context.Background(), cfg, &file, &SnapshotOptions{Build: build}); err != nil {
		tb.Fatal(err)
	}
	nl := bytes.IndexByte(file.Bytes(), '\n')
	return cfg, file.Bytes()[:nl], file.Bytes()[nl+1:]
}

// hostileSnapshot returns a loader of payloads under the header of a real
// snapshot of resourcesDoc (petSnapshot), its payload hash made to match:
// what is tested is the reader past the checks a corrupt file fails, as if
// whoever can write the file wrote it.
func hostileSnapshot(t *testing.T) func(payload string) (*Catalog, error) {
	t.Helper()
	cfg, header, payload := petSnapshot(t, "red")
	return func(p string) (*Catalog, error) {
		h := bytes.Replace(header, []byte(PayloadChecksum(payload)), []byte(PayloadChecksum([]byte(p))), 1)
		return LoadSnapshot(context.Background(), cfg, append(append(append([]byte(nil), h...), '\n'), p...), &SnapshotOptions{Build: "red"}, nil)
	}
}

// oneTool is a payload of one tool GET /, whose binding's JSON fields
// after the method and path are binding, and whose upstream's base URL is
// base (JSON).
func oneTool(binding, base string) string {
	return `{"toolCount":1,"bases":{"petstore":` + base + `}}` + "\n" +
		`{"wire":` + xWire(strings.Contains(binding, `"outputSchema"`)) + `,"binding":{"method":"GET","path":"/",` + binding + `},"upstream":"petstore","security":null}`
}

// xWire is the wire a snapshot holds for a tool named x with no hints
// recorded (the line's derived is absent), with or without an output
// schema: what the reader requires it to be.
func xWire(withOutput bool) string {
	tool := &mcp.Tool{Name: "x", Meta: toolMeta(annotations.Derived{}), InputSchema: json.RawMessage("{}")}
	if withOutput {
		tool.OutputSchema = json.RawMessage("{}")
	}
	w, err := bareToolJSON(tool)
	if err != nil {
		panic(err)
	}
	return string(w)
}

const okBase = `{"url":"http://127.0.0.1:1"}`

// TestSnapshotPayloadRefused: payloads that match their hash, decode, and
// are nothing WriteSnapshot writes, each found by reading what the reader
// checks against what go-sdk and a call do with it. Every one was served:
// a schema nested past go-sdk's decoder's 1000 levels, holding a number
// past float64's range (go-sdk decodes numbers into float64), or an x-mcp-header
// go-sdk's struct reading finds where the map the reader walked had none
// (a "properties" key given twice), panicked go-sdk's AddTool in the
// background, ending the process at every start from the file; a schema
// of invalid UTF-8 was served as is in tools/list; a header parameter
// Bind refuses (Authorization, X-Forwarded-For, Mcp-Session-Id, …) let a
// model set that header upstream; and a base URL other than the
// configuration's base_url sent the calls, and their credentials, there.
// The first rows are accepted, so that the table tells a refusal from a
// reader that refuses everything.
func TestSnapshotPayloadRefused(t *testing.T) {
	load := hostileSnapshot(t)
	deep := strings.Repeat("[", 1000) + strings.Repeat("]", 1000) // the schema's own { is the 1001st level
	fine := strings.Repeat("[", 998) + strings.Repeat("]", 998)
	for _, tc := range []struct {
		name, payload string
		refused       string // "" accepted
	}{
		{"plain", oneTool(`"inputSchema":{"type":"object"}`, okBase), ""},
		{"1000 levels", oneTool(`"inputSchema":{"type":"object","x":{"default":`+fine+`}}`, okBase), ""},
		{"a boolean property schema", oneTool(`"inputSchema":{"type":"object","properties":{"a":true},"description":"\u00e9"}`, okBase), ""},
		{"header parameter", oneTool(`"inputSchema":{"type":"object"},"params":[{"name":"X-Request-Tag","in":"header"}]`, okBase), ""},
		{"brackets in strings", oneTool(`"inputSchema":{"type":"object","description":"a\\\" `+deep+`\\","title":"\\"}`, okBase), ""},
		{"numbers in range", oneTool(`"inputSchema":{"type":"object","default":[1e-400,1.7976931348623157e308,-5E+3,123456789012345678901234567890,0.5]}`, okBase), ""},
		{"a number past float64", oneTool(`"inputSchema":{"type":"object","properties":{"n":{"default":1e400}}}`, okBase), "the number 1e400 is out of range"},
		{"an output number past float64", oneTool(`"inputSchema":{"type":"object"},"outputSchema":{"maximum":-2E+308}`, okBase), "output schema: the number -2E+308 is out of range"},
		{"400 digits", oneTool(`"inputSchema":{"type":"object","maximum":1`+strings.Repeat("0", 400)+`}`, okBase), "is out of range"},
		{"input schema past go-sdk's depth", oneTool(`"inputSchema":{"type":"object","x":`+deep+`}`, okBase), "nested deeper than 1000"},
		{"output schema past go-sdk's depth", oneTool(`"inputSchema":{"type":"object"},"outputSchema":{"x":`+deep+`}`, okBase), "output schema: nested deeper than 1000"},
		{"invalid UTF-8", oneTool("\"inputSchema\":{\"type\":\"object\",\"description\":\"\xff\"}", okBase), "not valid UTF-8"},
		{"x-mcp-header under a repeated properties key",
			oneTool(`"inputSchema":{"type":"object","properties":{"a":{"x-mcp-header":"A"}},"properties":{}}`, okBase), "property a: an x-mcp-header"},
		{"x-mcp-header, escaped, under a repeated properties key",
			oneTool(`"inputSchema":{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"x-mcp-h\u0065ader":null}},"properties":{}}}}`, okBase), "property a.b: an x-mcp-header"},
		{"Authorization parameter", oneTool(`"inputSchema":{"type":"object"},"params":[{"name":"Authorization","in":"header"}]`, okBase), `header parameter "Authorization"`},
		{"X_Forwarded_For parameter", oneTool(`"inputSchema":{"type":"object"},"params":[{"name":"X_Forwarded_For","in":"header"}]`, okBase), `header parameter "X_Forwarded_For"`},
		{"Mcp-Session-Id parameter", oneTool(`"inputSchema":{"type":"object"},"params":[{"arg":"s","name":"mcp-session-id","in":"header"}]`, okBase), `header parameter "mcp-session-id"`},
		{"Host parameter", oneTool(`"inputSchema":{"type":"object"},"params":[{"name":"Host","in":"header"}]`, okBase), `header parameter "Host"`},
		{"an invalid header name", oneTool(`"inputSchema":{"type":"object"},"params":[{"name":"A B","in":"header"}]`, okBase), `header parameter "A B"`},
		{"another base URL than base_url", oneTool(`"inputSchema":{"type":"object"}`, `{"url":"https://elsewhere.example"}`), `the configuration's base_url is "http://127.0.0.1:1"`},
		{"no base URL, base_url set", oneTool(`"inputSchema":{"type":"object"}`, `{"err":"no base_url"}`), "the configuration's base_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := load(tc.payload)
			if tc.refused != "" {
				if err == nil {
					t.Fatalf("served; want it refused (%s)", tc.refused)
				}
				if _, ok := err.(*SnapshotError); !ok || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("refused with %v; want a *SnapshotError saying %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("served a tool go-sdk panics on: %v", v)
				}
			}()
			server := mcp.NewServer(&mcp.Implementation{Name: "red"}, nil)
			for _, tool := range cat.Tools {
				server.AddTool(tool.Tool, nil)
			}
		})
	}
}

// TestSnapshotWireListedAsRead: tools/list serves a tool's wire as the
// snapshot holds it, so the reader takes a wire only when it is the tool it
// read, as go-sdk lists it: each row here was served before that check
// (found by a red-team review), with what the fast path listed differing
// from what go-sdk listed — a schema spliced into a nested object, a name
// given twice in two cases, unknown keys, a _meta of the file's own,
// invalid UTF-8 (not JSON text at all).
func TestSnapshotWireListedAsRead(t *testing.T) {
	load := hostileSnapshot(t)
	const bind = `"inputSchema":{"type":"object"}`
	line := func(wire string) string {
		return `{"toolCount":1,"bases":{"petstore":` + okBase + `}}` + "\n" +
			`{"wire":` + wire + `,"binding":{"method":"GET","path":"/",` + bind + `},"upstream":"petstore","security":null}`
	}
	good := xWire(false)
	if _, err := load(line(good)); err != nil {
		t.Fatalf("the wire the writer makes is refused: %v", err)
	}
	for name, wire := range map[string]string{
		"schema spliced into a nested object": strings.Replace(good, `"inputSchema":0`, `"annotations":{"inputSchema":0},"InputSchema":0`, 1),
		"a _meta of its own":                  strings.Replace(good, `"_meta":{`, `"_meta":{"evil":true,`, 1),
		"an unknown key":                      strings.Replace(good, `"name":"x"`, `"name":"x","zzz":[1]`, 1),
		"a name given twice":                  strings.Replace(good, `"name":"x"`, `"name":"shown","NAME":"x"`, 1),
		"invalid UTF-8":                       strings.Replace(good, `"name":"x"`, "\"description\":\"\xff\",\"name\":\"x\"", 1),
		"spaces":                              strings.Replace(good, `"inputSchema":0`, `"inputSchema": 0`, 1),
	} {
		if wire == good {
			t.Fatalf("%s: the row changes nothing", name)
		}
		if _, err := load(line(wire)); err == nil || !strings.Contains(err.Error(), "its JSON is not the tool's as tools/list serves it") {
			t.Errorf("%s: %v; want it refused", name, err)
		}
	}
}
