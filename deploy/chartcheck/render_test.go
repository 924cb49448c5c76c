package chartcheck

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, from this module's folder.
var chartDir = filepath.Join("..", "helm", "mcpgate")

// release is the release every render uses: the name the plain manifests
// are rendered with, so that their objects are called "mcpgate".
var release = chartutil.ReleaseOptions{Name: "mcpgate", Namespace: "default", IsInstall: true, Revision: 1}

// kubeVersion is the Kubernetes version rendered for: the oldest the chart
// supports (Chart.yaml's kubeVersion).
const kubeVersion = "v1.25.0"

// object is one rendered Kubernetes object: where it came from, and it
// decoded into its API type.
type object struct {
	source string // the template, e.g. mcpgate/templates/deployment.yaml
	kind   string
	name   string
	raw    []byte // the YAML document as rendered
	typed  any    // *appsv1.Deployment, …
}

// newTyped returns a new value of the Go type of an apiVersion and kind:
// every kind the chart may render. A kind not listed here fails the test,
// so that a new template cannot go unchecked.
func newTyped(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return new(appsv1.Deployment), true
	case "v1 ConfigMap":
		return new(corev1.ConfigMap), true
	case "v1 Secret":
		return new(corev1.Secret), true
	case "v1 Service":
		return new(corev1.Service), true
	case "v1 ServiceAccount":
		return new(corev1.ServiceAccount), true
	case "policy/v1 PodDisruptionBudget":
		return new(policyv1.PodDisruptionBudget), true
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return new(autoscalingv2.HorizontalPodAutoscaler), true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return new(monitoringv1.ServiceMonitor), true
	}
	return nil, false
}

// loadChart loads the chart from disk.
func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return c
}

// readValues reads a values file of testdata; "" is the chart's defaults.
func readValues(t testing.TB, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// renderChart renders c with the values as `helm template` would (values
// checked against values.schema.json), with the strict engine: a template
// that reads a value that does not exist fails.
func renderChart(c *chart.Chart, values map[string]any) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	if err := chartutil.ValidateAgainstSchema(c, values); err != nil {
		return nil, err // ToRenderValues checks the coalesced values; this names the user's
	}
	vals, err := chartutil.ToRenderValues(c, values, release, caps)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: true}.Render(c, vals)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits the rendered templates into objects and decodes each
// strictly into its API type: an unknown (misspelled) field, a duplicate
// field or a value of the wrong type is an error naming the template.
func decode(rendered map[string]string) ([]object, error) {
	var objs []object
	sources := make([]string, 0, len(rendered))
	for s := range rendered {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, source := range sources {
		if strings.HasSuffix(source, "NOTES.txt") || strings.HasSuffix(source, ".tpl") {
			continue
		}
		for _, doc := range docSep.Split(rendered[source], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("%s: %v", source, err)
			}
			typed, ok := newTyped(meta.APIVersion, meta.Kind)
			if !ok {
				return nil, fmt.Errorf("%s: %s %q is no kind this test knows: add its Go type to newTyped", source, meta.APIVersion, meta.Kind)
			}
			if err := strictUnmarshal([]byte(doc), typed); err != nil {
				return nil, fmt.Errorf("%s: %s %s: %v", source, meta.Kind, meta.Metadata.Name, err)
			}
			if meta.Metadata.Name == "" {
				return nil, fmt.Errorf("%s: %s has no metadata.name", source, meta.Kind)
			}
			objs = append(objs, object{source: source, kind: meta.Kind, name: meta.Metadata.Name, raw: []byte(doc), typed: typed})
		}
	}
	return objs, nil
}

// strictUnmarshal decodes a YAML document as the API server decodes a
// request with fieldValidation=Strict: field names are case-sensitive (a
// plain encoding/json decode, as sigs.k8s.io/yaml.UnmarshalStrict's, would
// take readOnlyRootFileSystem for readOnlyRootFilesystem), and an unknown or
// duplicate field is an error naming its path.
func strictUnmarshal(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc) // duplicate YAML keys
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// render renders the chart with a values file of testdata and decodes it.
func render(t testing.TB, valuesFile string) []object {
	t.Helper()
	rendered, err := renderChart(loadChart(t), readValues(t, valuesFile))
	if err != nil {
		t.Fatalf("render with %q: %v", valuesFile, err)
	}
	objs, err := decode(rendered)
	if err != nil {
		t.Fatalf("values %q: %v", valuesFile, err)
	}
	return objs
}

// objsOf returns the objects of a kind.
func objsOf[T any](objs []object, kind string) []T {
	var found []T
	for _, o := range objs {
		if o.kind == kind {
			found = append(found, o.typed.(T))
		}
	}
	return found
}

