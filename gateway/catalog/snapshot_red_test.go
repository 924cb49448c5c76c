package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSnapshotResourceURIGoSDKTakes: a payload that matches its hash but
// whose resource (or template) names a URI other than the one the reader
// checked — one go-sdk's AddResource or AddResourceTemplate panics on —
// must be refused: New hands every restored resource to go-sdk, and a
// panic there ends every start from the file.
func TestSnapshotResourceURIGoSDKTakes(t *testing.T) {
	cfg, header, payload := petSnapshot(t, "red")
	for _, tc := range []struct{ name, field, uri string }{
		{"template", "template", "pets://{"},
		{"resource", "resource", "pets://%zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The catalog's line; the tools' lines follow it unchanged.
			first, tools, _ := bytes.Cut(payload, []byte{'\n'})
			var p map[string]any
			if err := json.Unmarshal(first, &p); err != nil {
				t.Fatal(err)
			}
			changed := false
			for _, r := range p["resources"].([]any) {
				r := r.(map[string]any)
				if m, ok := r[tc.field].(map[string]any); ok && !changed {
					key := "uri"
					if tc.field == "template" {
						key = "uriTemplate"
					}
					m[key], changed = tc.uri, true
				}
			}
			if !changed {
				t.Fatalf("no %s in the snapshot", tc.field)
			}
			hostile, _ := json.Marshal(p)
			hostile = append(append(hostile, '\n'), tools...)
			h := bytes.Replace(header, []byte(PayloadChecksum(payload)), []byte(PayloadChecksum(hostile)), 1)
			cat, err := LoadSnapshot(context.Background(), cfg, append(append(append([]byte(nil), h...), '\n'), hostile...), &SnapshotOptions{Build: "red"}, nil)
			if err != nil {
				return // refused: the gateway loads the documents instead
			}
			server := mcp.NewServer(&mcp.Implementation{Name: "red"}, nil)
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("restored a resource go-sdk panics on: %v", v)
				}
			}()
			for _, r := range cat.Resources {
				if r.Template != nil {
					server.AddResourceTemplate(r.Template, nil)
				} else {
					server.AddResource(r.Resource, nil)
				}
			}
		})
	}
}
