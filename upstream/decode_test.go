package upstream

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"
)

// goWords are what must never reach a user: Go types and decoder jargon.
var goWords = regexp.MustCompile(`map\[|interface \{|struct \{|\bint64\b|\bfloat64\b|\bint\b|!!|unmarshal|Go value|Go struct|openapi[23]\.|\bT\.`)

// TestDecodeErrorDocuments: documents that are not JSON or YAML, or not
// OpenAPI, or hold a value of the wrong type, are refused in words.
func TestDecodeErrorDocuments(t *testing.T) {
	doc := func(paths string) string {
		return `{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":` + paths + `}`
	}
	tests := []struct{ name, in, want string }{
		{"HTML page", "<!DOCTYPE html>\n<html><head><title>API</title></head><body><p>docs</p></body></html>\n", "not a JSON or YAML document (it looks like an HTML page)"},
		{"binary", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not a JSON or YAML document (binary data)"},
		{"empty", "", "document is empty"},
		{"YAML scalar", "hello world\n", "not an OpenAPI document: the top level is a string, not a mapping"},
		{"JSON array", `[{"openapi": "3.0.3"}]`, "not an OpenAPI document: the top level is a list, not a mapping"},
		{"JSON syntax", "{\"openapi\": \"3.0.3\",\n \"info\": {,}}", "not valid JSON: line 2: invalid character ',' looking for beginning of object key string"},
		{"YAML syntax", "openapi: 3.0.3\ninfo: [\n", "not valid YAML: line 2: did not find expected node content"},
		{"title a number", `{"openapi":"3.0.3","info":{"title":5,"version":"1"},"paths":{}}`, `"title" (in info) is a number, not a string`},
		{"paths a list", doc(`[]`), `"paths" is a list, not a mapping`},
		{"maximum a string", doc(`{"/a":{"get":{"parameters":[{"name":"x","in":"query","schema":{"type":"integer","maximum":"big"}}],"responses":{}}}}`), `"maximum" (in a schema) is a string, not a number`},
		{"parameters a string", doc(`{"/a":{"get":{"parameters":"nope"}}}`), `"parameters" (in an operation) is a string, not a list`},
		{"swagger schema a list", `{"swagger":"2.0","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"ok","schema":{"type":"array","items":[{"type":"string"}]}}}}}}}`, "invalid swagger 2.0 document: a schema is a list, not a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDocument(context.Background(), []byte(tt.in))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %q\nwant      %q", err, tt.want)
			}
			if goWords.MatchString(err.Error()) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("Go words or several lines in %q", err)
			}
		})
	}
}

// TestDecodeErrorConfig: yaml.v3's type errors, as a configuration gets
// them, name the key, the line, the value and the kind wanted.
func TestDecodeErrorConfig(t *testing.T) {
	type upstreamCfg struct {
		Name          string            `yaml:"name"`
		MaxConcurrent int               `yaml:"max_concurrent"`
		MaxBytes      int64             `yaml:"max_bytes"`
		Ratio         float64           `yaml:"ratio"`
		Timeout       time.Duration     `yaml:"timeout"`
		Tags          []string          `yaml:"tags"`
		Rename        map[string]string `yaml:"rename"`
		All           bool              `yaml:"all"`
	}
	type config struct {
		Upstreams []upstreamCfg `yaml:"upstreams"`
	}
	tests := []struct{ name, in, want string }{
		{"int", "upstreams:\n  - max_concurrent: lots\n", `line 2: upstreams[0].max_concurrent is "lots", not an integer`},
		{"int64", "upstreams:\n  - name: a\n    max_bytes: big\n", `line 3: upstreams[0].max_bytes is "big", not an integer`},
		{"float", "upstreams:\n  - ratio: half\n", `line 2: upstreams[0].ratio is "half", not a number`},
		{"duration", "upstreams:\n  - timeout: soon\n", `line 2: upstreams[0].timeout is "soon", not a duration such as "30s"`},
		{"bool", "upstreams:\n  - all: sure\n", `line 2: upstreams[0].all is "sure", not true or false`},
		{"list", "upstreams:\n  - tags: {a: b}\n", "line 2: upstreams[0].tags is a mapping, not a list"},
		{"mapping", "upstreams:\n  - rename: [a]\n", "line 2: upstreams[0].rename is a list, not a mapping"},
		{"top", "upstreams: 5\n", `line 1: upstreams is "5", not a list`},
		{"unknown key", "upstreams:\n  - nmae: a\n", `line 2: unknown key "nmae"`},
		{"two at once", "upstreams:\n  - max_concurrent: lots\n    timeout: soon\n", `line 2: upstreams[0].max_concurrent is "lots", not an integer; line 3: upstreams[0].timeout is "soon", not a duration such as "30s"`},
		{"syntax", "upstreams:\n  - name: [\n", "line 2: did not find expected node content"},
		// A tag ending in an escaped space, on the whole document or a
		// value (FuzzDecodeError's "!%20").
		{"tag ending in a space, top", "!%20", `line 1: the value is a value tagged "!", not a mapping`},
		{"tag ending in a space, value", "upstreams: !%20\n", `line 1: upstreams is a value tagged "!", not a list`},
		{"tag holding a space", "!%200", `line 1: the value is a value tagged "! 0", not a mapping`},
		// A quoted key holding a line break is quoted: one line (FuzzDecodeError).
		{"key with a line break", "upstreams: {\"0\\n0\": {}}", `line 1: "upstreams.0\n0" is a mapping, not a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := yaml.NewDecoder(bytes.NewReader([]byte(tt.in)))
			dec.KnownFields(true)
			var c config
			err := DecodeError([]byte(tt.in), dec.Decode(&c))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v\nwant  %s", err, tt.want)
			}
			if err != nil && goWords.MatchString(err.Error()) {
				t.Errorf("Go words in %q", err)
			}
		})
	}
}
