package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The Argo Rollouts objects of TestArgoGate: the Rollout, its template
// change, and reading the Rollout's and the AnalysisRun's status.

// rolloutObject is the Rollout: a canary that sets the weight to 50 (one
// of the two stable pods goes), pauses 3 s, then runs the gate with the
// arguments docs/gates.md shows, and short measurements (5 every 2 s).
func rolloutObject(t *testing.T, ns, promURL string, lifecycle *corev1.Lifecycle) *unstructured.Unstructured {
	t.Helper()
	tmpl := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 2).Spec.Template
	tmpl.Spec.Containers[0].Lifecycle = lifecycle
	tmplJSON, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var template map[string]any
	if err := json.Unmarshal(tmplJSON, &template); err != nil {
		t.Fatal(err)
	}
	arg := func(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
	from := func(name string, valueFrom map[string]any) map[string]any {
		return map[string]any{"name": name, "valueFrom": valueFrom}
	}
	steps := []any{
		map[string]any{"setWeight": int64(50)},
		map[string]any{"pause": map[string]any{"duration": "3s"}},
		map[string]any{"analysis": map[string]any{
			"templates": []any{map[string]any{"templateName": "drainwatch-lost-traffic"}},
			"args": []any{
				from("namespace", map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.namespace"}}),
				from("rollout", map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}),
				from("stable-hash", map[string]any{"podTemplateHashValue": "Stable"}),
				from("canary-hash", map[string]any{"podTemplateHashValue": "Latest"}),
				arg("prometheus-address", promURL), arg("interval", "2s"), arg("count", "5"), arg("window", "5m"),
			},
		}},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": template,
			"strategy": map[string]any{"canary": map[string]any{"steps": steps}},
		},
	}}
}

// changeTemplate starts a canary: a new annotation in the pod template.
func (g *argoGate) changeTemplate(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"drainwatch.dev/canary":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := g.dyn.Resource(rolloutsGVR).Namespace(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("changing the Rollout's template: %v", err)
	}
}

// waitRollout polls the Rollout until done accepts it.
func (g *argoGate) waitRollout(ctx context.Context, t *testing.T, ns, what string, done func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	for ctx.Err() == nil {
		ro, err := g.dyn.Resource(rolloutsGVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			last = ro
			if done(ro) {
				return ro
			}
			if strings.HasPrefix(str(ro, "status", "message"), "InvalidSpec") {
				t.Fatalf("Rollout %s/web: %s", ns, str(ro, "status", "message"))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	status := map[string]any{}
	if last != nil {
		status, _, _ = unstructured.NestedMap(last.Object, "status")
	}
	t.Fatalf("Rollout %s/web never %s: status %v", ns, what, status)
	return nil
}

// analysisRun is the Rollout's one AnalysisRun, once it has finished.
func (g *argoGate) analysisRun(ctx context.Context, t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	for ctx.Err() == nil {
		runs, err := g.dyn.Resource(analysisRunsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(runs.Items) == 1 {
			switch str(&runs.Items[0], "status", "phase") {
			case "Successful", "Failed", "Error", "Inconclusive":
				return &runs.Items[0]
			}
		}
		if err == nil && len(runs.Items) > 1 {
			t.Fatalf("%d AnalysisRuns, want 1", len(runs.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no finished AnalysisRun in %s", ns)
	return nil
}

// logRun logs the AnalysisRun's phase, message and every measurement.
func (g *argoGate) logRun(t *testing.T, run *unstructured.Unstructured) {
	t.Helper()
	t.Logf("AnalysisRun %s: phase %q, message %q", run.GetName(), str(run, "status", "phase"), str(run, "status", "message"))
	results, _, _ := unstructured.NestedSlice(run.Object, "status", "metricResults")
	for _, r := range results {
		m := r.(map[string]any)
		var values []string
		ms, _ := m["measurements"].([]any)
		for _, x := range ms {
			mm := x.(map[string]any)
			values = append(values, fmt.Sprintf("%v=%v", mm["phase"], mm["value"]))
		}
		t.Logf("  metric %v: phase %v, %v measurements %v, message %v", m["name"], m["phase"], m["count"], values, m["message"])
	}
}

// failedMeasurement is the value of metric's failed measurement ("" when
// none failed).
func failedMeasurement(run *unstructured.Unstructured, metric string) string {
	results, _, _ := unstructured.NestedSlice(run.Object, "status", "metricResults")
	for _, r := range results {
		m := r.(map[string]any)
		if m["name"] != metric {
			continue
		}
		ms, _ := m["measurements"].([]any)
		for _, x := range ms {
			if mm := x.(map[string]any); mm["phase"] == "Failed" {
				v, _ := mm["value"].(string)
				return v
			}
		}
	}
	return ""
}

func str(o *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, path...)
	return s
}
