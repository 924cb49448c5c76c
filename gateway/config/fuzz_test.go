package config

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// FuzzDecodeError feeds arbitrary bytes to configuration loading
// (Parse, then Validate): YAML, JSON, or neither. It must not panic,
// and an error must be what upstream.DecodeError promises a person reading
// it: one line, not empty, in words rather than Go types. A Go type name is
// only a finding when the input did not hold it itself (an error may quote
// the value it refuses).
func FuzzDecodeError(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil {
			return
		}
		msg := err.Error()
		if strings.TrimSpace(msg) == "" {
			t.Fatalf("empty error")
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Fatalf("error spans lines: %q", msg)
		}
		for _, goType := range goTypeNames {
			if strings.Contains(msg, goType) && !bytes.Contains(data, []byte(goType)) {
				t.Fatalf("error names a Go type (%s): %q", goType, msg)
			}
		}
		for _, m := range goQualified.FindAllStringSubmatch(msg, -1) {
			if !bytes.Contains(data, []byte(m[2])) {
				t.Fatalf("error names a Go type (%s): %q", m[2], msg)
			}
		}
	})
}

// goTypeNames are what Go types and decoder internals look like in an
// error: none of them means anything to a person who wrote a config.
var goTypeNames = []string{
	"map[", "[]interface", "[]string", "interface {}", "struct {", "time.Duration", "!!", "Go struct", "Go value", "unmarshal",
}

// goQualified matches a package-qualified Go type ("*config.Config",
// "upstream.Binding"), not a config key path (upstreams[0].auth.mode,
// annotations.GetPet).
var goQualified = regexp.MustCompile(`(^|[^.\w\]])(\*?(?:gateway|config|upstream|annotations|auth|playbook|tagging|openapi3|openapi2|yaml|json|time|reflect|http|url)\.[A-Z]\w*)`)
