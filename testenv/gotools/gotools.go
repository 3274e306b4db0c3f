// Package gotools locates the test tools that `make test` builds once into
// .cache/ from Go modules of their own (testenv/scripts/build-gotool.sh):
// Helm for the chart's tests, opconfig, the Prometheus Operator's config
// generator, for the tests that scrape through the operator's
// configuration, and the Argo Rollouts controller for the gate's test.
package gotools

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// The pinned versions (testenv/helmbuild/go.mod, testenv/opconfig/go.mod);
// the Makefile builds into the same paths.
const (
	HelmVersion     = "v3.22.0"
	OperatorVersion = "v0.85.0"
	// PromSDVersion is github.com/prometheus/prometheus's in testenv/k8ssd.
	PromSDVersion = "v0.305.0"
	// ArgoVersion is github.com/argoproj/argo-rollouts's in testenv/argobuild.
	ArgoVersion = "v1.8.5"
	// FlaggerVersion is the github.com/fluxcd/flagger module whose CRDs
	// make argo copies (for the chart's dry run; Flagger is not built).
	FlaggerVersion = "v1.36.1"
)

// Helm returns the cached helm binary; a missing one skips the test outside
// CI and fails it in CI.
func Helm(t testing.TB) string {
	t.Helper()
	return cached(t, "helm-"+HelmVersion, "helm", "make helm")
}

// OpConfig returns the cached opconfig binary (testenv/opconfig).
func OpConfig(t testing.TB) string {
	t.Helper()
	return cached(t, "opconfig-"+OperatorVersion, "opconfig", "make opconfig")
}

// K8sSD returns the cached k8ssd binary (testenv/k8ssd): Prometheus' own
// Kubernetes discovery writing file_sd target groups.
func K8sSD(t testing.TB) string {
	t.Helper()
	return cached(t, "k8ssd-"+PromSDVersion, "k8ssd", "make opconfig")
}

// OperatorCRD returns the path of a prometheus-operator CRD (for example
// "podmonitors") as the operator's module ships it, from the module cache
// that building opconfig filled.
func OperatorCRD(t testing.TB, plural string) string {
	t.Helper()
	path := filepath.Join(cacheDir(t, "opconfig-"+OperatorVersion), "crds", "monitoring.coreos.com_"+plural+".yaml")
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, "%s missing: run make opconfig", path)
	}
	return path
}

// ArgoRollouts returns the cached Argo Rollouts controller
// (testenv/argobuild) and the directory of the CRDs its module ships.
func ArgoRollouts(t testing.TB) (controller, crds string) {
	t.Helper()
	dir := "argo-rollouts-" + ArgoVersion
	controller = cached(t, dir, "rollouts-controller", "make argo")
	crds = filepath.Join(cacheDir(t, dir), "crds")
	if _, err := os.Stat(filepath.Join(crds, "rollout-crd.yaml")); err != nil {
		skipOrFail(t, "%s missing: run make argo", filepath.Join(crds, "rollout-crd.yaml"))
	}
	return controller, crds
}

// FlaggerCRDs returns the path of Flagger's CRDs (Canary, MetricTemplate,
// AlertProvider) as its module ships them.
func FlaggerCRDs(t testing.TB) string {
	t.Helper()
	path := filepath.Join(cacheDir(t, "flagger-"+FlaggerVersion), "crd.yaml")
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, "%s missing: run make argo", path)
	}
	return path
}

func cached(t testing.TB, dir, name, fix string) string {
	t.Helper()
	path := filepath.Join(cacheDir(t, dir), name)
	if _, err := os.Stat(path); err != nil {
		skipOrFail(t, "%s missing: run %s", path, fix)
	}
	return path
}

func cacheDir(t testing.TB, dir string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".cache", dir)
}

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if privileged.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Path is the cached tool name of dir (e.g. "helm-"+HelmVersion, "helm")
// for callers without a testing.TB (the lab); fix is the make target that
// builds it, named in the error.
func Path(dir, name, fix string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, ".cache", dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s missing: run %s", path, fix)
	}
	return path, nil
}
