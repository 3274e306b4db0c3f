package netlab

import "fmt"

// The test network's addressing, dual-stack. Node i owns the pod CIDRs
// 10.244.i.0/24 and fd00:10:244:i::/64 (i in hex) and is linked to the
// shared fabric namespace by a veth pair on 10.240.i.0/24 and
// fd00:10:240:i::/64:
//
//	fabric ns   fab<i>  10.240.i.1 fd00:10:240:i::1 ──veth── uplink 10.240.i.2 fd00:10:240:i::2  node ns i
//	                                                        cbr0   10.244.i.1/24 fd00:10:244:i::1/64 (bridge)
//	pod ns      eth0    10.244.i.N/24 fd00:10:244:i::N/64 ──veth── veth… (on cbr0)
//
// The fabric routes each node's pod CIDRs via its uplink; a node routes
// everything else via the fabric, so pods on different nodes reach each
// other; routers and clients placed in the fabric reach every pod, over
// either family. Nothing is connected to the root namespace, which
// therefore has no route to the pod network (none of 192.0.2.0/24, the
// machine's own range, is used; fd00::/8 is unique local, never routed
// beyond these namespaces). IPv6 addresses are added without duplicate
// address detection (a fresh namespace has no duplicate, and DAD would
// hold a pod's address tentative for a second after its start).
const (
	// PodNetwork covers every node's IPv4 pod CIDR, PodNetwork6 every IPv6 one.
	PodNetwork  = "10.244.0.0/16"
	PodNetwork6 = "fd00:10:244::/48"
	// NodeBridge is the bridge inside a node namespace that pod veths join.
	NodeBridge = "cbr0"
	// NodeUplink is the node namespace's interface towards the fabric.
	NodeUplink = "uplink"
	// MaxNodes bounds the node index (one /24 each in 10.244.0.0/16).
	MaxNodes = 250
)

// PodCIDR is node i's IPv4 pod CIDR, "10.244.i.0/24".
func PodCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// PodCIDR6 is node i's IPv6 pod CIDR, "fd00:10:244:i::/64".
func PodCIDR6(i int) string { return fmt.Sprintf("fd00:10:244:%x::/64", i) }

// PodGateway is node i's bridge address, the pods' default gateway.
func PodGateway(i int) string { return fmt.Sprintf("10.244.%d.1", i) }

// PodGateway6 is node i's bridge IPv6 address, the pods' IPv6 gateway.
func PodGateway6(i int) string { return fmt.Sprintf("fd00:10:244:%x::1", i) }

// PodIP is the n-th pod address of node i (n from 2 to 254).
func PodIP(i, n int) string { return fmt.Sprintf("10.244.%d.%d", i, n) }

// PodIP6 is the n-th pod's IPv6 address on node i: the same n as PodIP's.
func PodIP6(i, n int) string { return fmt.Sprintf("fd00:10:244:%x::%x", i, n) }

// NodeIP is node i's address on its fabric link: the Node's InternalIP.
func NodeIP(i int) string { return fmt.Sprintf("10.240.%d.2", i) }

// NodeIP6 is node i's IPv6 address on its fabric link.
func NodeIP6(i int) string { return fmt.Sprintf("fd00:10:240:%x::2", i) }

// FabricIP is the fabric's address on node i's link.
func FabricIP(i int) string { return fmt.Sprintf("10.240.%d.1", i) }

// FabricIP6 is the fabric's IPv6 address on node i's link.
func FabricIP6(i int) string { return fmt.Sprintf("fd00:10:240:%x::1", i) }

// NewFabric creates the shared namespace routers and clients live in, with
// forwarding on so pod traffic can cross it between nodes.
func NewFabric(name string) (*NS, error) {
	ns, err := New(name)
	if err != nil {
		return nil, err
	}
	if err := ns.forward(); err != nil {
		_ = ns.Close()
		return nil, err
	}
	return ns, nil
}

// forward turns on IPv4 and IPv6 forwarding.
func (ns *NS) forward() error {
	if err := ns.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	return ns.Sysctl("net/ipv6/conf/all/forwarding", "1")
}

// ConnectNode wires node namespace i: its pod bridge, its link to the
// fabric, and the routes both ways. Call it once per node, right after
// creating the node namespace.
func ConnectNode(fabric, node *NS, i int) error {
	if i < 0 || i >= MaxNodes {
		return fmt.Errorf("node index %d out of range [0,%d)", i, MaxNodes)
	}
	if err := node.forward(); err != nil {
		return err
	}
	if err := node.Bridge(NodeBridge, PodGateway(i)+"/24", PodGateway6(i)+"/64"); err != nil {
		return err
	}
	err := Veth(End{NS: node, Name: NodeUplink, CIDR: NodeIP(i) + "/24", CIDR6: NodeIP6(i) + "/64"},
		End{NS: fabric, Name: fmt.Sprintf("fab%d", i), CIDR: FabricIP(i) + "/24", CIDR6: FabricIP6(i) + "/64"})
	if err != nil {
		return err
	}
	for _, r := range []struct {
		ns       *NS
		dst, via string
	}{
		{node, "default", FabricIP(i)}, {node, "default", FabricIP6(i)},
		{fabric, PodCIDR(i), NodeIP(i)}, {fabric, PodCIDR6(i), NodeIP6(i)},
	} {
		if err := r.ns.Route(r.dst, r.via); err != nil {
			return err
		}
	}
	return nil
}
