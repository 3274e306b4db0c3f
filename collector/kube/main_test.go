package kube

import (
	"testing"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// The API tests share one real control plane (skipped with -short).
func TestMain(m *testing.M) { cptest.Main(m) }
