package correlate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

var (
	ipA6 = netip.MustParseAddr("fd00:10:244:1::7")
	ipB6 = netip.MustParseAddr("fd00:10:244:1::8")
)

// dualStack gives a pod update the addresses of a dual-stack pod: ip
// first (status.podIP), then ip6.
func dualStack(evs []any, ip6 netip.Addr) []any {
	for i, e := range evs {
		if u, ok := e.(collector.PodUpdate); ok {
			u.Pod.IPs = []netip.Addr{u.Pod.IP, ip6}
			evs[i] = u
		}
	}
	return evs
}

// TestDualStackPod: a dual-stack pod's refusals count at either address,
// its blackholed SYNs are attributed by its IPv6 address as by its IPv4
// one, and in a namespace whose inode another pod reuses, a refusal
// addressed to an IPv6 address the pod does not have is not its own
// (the family check of a single-stack pod would have let it through).
func TestDualStackPod(t *testing.T) {
	grace := 30 * time.Second
	refusedAt := func(ip netip.Addr, at time.Time) collector.Event {
		return sock(collector.EventRefused, netA, ip, 0, at)
	}
	drop6 := func(cport uint16, seq uint32, at time.Time) collector.Event {
		e := drop(cport, seq, 0, at)
		e.Local = netip.AddrPortFrom(ipA6, port)
		e.Remote = netip.AddrPortFrom(netip.MustParseAddr("fd00:10:240:2::1"), cport)
		return e
	}
	evs := dualStack(born(podA, ipA, netA, cgA, grace, ms(-60000)), ipA6)
	del := deleting(podA, ipA, grace, ms(-20), ms(-10))
	del.Pod.IPs = []netip.Addr{ipA, ipA6}
	evs = append(evs, openListener(netA, ms(-59000)), del,
		signal(cgA, initPID, 15, true, "server", ms(0)), closeListener(netA, ms(70)),
		refusedAt(ipA, ms(100)), refusedAt(ipA6, ms(110)), refusedAt(ipA6, ms(120)),
		refusedAt(ipB6, ms(130)), // another pod's address in a reused inode
		exited(cgA, initPID, 143, 15, true, ms(150)), gone(podA, ms(200)),
		drop6(40001, 1, ms(300)), drop6(40001, 1, ms(1300)), // one SYN and its retransmission
		drop6(40002, 2, ms(400)))
	c := New(Config{Blackholes: true, BlackholeWindow: 5 * time.Second})
	got := finish(t, c, evs, ms(1300+5100))
	if got.Counts.RefusedAfterSigterm != 3 {
		t.Errorf("refused after the stop signal %d, want 3 (one at %s, two at %s; not the one to %s)", got.Counts.RefusedAfterSigterm, ipA, ipA6, ipB6)
	}
	if got.Counts.ConnectionsBlackholed != 2 {
		t.Errorf("blackholed %d, want 2 (ports 40001 and 40002 to %s)", got.Counts.ConnectionsBlackholed, ipA6)
	}
	if got.PodIP != ipA || len(got.PodIPs) != 2 || got.PodIPs[1] != ipA6 {
		t.Errorf("termination's addresses %s %v, want %s and [%s %s]", got.PodIP, got.PodIPs, ipA, ipA, ipA6)
	}
}

// TestAddressedTo: which local addresses of a namespace's socket events a
// pod can own, single-stack (either family) and dual-stack.
func TestAddressedTo(t *testing.T) {
	v4 := collector.Pod{IP: ipA}
	v6 := collector.Pod{IP: ipA6}
	dual := collector.Pod{IP: ipA, IPs: []netip.Addr{ipA, ipA6}}
	unknown := collector.Pod{}
	for _, c := range []struct {
		name  string
		pod   collector.Pod
		local netip.Addr
		want  bool
	}{
		{"v4 own", v4, ipA, true}, {"v4 other", v4, ipB, false}, {"v4 mapped own", v4, netip.AddrFrom16(ipA.As16()), true},
		{"v4 any v6 (status lists no v6)", v4, ipB6, true}, {"v4 wildcard", v4, netip.IPv6Unspecified(), true},
		{"v6 own", v6, ipA6, true}, {"v6 other", v6, ipB6, false}, {"v6 any v4", v6, ipB, true}, {"v6 loopback", v6, netip.IPv6Loopback(), true},
		{"dual own v4", dual, ipA, true}, {"dual own v6", dual, ipA6, true},
		{"dual other v4", dual, ipB, false}, {"dual other v6", dual, ipB6, false},
		{"no address yet", unknown, ipB6, true},
	} {
		if got := addressedTo(&c.pod, c.local); got != c.want {
			t.Errorf("%s: addressedTo(%v, %s) = %t, want %t", c.name, c.pod.Addrs(), c.local, got, c.want)
		}
	}
}
