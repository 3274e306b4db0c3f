package helm_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/testenv/gotools"
)

func TestHelmLint(t *testing.T) {
	helm := gotools.Helm(t)
	for _, args := range [][]string{{"lint", chart}, {"lint", chart, "--values", fullValues},
		{"lint", chart, "--values", recommendedValues}} {
		out := run(t, helm, args...)
		if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
		t.Logf("helm %s: %s", strings.Join(args, " "), lastLine(out))
	}
}

// Labels Helm adds to what the kustomize base labels: release bookkeeping.
var helmOnlyLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// TestDefaultRenderingIsTheKustomizeBase: `helm install drainwatch -n
// drainwatch` and `kubectl apply -k deploy/daemonset/base` create the same
// objects, but for the Namespace (helm --create-namespace makes it), Helm's
// release labels and the serving certificate's Secret, which the chart
// generates and the base cannot (checkGeneratedTLS).
func TestDefaultRenderingIsTheKustomizeBase(t *testing.T) {
	chartObjs := objects(t, template(t))
	baseObjs := objects(t, kustomize(t, "../daemonset/base"))
	delete(baseObjs, "Namespace/drainwatch")
	checkGeneratedTLS(t, chartObjs["Secret/drainwatch-tls"], "drainwatch-metrics.drainwatch.svc")
	delete(chartObjs, "Secret/drainwatch-tls")
	for _, o := range chartObjs {
		labels := o.GetLabels()
		for _, l := range helmOnlyLabels {
			delete(labels, l)
		}
		o.SetLabels(labels)
	}
	if diff := cmp.Diff(baseObjs, chartObjs); diff != "" {
		t.Errorf("helm template differs from kubectl kustomize deploy/daemonset/base (-base +chart):\n%s", diff)
	}
	t.Logf("%d objects equal: %v", len(chartObjs), keys(chartObjs))
}

// TestFullValuesRendering checks every value reaches its object.
func TestFullValuesRendering(t *testing.T) {
	objs := objects(t, template(t, fullValues))
	ds := objs["DaemonSet/drainwatch"]
	pod := field(t, ds, "spec", "template", "spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	if got, want := c["image"], "registry.example.com/mirror/drainwatch@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; got != want {
		t.Errorf("image %v, want %v", got, want)
	}
	wantArgs := []any{"run", "--node-name=$(NODE_NAME)", "--listen=:9191", "--state-dir=/var/lib/dw",
		"--pin-path=/sys/fs/bpf/dw", "--unpin-on-exit", "--log-level=debug", "--no-events", "--kubelet-comm=k3s-server,k3s-agent", "--keep-completed=24h", "--series-ttl=2h", "--watch-all-nodes",
		"--namespaces=shop,web", "--exclude-namespaces=batch", "--pod-selector=tier!=canary",
		"--auth=kubernetes", "--tls-cert-file=/etc/drainwatch/tls/tls.crt", "--tls-key-file=/etc/drainwatch/tls/tls.key"}
	if diff := cmp.Diff(wantArgs, c["args"]); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if got := c["securityContext"].(map[string]any)["appArmorProfile"]; !cmp.Equal(got, map[string]any{
		"type": "Localhost", "localhostProfile": "drainwatch"}) {
		t.Errorf("appArmorProfile %v", got)
	}
	if got := c["securityContext"].(map[string]any)["capabilities"]; !cmp.Equal(got, map[string]any{
		"drop": []any{"ALL"}, "add": []any{"BPF", "PERFMON"}}) {
		t.Errorf("capabilities %v, want the values' (without SYS_RESOURCE)", got)
	}
	if pod["priorityClassName"] != "system-cluster-critical" || pod["serviceAccountName"] != "drainwatch-agent" {
		t.Errorf("priorityClassName %v serviceAccountName %v", pod["priorityClassName"], pod["serviceAccountName"])
	}
	if got := field(t, ds, "spec", "template", "metadata", "labels"); !cmp.Equal(got, map[string]any{
		"app.kubernetes.io/name": "drainwatch", "example.com/tier": "node-agent"}) {
		t.Errorf("pod labels %v", got)
	}
	checkPodMonitor(t, objs["PodMonitor/drainwatch"])
	checkPrometheusRule(t, objs["PrometheusRule/drainwatch"])
	checkDashboard(t, objs["ConfigMap/drainwatch-dashboard"])
	t.Logf("%d objects: %v", len(objs), keys(objs))
}

// checkPodMonitor: the chart's PodMonitor is the overlay's (honorLabels
// included) but for the interval, the labels and the TLS and token the full
// values set.
func checkPodMonitor(t *testing.T, pm *unstructured.Unstructured) {
	t.Helper()
	if pm == nil {
		t.Fatal("no PodMonitor")
	}
	overlay := objects(t, readFile(t, "../daemonset/overlays/prometheus-operator/podmonitor.yaml"))["PodMonitor/drainwatch"]
	want := overlay.Object["spec"].(map[string]any)
	endpoint := want["podMetricsEndpoints"].([]any)[0].(map[string]any)
	endpoint["interval"] = "30s"
	endpoint["scheme"] = "https"
	endpoint["tlsConfig"] = map[string]any{"serverName": "drainwatch.drainwatch.svc",
		"ca": map[string]any{"secret": map[string]any{"name": "drainwatch-serving", "key": "ca.crt"}}}
	endpoint["authorization"] = map[string]any{"credentials": map[string]any{"name": "drainwatch-scraper-token", "key": "token"}}
	if diff := cmp.Diff(want, pm.Object["spec"]); diff != "" {
		t.Errorf("PodMonitor spec differs from the overlay's (-overlay +chart):\n%s", diff)
	}
	if pm.GetLabels()["release"] != "kube-prometheus-stack" || overlay.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("release label: chart %v, overlay %v", pm.GetLabels(), overlay.GetLabels())
	}
}

