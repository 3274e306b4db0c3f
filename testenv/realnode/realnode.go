// Package realnode runs a real Kubernetes node in testenv: the kubelet
// v1.37.2 built from k8s.io/kubernetes (make realnode), Debian's containerd
// 1.6 and runc 1.1 through containerd's CRI plugin, and Debian's CNI bridge,
// host-local and loopback plugins, registered with testenv's real API server.
//
// Each node has its own directory (root, state, sockets, configs, logs),
// its own cgroup root under every hierarchy, and its own network namespace,
// wired like the stand-in's (netlab.ConnectNode: pod CIDR 10.244.<Index>.0/24
// on cbr0, uplink 10.240.<Index>.2 to the fabric), so routers and clients in
// the fabric reach its pods unchanged. containerd and the kubelet run inside
// that namespace: the CNI plugins put pod veths on the bridge of
// containerd's namespace, and the kubelet's probes dial pod IPs from its own.
// They reach the API server (loopback of the root namespace) through a
// relay listening on the node namespace's loopback: no route joins the node
// namespace to the root namespace, so the network rule holds.
//
// Images come without a registry: static binaries packed into one-layer
// images with go-containerregistry and imported with `ctr images import`;
// the sandbox (pause) image is built the same way (realnode/pause). Pods use
// imagePullPolicy Never.
//
// This host mounts cgroups in hybrid mode, which the kubelet and runc treat
// as cgroup v1: the kubelet runs with failCgroupV1 false and the cgroupfs
// driver. Production nodes run cgroup v2 with the systemd driver; the
// cgroup paths drainwatch sees here (<root>/kubepods/<qos>/pod<uid>/<id> in
// each v1 hierarchy) are not the ones it sees there.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drainwatch/drainwatch/testenv/controlplane"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// nodeBridge is the bridge pods join: netlab's, so the topology is the stand-in's.
const nodeBridge = netlab.NodeBridge

// readyTimeout bounds the wait for the Node to be registered and Ready.
const readyTimeout = 120 * time.Second

// Config configures one real node.
type Config struct {
	Name  string // Node name
	Index int    // pod CIDR 10.244.<Index>.0/24, node IP netlab.NodeIP(Index)
	// Fabric is the shared namespace the node is linked to; nil leaves the
	// node namespace unconnected (its pods are reachable from NS only).
	Fabric *netlab.NS
	// Kubeconfig is the control plane's (controlplane.ControlPlane.Kubeconfig);
	// the kubelet uses its credentials through the relay.
	Kubeconfig string
	// BinDir holds the kubelet; controlplane.BinDir() when empty.
	BinDir string
	// Images are imported into containerd besides the pause image.
	Images []Image
	// Dir is the node's directory; a new one under /tmp when empty (unix
	// socket paths must stay under 108 bytes).
	Dir string
	Log zerolog.Logger
}

// Node is a running real node.
type Node struct {
	Name   string
	Index  int
	IP     string     // InternalIP, on the uplink
	NS     *netlab.NS // where containerd, the kubelet and the pod bridge live
	Dir    string
	Socket string // containerd's (CRI) socket
	// StartupTime is from Start's call to the Node being Ready.
	StartupTime time.Duration

	binDir, podCIDR, podGateway string
	client                      kubernetes.Interface
	relay                       *netlab.Relay // the kubelet's, on the namespace's loopback
	serviceRelay                *netlab.Relay // the pods', at the kubernetes Service's ClusterIP
	procs                       []*proc
	log                         zerolog.Logger
}

// Start brings up the node and returns once its Node is Ready. On error,
// everything made so far is removed.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	began := time.Now()
	n, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.bringUp(ctx, cfg); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	n.StartupTime = time.Since(began)
	n.log.Info().Str("node", n.Name).Dur("startup", n.StartupTime).Str("dir", n.Dir).Msg("real node ready")
	return n, nil
}

func prepare(cfg Config) (*Node, error) {
	if cfg.Name == "" || cfg.Kubeconfig == "" {
		return nil, errors.New("realnode: Name and Kubeconfig are required")
	}
	var err error
	if cfg.BinDir == "" {
		if cfg.BinDir, err = controlplane.BinDir(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.BinDir, "kubelet")); err != nil {
		return nil, fmt.Errorf("no kubelet in %s (make realnode): %w", cfg.BinDir, err)
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("/tmp", "rn-"); err != nil {
			return nil, err
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Node{
		Name: cfg.Name, Index: cfg.Index, IP: netlab.NodeIP(cfg.Index), Dir: cfg.Dir,
		Socket: filepath.Join(cfg.Dir, "containerd.sock"), binDir: cfg.BinDir,
		podCIDR: netlab.PodCIDR(cfg.Index), podGateway: netlab.PodGateway(cfg.Index),
		client: client, log: cfg.Log,
	}, nil
}

func (n *Node) bringUp(ctx context.Context, cfg Config) error {
	if err := n.network(cfg.Fabric); err != nil {
		return err
	}
	// A run killed outright (test timeout) leaves its shims and containers
	// in the node's cgroups: a node of the same name starts clean.
	if err := killCgroup(n.cgroupRoot()); err != nil {
		return fmt.Errorf("sweeping a previous node %s: %w", n.Name, err)
	}
	if err := makeCgroup(n.runtimeCgroup()); err != nil {
		return err
	}
	api, err := apiServerAddr(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	if n.relay, err = netlab.StartRelay(n.NS, "127.0.0.1:0", api, cfg.Log); err != nil {
		return fmt.Errorf("API server relay: %w", err)
	}
	if err := n.serveAPIService(ctx, api); err != nil {
		return err
	}
	kubeconfig, err := n.writeKubeconfig(cfg.Kubeconfig, n.relay.Addr())
	if err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	pause, err := StaticImage(ctx, "./testenv/realnode/pause", BinaryDir(), PauseImage)
	if err != nil {
		return err
	}
	if err := n.importImages(ctx, append([]Image{pause}, cfg.Images...)); err != nil {
		return err
	}
	if err := n.startKubelet(kubeconfig); err != nil {
		return err
	}
	return n.waitReady(ctx, readyTimeout)
}

// BinaryDir is where StaticImage's binaries are built, shared by the nodes
// of a process.
func BinaryDir() string { return filepath.Join(os.TempDir(), "drainwatch-realnode") }

// network creates the node namespace, wired to the fabric like a stand-in
// node, or alone with its bridge and node IP.
func (n *Node) network(fabric *netlab.NS) error {
	ns, err := netlab.New("rnode-" + n.Name)
	if err != nil {
		return err
	}
	n.NS = ns
	if fabric != nil {
		return netlab.ConnectNode(fabric, ns, n.Index)
	}
	if err := ns.Bridge(nodeBridge, n.podGateway+"/24"); err != nil {
		return err
	}
	// The kubelet refuses a --node-ip that no interface of its namespace has.
	return ns.IP(fmt.Sprintf("addr add %s/32 dev lo", n.IP))
}

// cgroupRoot is the kubelet's cgroupRoot: kubepods/... go under it.
func (n *Node) cgroupRoot() string { return "/drainwatch-rnode-" + n.Name }

// runtimeCgroup holds containerd and, by inheritance, its shims.
func (n *Node) runtimeCgroup() string { return n.cgroupRoot() + "/runtime" }
