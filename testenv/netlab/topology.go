package netlab

import "fmt"

// The test network's addressing. Node i owns the pod CIDR 10.244.i.0/24 and
// is linked to the shared fabric namespace by a veth pair on 10.240.i.0/24:
//
//	fabric ns   fab<i>  10.240.i.1  ──veth──  uplink 10.240.i.2  node ns i
//	                                          cbr0   10.244.i.1/24 (bridge)
//	pod ns      eth0    10.244.i.N/24 ──veth──  veth… (on cbr0)
//
// The fabric routes 10.244.i.0/24 via 10.240.i.2; a node routes everything
// else via the fabric, so pods on different nodes reach each other; routers
// and clients placed in the fabric reach every pod. Nothing is connected to
// the root namespace, which therefore has no route to the pod network
// (none of 192.0.2.0/24, the machine's own range, is used).
const (
	// PodNetwork covers every node's pod CIDR.
	PodNetwork = "10.244.0.0/16"
	// NodeBridge is the bridge inside a node namespace that pod veths join.
	NodeBridge = "cbr0"
	// NodeUplink is the node namespace's interface towards the fabric.
	NodeUplink = "uplink"
	// MaxNodes bounds the node index (one /24 each in 10.244.0.0/16).
	MaxNodes = 250
)

// PodCIDR is node i's pod CIDR, "10.244.i.0/24".
func PodCIDR(i int) string { return fmt.Sprintf("10.244.%d.0/24", i) }

// PodGateway is node i's bridge address, the pods' default gateway.
func PodGateway(i int) string { return fmt.Sprintf("10.244.%d.1", i) }

// PodIP is the n-th pod address of node i (n from 2 to 254).
func PodIP(i, n int) string { return fmt.Sprintf("10.244.%d.%d", i, n) }

// NodeIP is node i's address on its fabric link: the Node's InternalIP.
func NodeIP(i int) string { return fmt.Sprintf("10.240.%d.2", i) }

// FabricIP is the fabric's address on node i's link.
func FabricIP(i int) string { return fmt.Sprintf("10.240.%d.1", i) }

// NewFabric creates the shared namespace routers and clients live in, with
// forwarding on so pod traffic can cross it between nodes.
func NewFabric(name string) (*NS, error) {
	ns, err := New(name)
	if err != nil {
		return nil, err
	}
	if err := ns.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		_ = ns.Close()
		return nil, err
	}
	return ns, nil
}

// ConnectNode wires node namespace i: its pod bridge, its link to the
// fabric, and the routes both ways. Call it once per node, right after
// creating the node namespace.
func ConnectNode(fabric, node *NS, i int) error {
	if i < 0 || i >= MaxNodes {
		return fmt.Errorf("node index %d out of range [0,%d)", i, MaxNodes)
	}
	if err := node.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		return err
	}
	if err := node.Bridge(NodeBridge, PodGateway(i)+"/24"); err != nil {
		return err
	}
	err := Veth(End{NS: node, Name: NodeUplink, CIDR: NodeIP(i) + "/24"},
		End{NS: fabric, Name: fmt.Sprintf("fab%d", i), CIDR: FabricIP(i) + "/24"})
	if err != nil {
		return err
	}
	if err := node.Route("default", FabricIP(i)); err != nil {
		return err
	}
	return fabric.Route(PodCIDR(i), NodeIP(i))
}
