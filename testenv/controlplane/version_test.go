package controlplane_test

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestServerVersion: the API server is the release the tests were given
// (the pinned one, or make k8s-versions' DRAINWATCH_K8S_VERSION: the build
// script stamps the version into the binaries).
func TestServerVersion(t *testing.T) {
	cp := cptest.Get(t)
	v, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := controlplane.Version(); v.GitVersion != want {
		t.Fatalf("API server version %s, want %s (rebuild: rm -r .cache/k8s-*; make controlplane)", v.GitVersion, want)
	}
}
