package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/gotools"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// someTerminations is a daemon's store of several terminations.
type someTerminations []correlate.Termination

func (s someTerminations) Terminations() []correlate.Termination { return s }

func (s someTerminations) Get(uid string) (correlate.Termination, bool) {
	for _, t := range s {
		if t.PodUID == uid {
			return t, true
		}
	}
	return correlate.Termination{}, false
}

// rolloutTerminations are three terminations of shop/Rollout/<name>, lag
// 1.52 s at most and drain 0.4 s: sleep 3 s, grace 5 s.
func rolloutTerminations(name string) []correlate.Termination {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	var out []correlate.Termination
	for i, lag := range []time.Duration{900 * time.Millisecond, 1520 * time.Millisecond, 1200 * time.Millisecond} {
		enr, stop := t0.Add(100*time.Millisecond), t0.Add(200*time.Millisecond)
		out = append(out, correlate.Termination{PodUID: name + string(rune('a'+i)), Pod: name + "-" + string(rune('a'+i)), Node: "n1",
			Workload: collector.Workload{Namespace: "shop", Kind: "Rollout", Name: name, Revision: "6b8f"},
			Complete: true, GracePeriod: 30 * time.Second, LastConnAttempt: enr.Add(lag),
			Marks: correlate.Marks{DeleteRequested: t0, EndpointsNotReady: enr, StopSignal: stop, Exit: stop.Add(400 * time.Millisecond)}})
	}
	return out
}

const rolloutManifests = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{name: server, image: registry.invalid/server}]
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: ref, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: ref}}
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: ref-base}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ref-base, namespace: shop}
spec:
  replicas: 0
  selector: {matchLabels: {app: ref}}
  template:
    metadata: {labels: {app: ref}}
    spec:
      containers: [{name: server, image: registry.invalid/server}]
`

// TestAdvisePatchRollouts: against a real API server with Argo Rollouts'
// CRD, advise -A -o patch prints for a Rollout with a template a JSON
// patch, and for one with spec.workloadRef a strategic merge of its
// Deployment (stderr says so); each document's comment names the object
// and --type, and kubectl applies each document as its comment says.
func TestAdvisePatchRollouts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
	if _, err := controlplane.BinDir(); err != nil {
		privileged.RequireFile(t, "control-plane binaries", err.Error())
	}
	_, crds := gotools.ArgoRollouts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Config{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cp.Stop(); os.RemoveAll(cp.Dir) }()
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
	kubectl("apply", "-f", writeTestFile(t, "rollouts.yaml", rolloutManifests))
	daemon := httptestDaemon(t, append(rolloutTerminations("web"), rolloutTerminations("ref")...))
	var out, errOut strings.Builder
	if code := adviseCmd([]string{"-A", "-o", "patch", "--url", daemon, "--kubeconfig", cp.Kubeconfig}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := "# kubectl patch -n shop deployment/ref-base --type strategic --patch-file THIS-DOCUMENT\n" +
		`{"spec":{"template":{"spec":{"containers":[{"lifecycle":{"preStop":{"exec":null,"sleep":{"seconds":3}}},"name":"server"}]}}}}` + "\n---\n" +
		"# kubectl patch -n shop rollout/web --type json --patch-file THIS-DOCUMENT\n" +
		`[{"op":"test","path":"/spec/template/spec/containers/0/name","value":"server"},` +
		`{"op":"add","path":"/spec/template/spec/containers/0/lifecycle","value":{"preStop":{"sleep":{"seconds":3}}}},` +
		`{"op":"replace","path":"/spec/template/spec/terminationGracePeriodSeconds","value":5}]` + "\n"
	wantErr := "drainwatch advise: shop/Rollout/ref: the Rollout takes its pod template from Deployment ref-base (spec.workloadRef): " +
		"the patch is for deployment/ref-base, whose template Argo Rollouts follows\n"
	if out.String() != want || errOut.String() != wantErr {
		t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant:\n%s", out.String(), want, errOut.String(), wantErr)
	}
	for i, doc := range strings.Split(out.String(), "---\n") {
		comment, _, _ := strings.Cut(doc, "\n")
		args := strings.Fields(strings.TrimPrefix(comment, "# kubectl "))
		args[len(args)-1] = writeTestFile(t, "patch.yaml", doc)
		t.Logf("document %d: kubectl %s", i, strings.Join(args, " "))
		if got := kubectl(args...); !strings.HasSuffix(got, " patched\n") {
			t.Errorf("kubectl %v: %s", args, got)
		}
	}
}

func httptestDaemon(t *testing.T, terms someTerminations) string {
	t.Helper()
	s := httptest.NewServer(exporter.NewServer(exporter.ServerConfig{Source: terms, Log: zerolog.Nop()}).Handler())
	t.Cleanup(s.Close)
	return s.URL
}

func writeTestFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
