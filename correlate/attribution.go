package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Attribution maps kernel events to pods (docs/design.md, "Attribution"). Socket
// events run in softirq, so they are attributed by the socket's network
// namespace and, failing that, by the pod IP they were addressed to; process
// events by the target task's cgroup. Entries live until the pod's
// termination is complete, past the API delete, so the tail of a drain still
// finds its pod.

// cgroupRef names the container a cgroup belongs to.
type cgroupRef struct {
	UID       string `json:"uid"`
	Container string `json:"container"`
}

// ipOwner is one pod that held an address, from the first time the daemon
// saw it with that address. Pod IPs are reused: the owner of an address at
// time t is the latest pod seen with it no later than t.
type ipOwner struct {
	UID  string    `json:"uid"`
	From time.Time `json:"from"`
}

type index struct {
	Netns   map[uint32]string        `json:"netns"`
	Cgroups map[uint64]cgroupRef     `json:"cgroups"`
	IPs     map[netip.Addr][]ipOwner `json:"ips"`
}

func newIndex() index {
	return index{
		Netns:   make(map[uint32]string),
		Cgroups: make(map[uint64]cgroupRef),
		IPs:     make(map[netip.Addr][]ipOwner),
	}
}

// ownIP records that uid holds ip as of seen, unless it already does.
func (x *index) ownIP(ip netip.Addr, uid string, seen time.Time) {
	if !ip.IsValid() {
		return
	}
	owners := x.IPs[ip]
	for _, o := range owners {
		if o.UID == uid {
			return
		}
	}
	x.IPs[ip] = append(owners, ipOwner{UID: uid, From: seen})
}

// ipOwnerAt returns the pod that held ip at t: the latest owner seen no
// later than t, or the earliest one when t precedes them all (the daemon
// learnt the address late).
func (x *index) ipOwnerAt(ip netip.Addr, t time.Time) string {
	owners := x.IPs[ip]
	if len(owners) == 0 {
		return ""
	}
	best := -1
	for i, o := range owners {
		if !o.From.After(t) && (best < 0 || o.From.After(owners[best].From)) {
			best = i
		}
	}
	if best < 0 {
		// Owners are appended as they are seen, so the first is the earliest.
		best = 0
	}
	return owners[best].UID
}

// forget drops every entry of a pod whose termination is complete.
func (x *index) forget(p *podState) {
	uid := p.Pod.UID
	if x.Netns[p.NetnsIno] == uid {
		delete(x.Netns, p.NetnsIno)
	}
	for _, id := range p.Cgroups {
		if x.Cgroups[id].UID == uid {
			delete(x.Cgroups, id)
		}
	}
	for ip, owners := range x.IPs {
		kept := owners[:0]
		for _, o := range owners {
			if o.UID != uid {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(x.IPs, ip)
		} else {
			x.IPs[ip] = kept
		}
	}
}

// addressedTo says whether a socket event of a pod's network namespace can
// be the pod's: its local address is one of the pod's IPs (a dual-stack
// pod has one of each family), loopback, the wildcard (a listener bound to
// 0.0.0.0 or ::, as nginx's `listen 8080`, Node.js and most servers bind),
// or of a family the pod has no address of as far as the API said (an
// address the status does not list yet). A namespace inode is reused once the namespace is freed: a
// restarted daemon may still hold the binding of a pod that went away while
// it was down, and the next pod's namespace may get that inode; its events
// name the next pod's address. A wildcard listener names no address: in
// that window it goes to the stale binding, whose listener set then does
// not know it (the next pod's set is incomplete, which listenClose allows
// for).
func addressedTo(pod *collector.Pod, local netip.Addr) bool {
	local = local.Unmap()
	if !local.IsValid() || local.IsLoopback() || local.IsUnspecified() {
		return true
	}
	sameFamily := false
	for _, ip := range pod.Addrs() {
		if ip == local {
			return true
		}
		sameFamily = sameFamily || ip.Is4() == local.Is4()
	}
	return !sameFamily
}

// attribute finds the pod (and, for process events, the container) of e.
func (c *Correlator) attribute(e *collector.Event) (p *podState, container string) {
	if e.Type == collector.EventBlackholed {
		// Dropped outside the pod (the node's namespace, another pod's
		// for a flooded copy): by the address it was sent to only.
		if uid := c.idx.ipOwnerAt(e.Local.Addr().Unmap(), e.Time); uid != "" {
			return c.pods[uid], ""
		}
		return nil, ""
	}
	if !e.Type.Kind().Process { // a socket event: by netns and address
		if uid, ok := c.idx.Netns[e.NetnsIno]; ok && e.NetnsIno != 0 {
			if p := c.pods[uid]; p == nil || addressedTo(&p.Pod, e.Local.Addr()) {
				return p, c.listenerContainer(uid, e)
			}
		}
		if uid := c.idx.ipOwnerAt(e.Local.Addr(), e.Time); uid != "" {
			return c.pods[uid], c.listenerContainer(uid, e)
		}
		return nil, ""
	}
	if ref, ok := c.idx.Cgroups[e.CgroupID]; ok && e.CgroupID != 0 {
		return c.pods[ref.UID], ref.Container
	}
	if uid, ok := c.idx.Netns[e.NetnsIno]; ok && e.NetnsIno != 0 {
		return c.pods[uid], ""
	}
	return nil, ""
}

// listenerContainer names the container of pod uid whose task opened or
// closed a listener (listen events run in that task's context and carry
// its cgroup); "" for other socket events and for a cgroup of no
// container of the pod.
func (c *Correlator) listenerContainer(uid string, e *collector.Event) string {
	if e.Type != collector.EventListenOpen && e.Type != collector.EventListenClose || e.CgroupID == 0 {
		return ""
	}
	if ref, ok := c.idx.Cgroups[e.CgroupID]; ok && ref.UID == uid {
		return ref.Container
	}
	return ""
}
