package chartcheck

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint` (Helm's linter, the same rules) with the
// default and the everything-on values. A warning fails as an error does:
// `helm lint --strict`.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range []string{"", "values-all.yaml"} {
		t.Run("values="+values, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir, readValues(t, values), release.Namespace, kv)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}