// find returns the one object of a kind.
func find[T any](t testing.TB, objs []object, kind string) T {
	t.Helper()
	found := objsOf[T](objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

func kinds(objs []object) []string {
	var k []string
	for _, o := range objs {
		k = append(k, o.kind)
	}
	sort.Strings(k)
	return k
}

// TestRender renders the defaults and the everything-on values, decodes every
// object strictly, and checks what the deployment depends on: probes, the
// drain's grace, the security context, the config and the Secret's wiring.
func TestRender(t *testing.T) {
	for _, tt := range []struct {
		values string
		kinds  []string
		redis  bool
		secret string // the Secret the pod reads
	}{
		{"", []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"}, false, "mcpgate"},
		{"values-all.yaml", []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceMonitor"}, true, "my-mcpgate-secrets"},
	} {
		t.Run("values="+tt.values, func(t *testing.T) {
			objs := render(t, tt.values)
			if got := kinds(objs); !slices.Equal(got, tt.kinds) {
				t.Fatalf("kinds %v, want %v", got, tt.kinds)
			}
			d := find[*appsv1.Deployment](t, objs, "Deployment")
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
				t.Errorf("liveness probe %+v, want GET /healthz", c.LivenessProbe)
			}
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("readiness probe %+v, want GET /readyz", c.ReadinessProbe)
			}
			// drain_delay 5 s + shutdown_timeout 30 s by default; the
			// everything-on values set 10 s + 60 s.
			drain := int64(35)
			if tt.values != "" {
				drain = 70
			}
			if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= drain {
				t.Errorf("terminationGracePeriodSeconds %v, want more than the drain (%d s)", g, drain)
			}
			psc, sc := pod.SecurityContext, c.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext %+v", psc)
			}
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container securityContext %+v", sc)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Error("no memory limit")
			}
			if !slices.Equal(c.Args[:6], []string{"serve", "--addr", "0.0.0.0:8080", "--config", "/etc/mcpgate/config.yaml", "--watch"}) {
				t.Errorf("args %q", c.Args)
			}
			// The config is mounted as a directory: a subPath mount is never
			// refreshed, and --watch would see no change.
			mounted := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/etc/mcpgate" {
					mounted = m.SubPath == "" && m.ReadOnly
				}
			}
			if !mounted {
				t.Errorf("config not mounted read-only as a directory at /etc/mcpgate: %+v", c.VolumeMounts)
			}
			env := map[string]*corev1.EnvVarSource{}
			for _, e := range c.Env {
				env[e.Name] = e.ValueFrom
			}
			for name, want := range map[string]bool{"MCPGATE_TASK_KEY": true, "MCPGATE_REDIS_URL": tt.redis} {
				src := env[name]
				if !want {
					if src != nil {
						t.Errorf("%s set without state.backend redis", name)
					}
					continue
				}
				if src == nil || src.SecretKeyRef == nil || src.SecretKeyRef.Name != tt.secret {
					t.Errorf("%s: %+v, want from Secret %s", name, src, tt.secret)
				}
			}

			cm := find[*corev1.ConfigMap](t, objs, "ConfigMap")
			var cfg map[string]any
			if err := strictUnmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
				t.Fatalf("config.yaml: %v", err)
			}
			backend := "memory"
			if tt.redis {
				backend = "redis"
			}
			state, _ := cfg["state"].(map[string]any)
			tasks, _ := cfg["tasks"].(map[string]any)
			if cfg["log_format"] != "json" || cfg["drain_delay"] == nil || cfg["shutdown_timeout"] == nil || state["backend"] != backend || tasks["key_env"] != "MCPGATE_TASK_KEY" {
				t.Errorf("config.yaml lacks a key the chart manages:\n%s", cm.Data["config.yaml"])
			}
			if strings.Contains(cm.Data["config.yaml"], "redis://") {
				t.Errorf("the Redis URL (it may hold a password) is in the ConfigMap:\n%s", cm.Data["config.yaml"])
			}

			svc := find[*corev1.Service](t, objs, "Service")
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
				t.Errorf("service ports %+v", svc.Spec.Ports)
			}
			// The objects find each other: a selector that misses the pods'
			// labels is valid YAML and a silently empty Service.
			podLabels := labels.Set(d.Spec.Template.Labels)
			selects := func(what string, sel *metav1.LabelSelector) {
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil || s.Empty() || !s.Matches(podLabels) {
					t.Errorf("%s selector %v does not select the pods (%v): %v", what, sel, podLabels, err)
				}
			}
			selects("Deployment", d.Spec.Selector)
			selects("PodDisruptionBudget", find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget").Spec.Selector)
			selects("Service", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
			for _, c := range pod.TopologySpreadConstraints {
				if tt.values == "" {
					selects("topologySpreadConstraints", c.LabelSelector)
				}
			}
			if pod.ServiceAccountName != find[*corev1.ServiceAccount](t, objs, "ServiceAccount").Name {
				t.Errorf("the pods run as %q, not the chart's ServiceAccount", pod.ServiceAccountName)
			}
			for _, v := range pod.Volumes {
				if v.ConfigMap != nil && v.ConfigMap.Name != cm.Name {
					t.Errorf("volume %s mounts ConfigMap %q, the chart's is %q", v.Name, v.ConfigMap.Name, cm.Name)
				}
			}
			if sms := objsOf[*monitoringv1.ServiceMonitor](objs, "ServiceMonitor"); len(sms) == 1 {
				if !labels.SelectorFromSet(sms[0].Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) {
					t.Errorf("ServiceMonitor selector %v misses the Service's labels %v", sms[0].Spec.Selector, svc.Labels)
				}
			}
			hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler")
			if hpa.Spec.ScaleTargetRef.Name != d.Name || d.Spec.Replicas != nil {
				t.Errorf("HPA targets %q; the Deployment sets replicas %v (the HPA owns them)", hpa.Spec.ScaleTargetRef.Name, d.Spec.Replicas)
			}
		})
	}
}

