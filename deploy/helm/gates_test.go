package helm_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/gotools"
)

// TestGatesOffByDefault: neither gate renders unless asked for (the default
// rendering is the kustomize base: TestDefaultRenderingIsTheKustomizeBase).
func TestGatesOffByDefault(t *testing.T) {
	for key := range objects(t, template(t, fullValues)) {
		if kind, _, _ := strings.Cut(key, "/"); kind == "ClusterAnalysisTemplate" || kind == "AnalysisTemplate" || kind == "MetricTemplate" {
			t.Errorf("%s rendered with the gates off", key)
		}
	}
}

// TestGatesRendering: with the gates on, the chart renders
// deploy/gates' AnalysisTemplate (as a ClusterAnalysisTemplate by default,
// or an AnalysisTemplate in a namespace) and MetricTemplates unchanged but
// for the Prometheus address the values give.
func TestGatesRendering(t *testing.T) {
	const values = "drainwatch/ci/gates-values.yaml"
	const addr = "http://prometheus.observability.svc:9090"
	objs := objects(t, template(t, values))
	argo := objs["ClusterAnalysisTemplate/drainwatch-lost-traffic"]
	if argo == nil || argo.GetNamespace() != "" {
		t.Fatalf("no cluster-scoped ClusterAnalysisTemplate drainwatch-lost-traffic in %v", keys(objs))
	}
	want := readYAML(t, "../gates/argo-analysistemplate.yaml")
	for _, a := range want["spec"].(map[string]any)["args"].([]any) {
		if arg := a.(map[string]any); arg["name"] == "prometheus-address" {
			arg["value"] = addr
		}
	}
	if diff := cmp.Diff(want["spec"], argo.Object["spec"]); diff != "" {
		t.Errorf("ClusterAnalysisTemplate spec differs from deploy/gates' (-file +chart):\n%s", diff)
	}
	for _, doc := range bytes.Split(readFile(t, "../gates/flagger-metrictemplates.yaml"), []byte("\n---\n")) {
		var w map[string]any
		if err := yaml.Unmarshal(doc, &w); err != nil {
			t.Fatal(err)
		}
		if w == nil {
			continue
		}
		name := w["metadata"].(map[string]any)["name"].(string)
		got := objs["MetricTemplate/"+name]
		if got == nil || got.GetNamespace() != "flagger-system" {
			t.Errorf("MetricTemplate %s not rendered in flagger-system: %v", name, got)
			continue
		}
		w["spec"].(map[string]any)["provider"].(map[string]any)["address"] = addr
		if diff := cmp.Diff(w["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("MetricTemplate %s differs from deploy/gates' (-file +chart):\n%s", name, diff)
		}
	}
	t.Logf("%d objects: %v", len(objs), keys(objs))
	namespaced := objects(t, template(t, values, "--set", "gates.argo.kind=AnalysisTemplate", "--set", "gates.argo.namespace=shop"))
	if at := namespaced["AnalysisTemplate/drainwatch-lost-traffic"]; at == nil || at.GetNamespace() != "shop" {
		t.Errorf("kind=AnalysisTemplate namespace=shop: %v", at)
	}
}

// TestGatesChartFilesAreDeployGates: the chart's copies are deploy/gates'
// files byte for byte (go generate ./deploy/... copies them).
func TestGatesChartFilesAreDeployGates(t *testing.T) {
	for _, f := range []string{"argo-analysistemplate.yaml", "flagger-metrictemplates.yaml"} {
		if !bytes.Equal(readFile(t, "../gates/"+f), readFile(t, "drainwatch/files/"+f)) {
			t.Errorf("drainwatch/files/%s differs from deploy/gates/%s: go generate ./deploy/...", f, f)
		}
	}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(readFile(t, path), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGatesServerSideDryRun: the rendered gates pass a real API server's
// --dry-run=server against the schemas of the CRDs Argo Rollouts' and
// Flagger's modules ship (make argo copies them).
func TestGatesServerSideDryRun(t *testing.T) {
	cp := cptest.Get(t)
	_, argoCRDs := gotools.ArgoRollouts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := cp.Kubectl(ctx, args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	kubectl("apply", "--server-side", "-f", filepath.Join(argoCRDs, "analysis-template-crd.yaml"),
		"-f", filepath.Join(argoCRDs, "cluster-analysis-template-crd.yaml"), "-f", gotools.FlaggerCRDs(t))
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/analysistemplates.argoproj.io",
		"crd/clusteranalysistemplates.argoproj.io", "crd/metrictemplates.flagger.app")
	ensureNamespace(ctx, t, cp.Client)
	file := filepath.Join(t.TempDir(), "gates.yaml")
	rendering := template(t, "drainwatch/ci/gates-values.yaml", "--set", "gates.flagger.namespace="+namespace, "--show-only", "templates/gates.yaml")
	if err := os.WriteFile(file, rendering, 0o644); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(kubectl("apply", "--dry-run=server", "-f", file))
	t.Logf("kubectl apply --dry-run=server:\n%s", out)
	if n := strings.Count(out, "(server dry run)"); n != 5 {
		t.Errorf("%d objects passed the dry run, want 5 (a ClusterAnalysisTemplate, 4 MetricTemplates)", n)
	}
}
