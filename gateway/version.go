package gateway

import "runtime/debug"

// ModulePath is mcpgate's Go module path.
const ModulePath = "github.com/mcpgate/mcpgate"

// DevVersion is the version of a build that carries no module version: a
// build from a checkout without version control information, or a test.
const DevVersion = "0.1.0-dev"

// Version is mcpgate's version, the one place every report of it reads
// from: initialize's serverInfo (both transports and the NoETL endpoint),
// the mcpgate_build_info metric and `mcpgate version`. It is the module's
// version in the build information — a release tag (go install …@v1.2.3),
// a pseudo-version for a build from a checkout (go build stamps one from
// the commit), or the version a service that embeds the gateway requires —
// else DevVersion. A packager without module information (a build with
// -buildvcs=false or no .git) sets it with
// -ldflags "-X github.com/mcpgate/mcpgate/gateway.Version=v1.2.3", which wins.
var Version string

// The linker's -X sets only a variable without an initializer: fill it in
// here when -X did not.
func init() {
	if Version == "" {
		Version = moduleVersion(debug.ReadBuildInfo())
	}
}

func moduleVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return DevVersion
	}
	for _, m := range append([]*debug.Module{&bi.Main}, bi.Deps...) {
		if m == nil || m.Path != ModulePath {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m = m.Replace
		}
		if m.Version != "" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return DevVersion
}
