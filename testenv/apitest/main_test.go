// Package apitest runs drainwatch's outputs against the real API server of
// testenv: the Events a termination produces, as kubectl shows them, and a
// server-side dry-run of the deploy/daemonset manifests. One control plane
// serves the package's tests.
package apitest

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

func TestMain(m *testing.M) { cptest.Main(m) }
