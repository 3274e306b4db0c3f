package controlplane_test

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

func TestMain(m *testing.M) { cptest.Main(m) }
