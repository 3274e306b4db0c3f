package node

import (
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
)

// TestDualStackAddrsWatched: both addresses of a dual-stack pod are listed
// in the kernel (probes to either carry their source) and both report
// blackholed SYNs once it terminates; when the next pod takes the IPv6
// address, releasing the first leaves that entry to the next pod.
func TestDualStackAddrsWatched(t *testing.T) {
	n := newScopeNode(t)
	k := &scopeKernel{netns: map[uint32]bool{}, cgroups: map[uint64]bool{}, addrs: map[netip.Addr]bool{}}
	s := NewScopes(k, nopBinder{}, n.root, n.proc, zerolog.Nop())
	defer s.CloseFiles()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	v4, v6 := netip.MustParseAddr("10.244.1.7"), netip.MustParseAddr("fd00:10:244:1::7")
	pod := collector.Pod{UID: scopePod, IP: v4, IPs: []netip.Addr{v4, v6}}
	s.PodUpdate(pod, now)
	check := func(when string, want map[netip.Addr]bool) {
		t.Helper()
		if !maps.Equal(k.addrs, want) {
			t.Errorf("%s: local_dsts %v, want %v", when, k.addrs, want)
		}
	}
	check("running", map[netip.Addr]bool{v4: false, v6: false})
	s.PodUpdate(pod, now.Add(time.Second)) // the same addresses: nothing changes
	s.Terminating(scopePod)
	check("terminating", map[netip.Addr]bool{v4: true, v6: true})

	next := collector.Pod{UID: "0c1d2e3f-0000-4000-8000-00000000000b", IP: netip.MustParseAddr("10.244.1.9"),
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.9"), v6}}
	s.PodUpdate(next, now.Add(2*time.Second))
	s.Release(scopePod)
	check("released, the IPv6 address the next pod's", map[netip.Addr]bool{netip.MustParseAddr("10.244.1.9"): false, v6: false})
	if got := fmt.Sprint(s.addrOwner); got != fmt.Sprintf("map[%s:%s %s:%s]", "10.244.1.9", next.UID, v6, next.UID) {
		t.Errorf("owners %s", got)
	}
}
