package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Naming a peer address. What the pod sees as the peer depends on the
// router in between:
//   - kube-proxy DNATs a Service's traffic and keeps the client's address,
//     so the peer is the client: a pod (its routing was decided by
//     kube-proxy on the client pod's node, or by the pod itself when it is
//     an L7 proxy following EndpointSlices), or a node (a host process
//     dialing the ClusterIP, the kubelet's probes). Traffic kube-proxy
//     masquerades (NodePort and LoadBalancer traffic with
//     externalTrafficPolicy Cluster, hairpin) carries the address of the
//     node that forwarded it. Either way, a node's address means "that
//     node's rules still sent here": its kube-proxy's lag.
//   - A host process reaching a pod on its own node leaves from the pod
//     bridge: its source is the bridge's address, by the bridge, kubenet
//     and flannel convention the first address of the node's pod CIDR.
//     That address names the node too.
//   - An L7 proxy (ingress-nginx, haproxy, Envoy) opens its own upstream
//     connections: the peer is the proxy's pod (or its node, host network).
//   - Anything else (a cloud load balancer in IP mode, a client outside
//     the cluster) is named by its address.
//
// Local pods are named from the correlator's own pods; pods of other nodes
// only by address and node (the daemon watches this node's pods only).

// Source kinds.
const (
	SourceNode     = "node"
	SourcePod      = "pod"
	SourceExternal = "external"
	SourceOthers   = "others"
	SourceUnknown  = "unknown"
)

// nodeTable is what the Nodes say about addresses: each node's own
// addresses and pod CIDR gateways, and its pod CIDRs.
type nodeTable struct {
	addrs map[netip.Addr]string
	cidrs map[string][]netip.Prefix
}

// Node takes a Node's addresses and pod CIDRs (API input).
func (c *Correlator) Node(u collector.NodeUpdate) {
	n := &c.nodes
	if n.addrs == nil {
		n.addrs, n.cidrs = make(map[netip.Addr]string), make(map[string][]netip.Prefix)
	}
	for a, name := range n.addrs {
		if name == u.Name {
			delete(n.addrs, a)
		}
	}
	delete(n.cidrs, u.Name)
	if u.Deleted {
		return
	}
	for _, a := range u.Addrs {
		n.addrs[a.Unmap()] = u.Name
	}
	for _, p := range u.PodCIDRs {
		p = p.Masked()
		n.addrs[p.Addr().Next()] = u.Name // the pod bridge's address
		n.cidrs[u.Name] = append(n.cidrs[u.Name], p)
	}
}

// nodeOfPodIP names the node whose pod CIDR holds addr.
func (n *nodeTable) nodeOfPodIP(addr netip.Addr) string {
	for name, cidrs := range n.cidrs {
		for _, p := range cidrs {
			if p.Contains(addr) {
				return name
			}
		}
	}
	return ""
}

// peerName names the source behind a peer address as of at.
func (c *Correlator) peerName(addr netip.Addr, at time.Time) (kind, name string) {
	if uid := c.idx.ipOwnerAt(addr, at); uid != "" {
		if p := c.pods[uid]; p != nil && p.Known {
			return SourcePod, "pod " + p.Pod.Namespace + "/" + p.Pod.Name
		}
	}
	if node, ok := c.nodes.addrs[addr]; ok {
		return SourceNode, "node " + node
	}
	if node := c.nodes.nodeOfPodIP(addr); node != "" {
		return SourcePod, "pod " + addr.String() + " on node " + node
	}
	return SourceExternal, "external " + addr.String()
}
