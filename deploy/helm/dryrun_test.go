package helm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/gotools"
)

func TestMain(m *testing.M) { cptest.Main(m) }

// TestServerSideDryRun sends both renderings to a real API server with
// --dry-run=server: admission, defaulting and, for the PodMonitor and the
// PrometheusRule, the schema of the CRDs the operator's module ships.
func TestServerSideDryRun(t *testing.T) {
	cp := cptest.Get(t)
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
	for _, plural := range []string{"podmonitors", "prometheusrules"} {
		kubectl("apply", "--server-side", "-f", gotools.OperatorCRD(t, plural))
		kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/"+plural+".monitoring.coreos.com")
	}
	ensureNamespace(ctx, t, cp.Client)
	dir := t.TempDir()
	// The default rendering's objects are the kustomize base's but the
	// Namespace, plus the generated TLS Secret; the recommended values add
	// the PodMonitor and its scraper's ServiceAccount, token Secret and
	// binding, and drainwatch-apiserver's 11 objects (its TLS Secret,
	// ServiceAccount, 4 bindings and a Role, the viewer ClusterRole, the
	// Deployment, Service and APIService); the full values (their own TLS Secret) add the PodMonitor,
	// the scraper, the PrometheusRule and the dashboard's ConfigMap; the
	// overlay is the base's with the PodMonitor, the scraper and the
	// PrometheusRule.
	renderings := map[string][]byte{
		"default": template(t), "full": template(t, fullValues), "recommended": template(t, recommendedValues),
		"kustomize overlay": kustomize(t, "../daemonset/overlays/prometheus-operator"),
	}
	for name, rendering := range renderings {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(file, rendering, 0o644); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(kubectl("apply", "--dry-run=server", "-f", file))
		t.Logf("%s, kubectl apply --dry-run=server:\n%s", name, out)
		// Warnings aside (the Namespace created without kubectl apply).
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "Warning: ") {
				lines = append(lines, l)
			}
		}
		out = strings.Join(lines, "\n")
		want := map[string]int{"default": 9, "full": 15, "recommended": 24, "kustomize overlay": 14}[name]
		if n := strings.Count(out, "(server dry run)"); n != want || strings.Count(out, "\n")+1 != want {
			t.Errorf("%s: %d objects passed the dry run, want %d:\n%s", name, n, want, out)
		}
	}
}

// TestDryRunRejectsWhatTheCRDDoesNot: the dry run does check the operator's
// schema: a misspelt honorLabels is refused, not dropped.
func TestDryRunRejectsWhatTheCRDDoesNot(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, plural := range []string{"podmonitors"} {
		if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", gotools.OperatorCRD(t, plural)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+plural+".monitoring.coreos.com"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	pm := strings.Replace(string(template(t, "--set", "podMonitor.enabled=true", "--show-only", "templates/podmonitor.yaml")),
		"honorLabels: true", "honorLabel: true", 1)
	file := filepath.Join(t.TempDir(), "podmonitor.yaml")
	if err := os.WriteFile(file, []byte(pm), 0o644); err != nil {
		t.Fatal(err)
	}
	ensureNamespace(ctx, t, cp.Client)
	out, err := cp.Kubectl(ctx, "apply", "--dry-run=server", "-f", file)
	if err == nil || !strings.Contains(string(out), `unknown field "spec.podMetricsEndpoints[0].honorLabel"`) {
		t.Errorf("a PodMonitor with honorLabel passed the dry run: %v\n%s", err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))
}
