// Package node is testenv's stand-in for the kubelet and containerd: one
// Agent per simulated node, several per process, against a real API server.
//
// An Agent registers its Node (pod CIDR 10.244.<Index>.0/24, Ready,
// addresses, capacity) and keeps its Lease fresh, watches the pods bound to
// it (fieldSelector spec.nodeName) and for each one:
//
//   - creates a network namespace with eth0 on the bridge of the node's own
//     namespace (netlab.ConnectNode links that to the shared fabric; the
//     root namespace has no route to the pods), an IP from the pod CIDR and
//     a default route via the bridge;
//   - runs each container's command as PID 1 of a new PID namespace, born in
//     a cgroup v2 named like the kubelet's systemd driver with containerd
//     (kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/
//     cri-containerd-<64 hex>.scope) under the cgroup2 mount;
//   - runs startup, readiness and liveness probes, restarts containers by
//     the restart policy, and reports the pod status (podIP, Ready,
//     containerStatuses with containerd:// IDs, exit codes, stop signal,
//     phase). httpGet and tcpSocket probes run in one helper process per
//     agent, a binary named "kubelet" (comm "kubelet", as drainwatch
//     recognises the kubelet) in the node namespace, which counts every
//     connection attempt (ProbeCounts, ProbeAttempts); exec probes run
//     inside the container's PID and network namespaces and cgroup. As in
//     the kubelet's probe workers, liveness and startup probes stop when
//     the pod is deleted, readiness probes run until the container exits;
//   - on deletion terminates like kuberuntime's killContainer and
//     containerd's StopContainer (see Termination and rules.go), then
//     removes cgroups and namespace and deletes the pod with grace 0.
//
// Events (Killing, FailedPreStopHook, Started, Unhealthy) go through the
// Events API as the kubelet writes them (source kubelet/<node>, fieldPath
// spec.containers{name}, repeats counted).
//
// Not modelled: init containers, hostNetwork, a private mount namespace
// (containers see the host's /proc), image pulls and volumes.
//
// Images are not pulled: "local:/path" runs that binary (no image config:
// stop signal SIGTERM); short names are image configs from BuiltinImages
// (nginx, haproxy) and Config.Images (e.g. "dwserver" → the built workload
// server), with an entrypoint and a STOPSIGNAL honoured like containerd:
// lifecycle.stopSignal, else the image's, else SIGTERM. With
// Config.DisableContainerStopSignals the status carries no stopSignal, as
// a kubelet with that feature gate off.
//
// Start returns a running Agent; Stop (or cancelling Start's context) kills
// every container at once and removes everything the agent made. Container
// processes also carry PR_SET_PDEATHSIG=SIGKILL, so they die with the agent.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Config configures one node agent.
type Config struct {
	Name   string // Node name
	Index  int    // node index: pod CIDR 10.244.<Index>.0/24, netlab.NodeIP(Index)
	Client kubernetes.Interface
	// Fabric is the shared namespace the node is linked to; nil leaves the
	// node namespace unconnected (pods are reachable from NodeNS only).
	Fabric *netlab.NS
	// CgroupRoot is the cgroup2 mount; empty: found in /proc/self/mountinfo.
	CgroupRoot string
	// Images maps short image names to image configs ("dwserver" → the
	// built workload server); they add to and override BuiltinImages.
	Images map[string]Image
	// WorkDir receives the kubelet prober binary (WorkDir/kubelet), built
	// once per process; empty: <os.TempDir()>/drainwatch-node.
	WorkDir string
	// DisableContainerStopSignals runs the node as a kubelet with the
	// ContainerStopSignals feature gate off: containerStatuses[].stopSignal
	// is not reported (the runtime still sends the image's stop signal).
	DisableContainerStopSignals bool
	// LogDir receives container logs: <ns>_<pod>_<uid>/<container>/<n>.log.
	// Empty: a temporary directory, removed by Stop.
	LogDir string
	Labels map[string]string // extra Node labels
	Logger zerolog.Logger
}