// checkPrometheusRule: the groups are deploy/prometheus/alerts.yaml's.
func checkPrometheusRule(t *testing.T, rule *unstructured.Unstructured) {
	t.Helper()
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	var plain map[string]any
	if err := yaml.Unmarshal(readFile(t, "../prometheus/alerts.yaml"), &plain); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plain["groups"], rule.Object["spec"].(map[string]any)["groups"]); diff != "" {
		t.Errorf("PrometheusRule groups differ from deploy/prometheus/alerts.yaml (go generate ./deploy/...):\n%s", diff)
	}
	if rule.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v", rule.GetLabels())
	}
}

// checkDashboard: the ConfigMap carries deploy/grafana's dashboard for
// Grafana's sidecar.
func checkDashboard(t *testing.T, cm *unstructured.Unstructured) {
	t.Helper()
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	data := cm.Object["data"].(map[string]any)["drainwatch.json"].(string)
	var got, want any
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if err := json.Unmarshal(readFile(t, "../grafana/drainwatch.json"), &want); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(want, got) {
		t.Error("the ConfigMap's dashboard differs from deploy/grafana/drainwatch.json (go generate ./deploy/...)")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetAnnotations()["grafana_folder"] != "Kubernetes" {
		t.Errorf("dashboard labels %v annotations %v", cm.GetLabels(), cm.GetAnnotations())
	}
}

func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	if o == nil {
		t.Fatalf("no object for %v", path)
	}
	v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	if !ok || err != nil {
		t.Fatalf("%s: no %v (%v)", o.GetName(), path, err)
	}
	return v
}

func keys(objs map[string]*unstructured.Unstructured) []string {
	return slices.Sorted(maps.Keys(objs))
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestLicense: the repository carries the Apache-2.0 text the chart declares.
func TestLicense(t *testing.T) {
	text := string(readFile(t, "../../LICENSE"))
	for _, s := range []string{"Apache License", "Version 2.0, January 2004", "END OF TERMS AND CONDITIONS"} {
		if !strings.Contains(text, s) {
			t.Errorf("LICENSE lacks %q", s)
		}
	}
	if !bytes.Contains(readFile(t, "drainwatch/Chart.yaml"), []byte("artifacthub.io/license: Apache-2.0")) {
		t.Error("Chart.yaml does not declare Apache-2.0")
	}
}
