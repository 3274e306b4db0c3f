package collector

import (
	"net/netip"
	"time"
)

// NodeUpdate is what a Node says about the addresses traffic from it
// carries: its own addresses (status.addresses of type InternalIP and
// ExternalIP) and the pod CIDRs it assigns (spec.podCIDRs). The correlator
// names the sources that sent to a terminating pod with them. Deleted is
// set when the Node is gone from the API.
type NodeUpdate struct {
	Seen     time.Time
	Name     string
	Addrs    []netip.Addr
	PodCIDRs []netip.Prefix
	Deleted  bool
}
