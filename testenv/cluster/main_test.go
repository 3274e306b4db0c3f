package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

func TestMain(m *testing.M) { cptest.Main(m) }

// twoNodes starts a 2-node cluster on the package's control plane. Node names
// carry the test's prefix, so tests never share nodes.
func twoNodes(t *testing.T, prefix string) *cluster.Cluster {
	t.Helper()
	privileged.RequireRoot(t)
	cp := cptest.Get(t)
	log := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).
		Level(zerolog.WarnLevel)
	return cluster.StartT(t, cluster.Options{Nodes: 2, NodePrefix: prefix, ControlPlane: cp, Log: log, Dir: t.TempDir()})
}

// uniqueNS names a namespace for one test run: with -count=N on the shared
// control plane, an earlier run's pods (bound to nodes that are gone, still
// marked Ready) must never show up in a later run.
func uniqueNS(prefix string) string {
	return fmt.Sprintf("%s-%05x", prefix, rand.Uint32()&0xfffff)
}
