package runtime

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestMain starts testenv's API server for the daemon run in the container.
func TestMain(m *testing.M) { cptest.Main(m) }
