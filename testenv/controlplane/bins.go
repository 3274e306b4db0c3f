package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// K8sVersion is the Kubernetes release whose binaries testenv runs by
// default (testenv/k8sbuild pins it; the Makefile's K8S_VERSION).
const K8sVersion = "v1.37.2"

// Version is the release the binaries in BinDir are: $DRAINWATCH_K8S_VERSION
// when make k8s-versions runs the tests on another release's binaries,
// else K8sVersion.
func Version() string {
	if v := os.Getenv("DRAINWATCH_K8S_VERSION"); v != "" {
		return v
	}
	return K8sVersion
}

// modulePath identifies the product's go.mod when walking up to the repo root
// (testenv/k8sbuild has a go.mod of its own that must be skipped).
const modulePath = "github.com/drainwatch/drainwatch"

// Binaries the control plane needs, all built by `make controlplane`.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}

// RepoRoot walks up from the working directory to the directory holding the
// product's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repo root: %w", err)
	}
	for {
		if isProductModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func isProductModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}

// BinDir returns the directory holding the control-plane binaries:
// $DRAINWATCH_K8S_BIN, else <repo root>/.cache/k8s-<version>/bin. It fails with
// the command to run when a binary is missing.
func BinDir() (string, error) {
	dir := os.Getenv("DRAINWATCH_K8S_BIN")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("locating control-plane binaries (set DRAINWATCH_K8S_BIN): %w", err)
		}
		dir = filepath.Join(root, ".cache", "k8s-"+Version(), "bin")
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("control-plane binary %s missing in %s: run make controlplane", name, dir)
		}
	}
	return dir, nil
}
