package gateway

import (
	"runtime/debug"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, DevVersion},
		{"a checkout without vcs stamping", &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, true, DevVersion},
		{"go install at a tag", &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}}, true, "v1.2.3"},
		{"a stamped checkout", &debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v0.0.0-20261126090000-abcdef123456+dirty"}}, true, "v0.0.0-20261126090000-abcdef123456+dirty"},
		{"embedded in a service", &debug.BuildInfo{Main: debug.Module{Path: "example.com/svc", Version: "v9.0.0"},
			Deps: []*debug.Module{{Path: "golang.org/x/sync", Version: "v0.1.0"}, {Path: ModulePath, Version: "v1.4.0"}}}, true, "v1.4.0"},
		{"embedded, replaced", &debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "../mcpgate"}}}}, true, "v1.4.0"},
		{"embedded, replaced by a version", &debug.BuildInfo{Main: debug.Module{Path: "example.com/svc"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v1.4.0", Replace: &debug.Module{Path: "fork.example/mcpgate", Version: "v1.4.1"}}}}, true, "v1.4.1"},
	} {
		if got := moduleVersion(tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
