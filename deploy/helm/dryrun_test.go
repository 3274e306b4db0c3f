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
	if _, err := cp.Kubectl(ctx, "get", "namespace", namespace); err != nil {
		kubectl("create", "namespace", namespace)
	}
	dir := t.TempDir()
	// The default rendering's objects are the kustomize base's but the
	// Namespace; the full values add the PodMonitor, the PrometheusRule and
	// the dashboard's ConfigMap.
	for name, values := range map[string][]string{"default": nil, "full": {fullValues}} {
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, template(t, values...), 0o644); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(kubectl("apply", "--dry-run=server", "-f", file))
		t.Logf("%s values, kubectl apply --dry-run=server:\n%s", name, out)
		want := map[string]int{"default": 5, "full": 8}[name]
		if n := strings.Count(out, "(server dry run)"); n != want || strings.Count(out, "\n")+1 != want {
			t.Errorf("%s values: %d objects passed the dry run, want %d:\n%s", name, n, want, out)
		}
	}
}
