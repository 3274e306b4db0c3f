package apitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/drainwatch/drainwatch/advise"
	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// measured is three complete terminations of ns/Deployment/web whose
// routing lag is 1.52 s at most and drain 0.4 s: the rule gives a preStop
// sleep of ⌈1.52 + 1⌉ = 3 s and a grace of 3 + ⌈0.4 + 1⌉ = 5 s.
func measured(ns string) []correlate.Termination {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	var out []correlate.Termination
	for _, lag := range []time.Duration{900 * time.Millisecond, 1520 * time.Millisecond, 1200 * time.Millisecond} {
		enr, stop := t0.Add(100*time.Millisecond), t0.Add(200*time.Millisecond)
		out = append(out, correlate.Termination{
			Workload: collector.Workload{Namespace: ns, Kind: "Deployment", Name: "web", Revision: "1"},
			Complete: true, GracePeriod: 30 * time.Second, LastConnAttempt: enr.Add(lag),
			Marks: correlate.Marks{DeleteRequested: t0, EndpointsNotReady: enr, StopSignal: stop, Exit: stop.Add(400 * time.Millisecond)},
		})
	}
	return out
}

// TestAdmissionPolicyWarns applies `drainwatch advise --emit-policy`'s
// output (built from measured terminations) with the real kubectl, then
// Deployments: one whose preStop sleep and grace are below the measured
// minimums gets the policy's warnings, as kubectl prints them; one at the
// minimums (an exec sleep) and one never measured get none.
func TestAdmissionPolicyWarns(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := "advise-" + rand.String(5)
	if _, err := cp.Kubectl(ctx, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false") })
	advices := advise.Advise(measured(ns), advise.DefaultRule)
	if len(advices) != 1 || advices[0].PrestopSleepSeconds != 3 || advices[0].TerminationGraceSeconds != 5 {
		t.Fatalf("advice %+v", advices)
	}
	policy, err := advise.WritePolicy(advices)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "apply", "-f", writeFile(t, "policy.yaml", policy))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply (policy):\n%s", out)
	t.Cleanup(func() {
		cp.Kubectl(context.Background(), "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", advise.PolicyName, "--ignore-not-found")
	})
	evidence := "routing lag 1.520s, drain 0.400s at the rule's percentile over 3 terminations; rule: p99 over at least 3 terminations, margin 1s"
	want := "Warning: Validation failed for ValidatingAdmissionPolicy '" + advise.PolicyName + "' with binding '" + advise.PolicyName +
		"': Deployment web: preStop sleep 1 s is below the 3 s drainwatch measured on this cluster (" + evidence + ")\n" +
		"Warning: Validation failed for ValidatingAdmissionPolicy '" + advise.PolicyName + "' with binding '" + advise.PolicyName +
		"': Deployment web: terminationGracePeriodSeconds 4 is below the 5 s drainwatch measured on this cluster (" + evidence + ")\n" +
		"deployment.apps/web created\n"
	// The policy's informers take a moment to see a new policy, binding
	// and parameters: the first Deployment is applied (server-side dry
	// run) until the warnings appear, then for real.
	short := deployment(ns, "web", `["sleep", "1"]`, 4)
	var got []byte
	for ctx.Err() == nil {
		got, _ = cp.Kubectl(ctx, "apply", "--dry-run=server", "-f", writeFile(t, "short.yaml", []byte(short)))
		if strings.Contains(string(got), "Warning") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, err = cp.Kubectl(ctx, "apply", "-f", writeFile(t, "short.yaml", []byte(short)))
	if err != nil || string(got) != want {
		t.Fatalf("kubectl apply (preStop 1 s, grace 4 s): %v\n%s\nwant:\n%s", err, got, want)
	}
	t.Logf("kubectl apply (preStop 1 s, grace 4 s):\n%s", got)
	for name, manifest := range map[string]string{ // applied one after another: web's checks are UPDATEs
		"web, preStop sh -c sleep 3, grace 5": deployment(ns, "web", `["/bin/sh", "-c", "sleep 3"]`, 5),
		"api (never measured), no sleep":      deployment(ns, "api", `["true"]`, 1),
		"web, native sleep 4, default grace": strings.Replace(strings.Replace(deployment(ns, "web", "", 0),
			"{exec: {command: }}", "{sleep: {seconds: 4}}", 1), "      terminationGracePeriodSeconds: 0\n", "", 1),
	} {
		got, err := cp.Kubectl(ctx, "apply", "-f", writeFile(t, "ok.yaml", []byte(manifest)))
		if err != nil || strings.Contains(string(got), "Warning") {
			t.Errorf("kubectl apply (%s): %v\n%s", name, err, got)
		}
		t.Logf("kubectl apply (%s): %s", name, got)
	}
}

// deployment is a Deployment manifest with an exec preStop hook and a
// grace period.
func deployment(ns, name, command string, grace int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      terminationGracePeriodSeconds: %[4]d
      containers:
      - name: server
        image: registry.invalid/server
        lifecycle: {preStop: {exec: {command: %[3]s}}}
`, ns, name, command, grace)
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
