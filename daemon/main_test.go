package daemon_test

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestMain shares one real control plane among the package's tests.
func TestMain(m *testing.M) { cptest.Main(m) }
