// Package cluster composes testenv for tests and for the CLI: the real control
// plane, a fabric network namespace, N node agents linked to it, and on demand
// routers and ground-truth clients placed in the fabric. The root namespace
// has no route to the pods; everything the tests send starts inside the
// fabric.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/kubeproxy"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// Options configures Start.
type Options struct {
	Nodes int    // node agents; 1 when zero
	Dir   string // state directory; a new temporary one when empty (kept after Stop, for its logs)
	// NodePrefix names nodes <prefix>1..N ("node-" when empty); the CLI uses
	// its own prefix so `down` can find what it made.
	NodePrefix string
	// ControlPlane reuses a running control plane (e.g. cptest's); Stop then
	// leaves it running. Nil starts one.
	ControlPlane *controlplane.ControlPlane
	// DisableContainerStopSignals runs the cluster with the
	// ContainerStopSignals feature gate off: the node agents do not report
	// containerStatuses[].stopSignal and a control plane Start starts drops
	// spec lifecycle.stopSignal (a ControlPlane passed in keeps its gates).
	DisableContainerStopSignals bool
	// KubeProxy runs the real kube-proxy on every node, in this mode
	// (kubeproxy.NFTables or kubeproxy.IPTables); empty runs none. Clients
	// then reach a Service's ClusterIP from a node's namespace
	// (KubeProxies[i].Dial).
	KubeProxy string
	// KubeProxyMinSync and KubeProxySync are its minSyncPeriod and
	// syncPeriod: the lag knob (0 s and 30 s when zero).
	KubeProxyMinSync, KubeProxySync time.Duration
	Log                             zerolog.Logger
}

// Cluster is a running test cluster.
type Cluster struct {
	Dir        string
	Kubeconfig string
	RestConfig *rest.Config
	Client     kubernetes.Interface
	CP         *controlplane.ControlPlane
	Fabric     *netlab.NS    // routers and clients live here
	Nodes      []*node.Agent // Nodes[i] is named NodeNames[i], pod CIDR 10.244.(i+1).0/24
	NodeNames  []string
	// KubeProxies[i] is Nodes[i]'s kube-proxy, with Options.KubeProxy.
	KubeProxies []*kubeproxy.Proxy

	log    zerolog.Logger
	ownsCP bool
	cancel context.CancelFunc
}

// Start brings up a cluster. Everything it starts stops with Stop, when ctx
// ends, or with the process (child processes carry Pdeathsig).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, log: opts.Log, CP: opts.ControlPlane, ownsCP: opts.ControlPlane == nil}
	ctx, c.cancel = context.WithCancel(ctx)
	if err := c.start(ctx, opts); err != nil {
		_ = c.Stop()
		return nil, err
	}
	c.log.Info().Strs("nodes", c.NodeNames).Str("kubeconfig", c.Kubeconfig).Msg("cluster up")
	return c, nil
}

// StartT starts a cluster for a test and stops it when the test ends. Without
// opts.Dir its state (pod logs included) goes to t.TempDir().
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping cluster: %v", err)
		}
	})
	return c
}

func (o *Options) defaults() error {
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 0 || o.Nodes >= netlab.MaxNodes {
		return fmt.Errorf("cluster: %d nodes, want 1..%d", o.Nodes, netlab.MaxNodes-1)
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "node-"
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "drainwatch-cluster-")
		if err != nil {
			return fmt.Errorf("cluster state dir: %w", err)
		}
		o.Dir = dir
	}
	return os.MkdirAll(o.Dir, 0o755)
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	if c.CP == nil {
		cp, err := controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(c.Dir, "controlplane"), Log: c.log,
			DisableContainerStopSignals: opts.DisableContainerStopSignals})
		if err != nil {
			return err
		}
		c.CP = cp
	}
	c.Kubeconfig, c.RestConfig, c.Client = c.CP.Kubeconfig, c.CP.RestConfig, c.CP.Client
	server, err := workload.Build(ctx, c.Dir)
	if err != nil {
		return err
	}
	if c.Fabric, err = netlab.NewFabric("fabric"); err != nil {
		return fmt.Errorf("creating fabric namespace: %w", err)
	}
	for i := 1; i <= opts.Nodes; i++ {
		name := fmt.Sprintf("%s%d", opts.NodePrefix, i)
		a, err := node.Start(ctx, node.Config{Name: name, Index: i, Client: c.Client, Fabric: c.Fabric,
			Images: map[string]node.Image{workload.ImageName: {Entrypoint: server}}, LogDir: filepath.Join(c.Dir, "pods"),
			WorkDir: c.Dir, DisableContainerStopSignals: opts.DisableContainerStopSignals,
			Logger: c.log})
		if err != nil {
			return fmt.Errorf("starting node %s: %w", name, err)
		}
		c.Nodes, c.NodeNames = append(c.Nodes, a), append(c.NodeNames, name)
	}
	if opts.KubeProxy != "" {
		return c.startKubeProxies(ctx, opts)
	}
	return nil
}

// Stop stops the node agents (killing their pods and removing namespaces and
// cgroups), deletes their Node objects, stops the fabric, and the control
// plane if the cluster started it.
func (c *Cluster) Stop() error {
	c.cancel()
	errs := []error{c.stopKubeProxies()}
	for _, a := range c.Nodes {
		a.Stop()
	}
	c.Nodes = nil
	if !c.ownsCP && c.CP != nil {
		errs = append(errs, c.deleteNodes())
	}
	if c.Fabric != nil {
		errs = append(errs, c.Fabric.Close())
		c.Fabric = nil
	}
	if c.ownsCP && c.CP != nil {
		errs = append(errs, c.CP.Stop())
		c.CP = nil
	}
	return errors.Join(errs...)
}

// Dial opens a connection from inside the fabric: the client side of every
// scenario.
func (c *Cluster) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.Fabric.Dial(ctx, network, addr)
}

// Kubectl runs the cached kubectl against the cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return c.CP.Kubectl(ctx, args...)
}

var _ client.DialFunc = (*Cluster)(nil).Dial

// deleteNodes removes the stopped nodes from a shared control plane. Nothing
// else would: without the node-lifecycle controller a Node whose agent is gone
// stays Ready, and the scheduler would keep binding pods to it.
func (c *Cluster) deleteNodes() error {
	var errs []error
	for _, n := range c.NodeNames {
		err := c.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting node %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}
