package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/realnode"
)

// realNodeEnv is a testenv cluster (control plane, fabric, one stand-in
// node the real-node scenarios leave alone) with one real node
// (testenv/realnode: kubelet, containerd, runc, CNI) on its fabric, and
// drainwatch's daemon for the real node.
type realNodeEnv struct {
	c    *cluster.Cluster
	node *realnode.Node
	ds   []*nodeDaemon // the real node's daemon only
}

// startRealNode starts the cluster, the real node (index 2, after the
// stand-in) with the server image and images, and its daemon.
func startRealNode(t *testing.T, prefix string, images ...realnode.Image) *realNodeEnv {
	t.Helper()
	privileged.RequireRoot(t)
	privileged.RequireFile(t, filepath.Join(realnode.CNIBinDir, "bridge"), "Debian's containernetworking-plugins (make deps)")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := cptest.Get(t)
	warn := zerolog.New(zerolog.NewConsoleWriter(func(w *zerolog.ConsoleWriter) { w.Out = os.Stderr })).Level(zerolog.WarnLevel)
	name := unique(prefix)
	c := cluster.StartT(t, cluster.Options{Nodes: 1, NodePrefix: name + "-", ControlPlane: cp, Log: warn})
	server, err := realnode.WorkloadImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := realnode.Start(ctx, realnode.Config{Name: name + "-real", Index: 2, Fabric: c.Fabric,
		Kubeconfig: c.Kubeconfig, Images: append([]realnode.Image{server}, images...), Log: warn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepNodeLogs(t, n)
		}
		if err := n.Close(); err != nil {
			t.Errorf("closing real node: %v", err)
		}
		if err := deleteNode(c, n.Name); err != nil {
			t.Error(err)
		}
	})
	t.Logf("real node %s Ready in %s", n.Name, n.StartupTime.Round(time.Millisecond))
	return &realNodeEnv{c: c, node: n, ds: []*nodeDaemon{startDaemon(t, c.RestConfig, n.Name, t.TempDir())}}
}

// onRealNode pins a Deployment's pods to the real node (realnode.Pin:
// its hostname, the toleration of its taint, imagePullPolicy Never).
func (e *realNodeEnv) onRealNode(dep *appsv1.Deployment) {
	realnode.Pin(&dep.Spec.Template.Spec, e.node.Name)
}

// keepNodeLogs copies the real node's kubelet and containerd logs out of
// its directory, which Close removes.
func keepNodeLogs(t *testing.T, n *realnode.Node) {
	dir, err := os.MkdirTemp("", "realnode-logs-")
	if err != nil {
		t.Log(err)
		return
	}
	for _, f := range []string{"kubelet.log", "containerd.log"} {
		if b, err := os.ReadFile(filepath.Join(n.Dir, f)); err == nil {
			_ = os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
	}
	t.Logf("real node logs kept in %s", dir)
}

// deleteNode removes the real node's Node from the shared control plane:
// nothing else would, and the scheduler would keep binding pods to it.
func deleteNode(c *cluster.Cluster, name string) error {
	err := c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	return nil
}
