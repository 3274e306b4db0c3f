package apitest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/gotools"
)

var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// measuredRollout is measured's three terminations as ns/Rollout/web's,
// each draining 2.9 s: the rule gives a preStop sleep of ⌈1.52 + 1⌉ = 3 s
// and a grace of 3 + ⌈2.9 + 1⌉ = 7 s.
func measuredRollout(ns string) []correlate.Termination {
	terms := measured(ns)
	for i := range terms {
		terms[i].Workload.Kind = "Rollout"
		terms[i].Marks.Exit = terms[i].Marks.StopSignal.Add(2900 * time.Millisecond)
	}
	return terms
}

// TestRolloutJSONPatchAndPolicy installs Argo Rollouts' CRD (as its module
// ships it) in the real API server, creates a Rollout whose container has
// no preStop and a grace of 5 s, and applies with the real kubectl the JSON
// patch advise computes from what the API server returns: the Rollout then
// sleeps 3 s natively (the CRD's schema keeps the sleep action) with a grace
// of 7 s, and a patch computed again is [], which kubectl applies as no
// change. Then the admission policy: a Rollout below the minimums gets the
// warnings naming the numbers, one at or above them, one never measured
// and one with spec.workloadRef (no template to read) get none.
func TestRolloutJSONPatchAndPolicy(t *testing.T) {
	cp := cptest.Get(t)
	_, crds := gotools.ArgoRollouts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := cp.Kubectl(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if err := cp.ApplyCRD(ctx, filepath.Join(crds, "rollout-crd.yaml"), "rollouts.argoproj.io"); err != nil {
		t.Fatal(err)
	}
	ns := "advise-ro-" + rand.String(5)
	kubectl("create", "namespace", ns)
	t.Cleanup(func() { cp.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false") })
	advices := advise.Advise(measuredRollout(ns), advise.DefaultRule)
	if len(advices) != 1 || advices[0].PrestopSleepSeconds != 3 || advices[0].TerminationGraceSeconds != 7 {
		t.Fatalf("advice %+v", advices)
	}
	kubectl("apply", "-f", writeFile(t, "web.yaml", []byte(rollout(ns, "web", "", 5))))
	patchRollout(ctx, t, cp, ns, advices[0])
	rolloutWarnings(ctx, t, cp, ns, advices)
}

// patchRollout applies advice a's JSON patch to ns/rollout/web with kubectl
// and checks what the API server then holds.
func patchRollout(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string, a advise.Advice) {
	t.Helper()
	patch, notes, err := advise.JSONPatch(a, readRollout(ctx, t, cp, ns, "web"), true)
	want := `[{"op":"test","path":"/spec/template/spec/containers/0/name","value":"server"},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":3}}}},` +
		`{"op":"replace","path":"/spec/template/spec/terminationGracePeriodSeconds","value":7}]`
	if err != nil || string(patch) != want || len(notes) != 0 {
		t.Fatalf("patch %s %q %v\nwant %s", patch, notes, err, want)
	}
	out, err := cp.Kubectl(ctx, "patch", "-n", ns, "rollout/web", "--type", "json", "-p", string(patch))
	if err != nil || string(out) != "rollout.argoproj.io/web patched\n" {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	spec := readRollout(ctx, t, cp, ns, "web")
	c := spec.Containers[0]
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 3 ||
		c.Lifecycle.PreStop.Exec != nil || spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 7 {
		t.Fatalf("after the patch: %+v, grace %v", c.Lifecycle, spec.TerminationGracePeriodSeconds)
	}
	again, _, err := advise.JSONPatch(a, spec, true)
	if err != nil || again != nil {
		t.Fatalf("a second patch: %s %v, want none", again, err)
	}
	if out, err := cp.Kubectl(ctx, "patch", "-n", ns, "rollout/web", "--type", "json", "-p", "[]"); err != nil ||
		string(out) != "rollout.argoproj.io/web patched (no change)\n" {
		t.Fatalf("kubectl patch []: %v\n%s", err, out)
	}
	// A patch computed for a spec whose first container was another one
	// fails (the API server does not say why: 422 "the server rejected our
	// request"); the same ops with the test naming server apply: the test
	// op is what failed, instead of changing the server's hook.
	spec.Containers[0].Name, spec.Containers[0].Lifecycle = "proxy", nil
	stale, _, _ := advise.JSONPatch(a, spec, true)
	if out, err := cp.Kubectl(ctx, "patch", "-n", ns, "rollout/web", "--type", "json", "-p", string(stale)); err == nil {
		t.Fatalf("a patch for container proxy at index 0 applied to server's Rollout:\n%s", out)
	}
	fresh := strings.Replace(string(stale), `"value":"proxy"`, `"value":"server"`, 1)
	if out, err := cp.Kubectl(ctx, "patch", "-n", ns, "rollout/web", "--type", "json", "-p", fresh); err != nil ||
		string(out) != "rollout.argoproj.io/web patched (no change)\n" {
		t.Fatalf("kubectl patch %s: %v\n%s", fresh, err, out)
	}
}

// rollouts is the dynamic client of ns's Rollouts.
func rollouts(t *testing.T, cp *controlplane.ControlPlane, ns string) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(rolloutsGVR).Namespace(ns)
}

// readRollout is ns/Rollout/name's pod spec, read as drainwatch advise
// reads it: the dynamic client and advise.ReadRollout.
func readRollout(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns, name string) corev1.PodSpec {
	t.Helper()
	o, err := rollouts(t, cp, ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := advise.ReadRollout(o.Object)
	if err != nil || len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%+v %v", tmpl, err)
	}
	return tmpl.Spec
}

// rolloutWarnings applies the admission policy for advices and Rollouts
// below, at and above the minimums.
func rolloutWarnings(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, ns string, advices []advise.Advice) {
	t.Helper()
	policy, err := advise.WritePolicy(advices)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cp.Kubectl(ctx, "apply", "-f", writeFile(t, "policy.yaml", policy)); err != nil {
		t.Fatalf("kubectl apply (policy): %v\n%s", err, out)
	}
	t.Cleanup(func() {
		cp.Kubectl(context.Background(), "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", advise.PolicyName, "--ignore-not-found")
	})
	evidence := "routing lag 1.520s, drain 2.900s at the rule's percentile over 3 terminations; rule: p99 over at least 3 terminations, margin 1s"
	prefix := "Warning: Validation failed for ValidatingAdmissionPolicy '" + advise.PolicyName + "' with binding '" + advise.PolicyName + "': "
	want := prefix + "Rollout web: preStop sleep 1 s is below the 3 s drainwatch measured on this cluster (" + evidence + ")\n" +
		prefix + "Rollout web: terminationGracePeriodSeconds 4 is below the 7 s drainwatch measured on this cluster (" + evidence + ")\n" +
		"rollout.argoproj.io/web configured\n"
	short := writeFile(t, "short.yaml", []byte(rollout(ns, "web", "{preStop: {sleep: {seconds: 1}}}", 4)))
	// As for Deployments: dry runs until the policy's informers see it.
	for ctx.Err() == nil {
		if got, _ := cp.Kubectl(ctx, "apply", "--dry-run=server", "-f", short); strings.Contains(string(got), "Warning") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, err := cp.Kubectl(ctx, "apply", "-f", short)
	if err != nil || string(got) != want {
		t.Fatalf("kubectl apply (Rollout, preStop sleep 1 s, grace 4 s): %v\n%s\nwant:\n%s", err, got, want)
	}
	t.Logf("kubectl apply (Rollout, preStop sleep 1 s, grace 4 s):\n%s", got)
	for _, c := range []struct{ name, manifest string }{ // in order: web's are UPDATEs
		{"web, native sleep 3, grace 7", rollout(ns, "web", "{preStop: {sleep: {seconds: 3}}}", 7)},
		{"web, preStop sh -c sleep 4, grace 8", rollout(ns, "web", `{preStop: {exec: {command: ["/bin/sh", "-c", "sleep 4"]}}}`, 8)},
		{"api (never measured), no preStop, grace 1", rollout(ns, "api", "", 1)},
		{"web, spec.workloadRef (no template)", workloadRefRollout(ns, "web")},
	} {
		got, err := cp.Kubectl(ctx, "apply", "-f", writeFile(t, "ok.yaml", []byte(c.manifest)))
		if err != nil || strings.Contains(string(got), "Warning") {
			t.Errorf("kubectl apply (%s): %v\n%s", c.name, err, got)
		}
		t.Logf("kubectl apply (%s): %s", c.name, got)
	}
}

// rollout is a Rollout manifest (never reconciled: no controller runs)
// with a container's lifecycle (YAML flow, "" for none) and a grace period.
func rollout(ns, name, lifecycle string, grace int) string {
	if lifecycle != "" {
		lifecycle = "\n        lifecycle: " + lifecycle
	}
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[2]s}}
  strategy: {canary: {}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      terminationGracePeriodSeconds: %[4]d
      containers:
      - name: server
        image: registry.invalid/server%[3]s
`, ns, name, lifecycle, grace)
}

// workloadRefRollout is a Rollout whose pods come from Deployment
// <name>-base's template.
func workloadRefRollout(ns, name string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[2]s}}
  strategy: {canary: {}}
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: %[2]s-base}
`, ns, name)
}
