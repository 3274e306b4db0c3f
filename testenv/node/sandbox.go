package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	corev1 "k8s.io/api/core/v1"
)

// ipam hands out node i's pod addresses 10.244.i.2 to .254 round-robin, so
// an address is reused as late as possible (a late packet to a recycled IP
// would land in another pod); the pod's IPv6 address has the same number
// (fd00:10:244:i::n).
type ipam struct {
	mu    sync.Mutex
	index int
	next  int
	used  map[int]bool
}

func newIPAM(index int) *ipam { return &ipam{index: index, next: 2, used: map[int]bool{}} }

func (a *ipam) allocate() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 253 {
		n := a.next
		a.next++
		if a.next > 254 {
			a.next = 2
		}
		if !a.used[n] {
			a.used[n] = true
			return n, nil
		}
	}
	return 0, fmt.Errorf("node %d: pod CIDR %s exhausted", a.index, netlab.PodCIDR(a.index))
}

func (a *ipam) release(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, n)
}

// sandbox is a pod's network namespace and pod-level cgroup: what a real
// node's pause container and CNI plugin provide.
type sandbox struct {
	ns       *netlab.NS
	ipIndex  int
	IP, IP6  string // a dual-stack pod's addresses, IPv4 the primary
	slice    string // absolute pod slice path
	sliceRel string
	// sandboxScope is the pause container's scope a real node has next to
	// the containers' (cri-containerd-<sandbox id>.scope). It stays empty
	// here: the bind mount holds the namespace, not a pause process. Its ID
	// is in no containerStatus, so attribution must skip it, as on a node.
	sandboxID    string
	sandboxScope string
	removed      bool // removeSandbox ran: the address may belong to another pod now
}

// createSandbox makes the pod's namespace (eth0 on the node bridge with an
// address of each family, default routes via the bridge: a dual-stack
// cluster's CNI) and its pod slice cgroup.
func (a *Agent) createSandbox(pod *corev1.Pod) (*sandbox, error) {
	n, err := a.ipam.allocate()
	if err != nil {
		return nil, err
	}
	sb := &sandbox{ipIndex: n, IP: netlab.PodIP(a.cfg.Index, n), IP6: netlab.PodIP6(a.cfg.Index, n)}
	sb.sliceRel = PodSlice(QOSClass(pod), pod.UID)
	sb.slice = filepath.Join(a.cfg.CgroupRoot, sb.sliceRel)
	if err := a.wireSandbox(pod, sb); err != nil {
		a.removeSandbox(sb)
		return nil, err
	}
	return sb, nil
}

func (a *Agent) wireSandbox(pod *corev1.Pod, sb *sandbox) error {
	ns, err := netlab.New(podNSName(a.cfg.Name, pod.Name))
	if err != nil {
		return fmt.Errorf("pod %s/%s netns: %w", pod.Namespace, pod.Name, err)
	}
	sb.ns = ns
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	err = netlab.Veth(netlab.End{NS: ns, Name: "eth0", CIDR: sb.IP + "/24", CIDR6: sb.IP6 + "/64"},
		netlab.End{NS: a.nodeNS, Name: "veth" + hex.EncodeToString(suffix), Master: netlab.NodeBridge})
	if err != nil {
		return fmt.Errorf("pod %s/%s veth: %w", pod.Namespace, pod.Name, err)
	}
	for _, gw := range []string{netlab.PodGateway(a.cfg.Index), netlab.PodGateway6(a.cfg.Index)} {
		if err := ns.Route("default", gw); err != nil {
			return err
		}
	}
	sb.sandboxID = newContainerID()
	sb.sandboxScope = filepath.Join(sb.slice, "cri-containerd-"+sb.sandboxID+".scope")
	f, err := makeCgroup(sb.sandboxScope)
	if err != nil {
		return err
	}
	return f.Close()
}

// removeSandbox tears the pod's network down like a CNI DEL (eth0 deleted,
// so its peer leaves the node bridge), deletes the namespace, the pod slice
// and releases the address. Containers must be gone already. Deleting eth0
// first matters: a process holding the namespace open (drainwatch holds it
// through a termination's tail) keeps the namespace alive, and its eth0 would
// otherwise keep answering for an address the next pod gets.
func (a *Agent) removeSandbox(sb *sandbox) error {
	if sb.removed {
		return nil
	}
	sb.removed = true
	var first error
	if sb.ns != nil {
		if err := sb.ns.IP("link del eth0"); err != nil {
			a.log.Debug().Err(err).Str("netns", sb.ns.Name()).Msg("deleting eth0 (CNI DEL)")
		}
		first = sb.ns.Close()
	}
	for _, cg := range []string{sb.sandboxScope, sb.slice} {
		if cg == "" {
			continue
		}
		if err := removeCgroup(cg); err != nil && first == nil {
			first = err
		}
	}
	a.ipam.release(sb.ipIndex)
	return first
}