// Agent is a running node agent.
type Agent struct {
	cfg     Config
	log     zerolog.Logger
	nodeNS  *netlab.NS
	images  map[string]Image
	kubelet *kubeletProber
	ipam    *ipam
	events  *eventSink
	tmpLog  bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   sync.Once

	mu       sync.Mutex
	workers  map[types.UID]*podWorker
	finished map[types.UID]*podWorker
}

// Start brings a node up: namespace, Node object, lease, pod informer. It
// returns once the informer has synced. Cancelling ctx stops the agent
// like Stop does.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With().Str("node", cfg.Name).Logger(), ipam: newIPAM(cfg.Index), images: cfg.images(),
		workers: map[types.UID]*podWorker{}, finished: map[types.UID]*podWorker{}, tmpLog: cfg.LogDir == ""}
	if a.tmpLog {
		dir, err := os.MkdirTemp("", "dwnode-"+cfg.Name+"-")
		if err != nil {
			return nil, fmt.Errorf("container log dir: %w", err)
		}
		a.cfg.LogDir = dir
	}
	a.events = newEventSink(cfg.Client, cfg.Name, a.log)
	ctx, a.cancel = context.WithCancel(ctx)
	if err := a.up(ctx); err != nil {
		a.Stop()
		return nil, err
	}
	go func() { <-ctx.Done(); a.Stop() }()
	return a, nil
}

func (cfg *Config) defaults() error {
	if cfg.Name == "" || cfg.Client == nil {
		return errors.New("node: Config.Name and Config.Client are required")
	}
	if cfg.Index < 0 || cfg.Index >= netlab.MaxNodes {
		return fmt.Errorf("node %s: index %d out of range [0,%d)", cfg.Name, cfg.Index, netlab.MaxNodes)
	}
	if cfg.CgroupRoot == "" {
		root, err := Cgroup2Mount()
		if err != nil {
			return err
		}
		cfg.CgroupRoot = root
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(os.TempDir(), "drainwatch-node")
	}
	return nil
}

func (a *Agent) up(ctx context.Context) error {
	ns, err := netlab.New(nodeNSName(a.cfg.Name))
	if err != nil {
		return err
	}
	a.nodeNS = ns
	if a.cfg.Fabric != nil {
		if err := netlab.ConnectNode(a.cfg.Fabric, ns, a.cfg.Index); err != nil {
			return fmt.Errorf("node %s: %w", a.cfg.Name, err)
		}
	} else if err := ns.Bridge(netlab.NodeBridge, netlab.PodGateway(a.cfg.Index)+"/24", netlab.PodGateway6(a.cfg.Index)+"/64"); err != nil {
		return err
	}
	bin, err := BuildKubeletProber(ctx, a.cfg.WorkDir)
	if err != nil {
		return err
	}
	if a.kubelet, err = a.startKubeletProber(bin); err != nil {
		return err
	}
	a.goRun(func() { a.events.run(ctx) })
	if err := a.register(ctx); err != nil {
		return err
	}
	a.goRun(func() { a.heartbeat(ctx) })
	return a.watchPods(ctx)
}

func (a *Agent) goRun(fn func()) {
	a.wg.Add(1)
	go func() { defer a.wg.Done(); fn() }()
}

// Stop kills every container, removes every pod sandbox and cgroup and the
// node namespace, and waits for the agent's goroutines. The Node object
// stays in the API (a stopped kubelet does not delete its node).
func (a *Agent) Stop() {
	a.stop.Do(func() {
		a.cancel()
		a.wg.Wait()
		if a.kubelet != nil {
			a.kubelet.stop()
		}
		if a.nodeNS != nil {
			if err := a.nodeNS.Close(); err != nil {
				a.log.Error().Err(err).Msg("removing node namespace")
			}
		}
		if a.tmpLog {
			_ = os.RemoveAll(a.cfg.LogDir)
		}
		a.log.Info().Msg("node agent stopped")
	})
}