// TestValuesAll checks what only the everything-on values render: the
// ServiceMonitor, an existing Secret, documents beside the config.
func TestValuesAll(t *testing.T) {
	objs := render(t, "values-all.yaml")
	sm := find[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor")
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap")
	if _, ok := cm.Data["orders.yaml"]; !ok {
		t.Errorf("documents not in the ConfigMap: keys %v", cm.Data)
	}
	c := find[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--stateful") {
		t.Errorf("stateful: true, args %q", c.Args)
	}
}

// TestSecret: the task key the chart makes is random per install (not a key
// written in the chart that every install would share) and long enough;
// one given is used as is.
func TestSecret(t *testing.T) {
	key := func(values map[string]any) string {
		rendered, err := renderChart(loadChart(t), values)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decode(rendered)
		if err != nil {
			t.Fatal(err)
		}
		// Data, as the API server would store it: the YAML's base64
		// decoded by the Secret type.
		return string(find[*corev1.Secret](t, objs, "Secret").Data["task-key"])
	}
	a, b := key(map[string]any{}), key(map[string]any{})
	if len(a) < 32 || a == b {
		t.Errorf("generated task keys %q and %q: want two different keys of at least 32 bytes", a, b)
	}
	given := strings.Repeat("k", 40)
	if got := key(map[string]any{"secret": map[string]any{"taskKey": given}}); got != given {
		t.Errorf("task key %q, want the one given", got)
	}
}

// TestRefused: values that would deploy something broken fail the render
// with a message naming the value.
func TestRefused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values string // YAML
		want   string
	}{
		{"misspelled values key", "replicaCont: 3", "replicaCont"},
		{"misspelled nested key", "drain: {delaySeconds: 5, shutdownTimeoutSecond: 30}", "shutdownTimeoutSecond"},
		{"unknown backend", "state: {backend: etcd}", "/state/backend"},
		{"grace shorter than the drain", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 30 is not longer than the drain"},
		{"grace equal to the drain", "terminationGracePeriodSeconds: 35", "not longer than the drain"},
		{"short task key", "secret: {taskKey: short}", "secret.taskKey: 5 bytes"},
		{"redis without a URL", "state: {backend: redis}", "state.redis.url: required"},
		{"redis URL of another scheme", "state: {backend: redis, redis: {url: 'http://x'}}", "not a redis://"},
		{"a key the chart manages", "config: {log_format: text, upstreams: []}", "config.log_format: set by the chart: set logFormat instead"},
		{"the task key's variable", "config: {tasks: {key_env: X}}", "config.tasks.key_env: set by the chart"},
		{"the listen address", "config: {listen: ':9000'}", "config.listen: set by the chart"},
		{"a document called config.yaml", "documents: {config.yaml: x}", "documents: config.yaml"},
		{"min above max", "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2}", "minReplicas 5 is above maxReplicas 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			values, err := chartutil.ReadValues([]byte(tt.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderChart(loadChart(t), values)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestMisspelledFieldFails proves the strict decoding catches what a
// template gets wrong: a field renamed in one template (as a typo would)
// renders fine and `kubectl apply` would drop it with a warning at most, but
// decode refuses it.
func TestMisspelledFieldFails(t *testing.T) {
	for _, tt := range []struct{ template, field, typo string }{
		{"templates/deployment.yaml", "readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"templates/deployment.yaml", "terminationGracePeriodSeconds:", "terminationGracePeriodSecond:"},
		{"templates/service.yaml", "targetPort:", "targetport:"},
		{"templates/hpa.yaml", "averageUtilization:", "averageUtilisation:"},
		{"templates/servicemonitor.yaml", "scrapeTimeout:", "scrapeTimout:"},
	} {
		t.Run(tt.typo, func(t *testing.T) {
			c := loadChart(t)
			changed := false
			for _, f := range c.Templates {
				if f.Name == tt.template && bytes.Contains(f.Data, []byte(tt.field)) {
					f.Data = bytes.ReplaceAll(f.Data, []byte(tt.field), []byte(tt.typo))
					changed = true
				}
			}
			if !changed {
				t.Fatalf("%s has no %q to misspell", tt.template, tt.field)
			}
			rendered, err := renderChart(c, readValues(t, "values-all.yaml"))
			if err != nil {
				t.Fatalf("render: %v", err) // the typo must reach decode
			}
			_, err = decode(rendered)
			want := "." + strings.TrimSuffix(tt.typo, ":") + `"` // unknown field "spec….typo"
			if err == nil || !strings.Contains(err.Error(), "unknown field") || !strings.Contains(err.Error(), want) {
				t.Errorf("decode: %v, want unknown field …%s", err, want)
			}
		})
	}
}
