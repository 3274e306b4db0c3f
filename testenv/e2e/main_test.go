// Package e2e_test runs drainwatch's daemon in-process, one per node of a
// testenv cluster (real control plane, node agents, real kernel with eBPF),
// and compares each Termination's counts with what ground-truth clients saw.
package e2e_test

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

func TestMain(m *testing.M) { cptest.Main(m) }
