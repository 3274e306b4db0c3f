package controlplane_test

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestServerVersion: the API server is the pinned release (the build script
// stamps the version into the binaries).
func TestServerVersion(t *testing.T) {
	cp := cptest.Get(t)
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != controlplane.K8sVersion {
		t.Fatalf("API server version %s, want %s (rebuild: rm -r .cache/k8s-*; make controlplane)", v.GitVersion, controlplane.K8sVersion)
	}
}
