// Package chartcheck holds the tests that validate mcpgate's deployment
// files without a cluster or a Docker engine: the Helm chart in
// deploy/helm/mcpgate, rendered with Helm's own Go packages and every object
// decoded strictly into its Kubernetes API type (a misspelled field fails);
// helm lint; the plain manifests in deploy/manifests, kept equal to the
// chart's default render; and the Dockerfile, parsed with BuildKit's parser.
//
// It is a module of its own so that the gateway's module does not require
// Helm, the Kubernetes API types or BuildKit. Run it with
//
//	(cd deploy/chartcheck && go test ./...)
//
// and rewrite deploy/manifests after a chart change with
//
//	(cd deploy/chartcheck && go test -run TestManifests -update)
package chartcheck
