package correlate

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Routing lag per traffic source. Every router that sends to a pod (each
// node's kube-proxy, each L7 proxy, a cloud load balancer) stops on its own
// schedule once the pod's endpoint is not ready. The kernel records carry
// the peer's address (collector.Event.Remote) of every accept, refusal and
// reset on a reused connection, so the correlator tallies those at or
// after endpoints_not_ready by peer address; RoutingSources names the
// peers (peernames.go) and reports, per source, when it last sent and how
// long after the mark that was.

// peerKind is what a peer's connection came to.
type peerKind uint8

const (
	peerAccepted peerKind = iota
	peerRefused
	peerResetOnReuse
)

// maxPeerAddrs bounds the addresses tallied per termination: past it, the
// rest are tallied together (RoutingSource "other sources"). A pod behind a
// Service is reached from one address per node (kube-proxy keeps clients'
// pod addresses, see peernames.go) and per proxy pod, rarely from hundreds.
const maxPeerAddrs = 256

// peerTally is a termination's per-peer bookkeeping. While
// endpoints_not_ready is unknown (the API event may come after the kernel
// events it precedes) the connections are logged in Pending, bounded by
// maxTrackedCookies; once the mark is known they are folded into ByAddr,
// keeping those at or after the mark, and later ones are added directly.
type peerTally struct {
	Pending []peerEvent                `json:"pending,omitempty"`
	ByAddr  map[netip.Addr]*peerCounts `json:"by_addr,omitempty"`
	// Others tallies the connections of addresses past maxPeerAddrs.
	Others *peerCounts `json:"others,omitempty"`
	// Overflow is set when Pending reached its bound: sources of later
	// connections before the mark was known are missing.
	Overflow bool `json:"overflow,omitempty"`
}

// peerEvent is one connection logged while the mark is unknown.
type peerEvent struct {
	Addr netip.Addr `json:"a"`
	T    int64      `json:"t"`
	Kind peerKind   `json:"k"`
}

// peerCounts are one peer's connections at or after endpoints_not_ready.
type peerCounts struct {
	Accepted     int       `json:"accepted,omitempty"`
	Refused      int       `json:"refused,omitempty"`
	ResetOnReuse int       `json:"reset_on_reuse,omitempty"`
	Last         time.Time `json:"last"`
}

func (p *peerCounts) add(at time.Time, kind peerKind) {
	switch kind {
	case peerAccepted:
		p.Accepted++
	case peerRefused:
		p.Refused++
	case peerResetOnReuse:
		p.ResetOnReuse++
	}
	p.Last = later(p.Last, at)
}

// notePeer tallies one client connection of a termination by the peer's
// address. Connections over loopback (from inside the pod) have no routing
// decision behind them.
func notePeer(t *termState, e *collector.Event, kind peerKind) {
	addr := e.Remote.Addr().Unmap()
	if t == nil || !addr.IsValid() || addr.IsLoopback() {
		return
	}
	if t.Peers == nil {
		t.Peers = &peerTally{}
	}
	mark := t.T.Marks.EndpointsNotReady
	if mark.IsZero() {
		t.Peers.log(addr, e.Time, kind)
		return
	}
	t.Peers.fold(mark)
	if !e.Time.Before(mark) {
		t.Peers.count(addr, e.Time, kind)
	}
}

func (p *peerTally) log(addr netip.Addr, at time.Time, kind peerKind) {
	if len(p.Pending) >= maxTrackedCookies {
		p.Overflow = true
		return
	}
	p.Pending = append(p.Pending, peerEvent{Addr: addr, T: at.UnixNano(), Kind: kind})
}

// fold counts the logged connections at or after mark and forgets the log.
func (p *peerTally) fold(mark time.Time) {
	if p == nil || p.Pending == nil {
		return
	}
	for _, e := range p.Pending {
		if e.T >= mark.UnixNano() {
			p.count(e.Addr, time.Unix(0, e.T), e.Kind)
		}
	}
	p.Pending = nil
}

func (p *peerTally) count(addr netip.Addr, at time.Time, kind peerKind) {
	c := p.ByAddr[addr]
	if c == nil {
		if len(p.ByAddr) >= maxPeerAddrs {
			if p.Others == nil {
				p.Others = &peerCounts{}
			}
			p.Others.add(at, kind)
			return
		}
		if p.ByAddr == nil {
			p.ByAddr = make(map[netip.Addr]*peerCounts)
		}
		c = &peerCounts{}
		p.ByAddr[addr] = c
	}
	c.add(at, kind)
}
