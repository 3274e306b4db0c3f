package apitest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestManifestsServerSideDryRun renders the kustomize base with the pinned
// kubectl and applies it with --dry-run=server: the API server validates
// every object (schema, RBAC rules, the DaemonSet's pod spec and security
// context, Pod Security admission of the namespace). The namespace itself is
// created for real first, as namespaced dry-runs need it to exist. The
// overlay's PodMonitor and PrometheusRule need CRDs this API server lacks:
// deploy/daemonset's tests parse them instead.
func TestManifestsServerSideDryRun(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "deploy", "daemonset", "base")
	rendered, err := cp.Kubectl(ctx, "kustomize", base)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "drainwatch.yaml")
	if err := os.WriteFile(file, rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Kubectl(ctx, "apply", "-f", filepath.Join(base, "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "apply", "--server-side", "--field-manager=drainwatch-test", "--dry-run=server", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"namespace/drainwatch serverside-applied (server dry run)",
		"serviceaccount/drainwatch serverside-applied (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/drainwatch serverside-applied (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/drainwatch-metrics-reader serverside-applied (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/drainwatch-terminations-reader serverside-applied (server dry run)",
		"clusterrolebinding.rbac.authorization.k8s.io/drainwatch serverside-applied (server dry run)",
		"service/drainwatch-metrics serverside-applied (server dry run)",
		"daemonset.apps/drainwatch serverside-applied (server dry run)",
		"networkpolicy.networking.k8s.io/drainwatch serverside-applied (server dry run)",
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dry-run output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	// A dry run stores nothing.
	if _, err := cp.Kubectl(ctx, "-n", "drainwatch", "get", "daemonset", "drainwatch"); err == nil {
		t.Fatal("the DaemonSet exists after a dry run")
	}
}

// TestOverlayRenders: the prometheus-operator overlay renders with the
// pinned kubectl into the base plus its PodMonitor and PrometheusRule (their
// CRDs are not installed here, so they are not dry-run).
func TestOverlayRenders(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "kustomize", filepath.Join(root, "deploy", "daemonset", "overlays", "prometheus-operator"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(string(out), "\n") {
		if k, ok := strings.CutPrefix(line, "kind: "); ok {
			kinds = append(kinds, k)
		}
	}
	// The base plus the overlay's scraper identity (a ServiceAccount, its
	// token Secret and its binding to the metrics reader: the PodMonitor
	// scrapes with it over verified TLS).
	want := "Namespace ServiceAccount ServiceAccount ClusterRole ClusterRole ClusterRole ClusterRoleBinding ClusterRoleBinding Secret Service DaemonSet PodMonitor PrometheusRule NetworkPolicy"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("overlay kinds %q, want %q", got, want)
	}
}
