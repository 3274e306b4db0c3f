package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// TestBlackholed: a pod's veth is deleted (a CNI DEL) while a client
// behind the node keeps dialing its address, as a router whose routing
// has not converged does. On a node bridge with a live neighbour pod the
// SYNs are flooded to it (it drops its copies as OTHERHOST); alone on
// the bridge, they wait for a neighbour resolution that fails
// (NEIGH_FAILED, or QUEUE_PURGE when the entry goes). Either way every
// attempt the client saw fail is reported, each of its drops an event
// with the attempt's addresses and sequence number; the attempts to the
// live neighbour, and those before the mark, none.
//
// Over IPv6 (dual-stack pods, dialed at their IPv6 addresses) the same:
// the kernel frees the SYNs queued for a neighbour that never answered
// without a reason there (NOT_SPECIFIED), which the program takes for
// IPv6 segments.
func TestBlackholed(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		for name, neighbour := range map[string]bool{"flooded": true, "unresolved": false} {
			if ipv6 {
				name += "-ipv6"
			}
			t.Run(name, func(t *testing.T) { testBlackholed(t, neighbour, ipv6) })
		}
	}
}

func testBlackholed(t *testing.T, neighbour, ipv6 bool) {
	const attempts = 12
	fabric, node := newNetns(t, "dwk-fab"), newNetns(t, "dwk-node")
	gone, live := newNetns(t, "dwk-gone"), newNetns(t, "dwk-live")
	must(t, netlab.ConnectNode(fabric, node, 7))
	goneIP, liveIP, fabricIP := netlab.PodIP(7, 2), netlab.PodIP(7, 3), netlab.FabricIP(7)
	if ipv6 {
		goneIP, liveIP, fabricIP = netlab.PodIP6(7, 2), netlab.PodIP6(7, 3), netlab.FabricIP6(7)
	}
	for i, p := range []struct {
		ns     *netlab.NS
		v4, v6 string
	}{{gone, netlab.PodIP(7, 2), netlab.PodIP6(7, 2)}, {live, netlab.PodIP(7, 3), netlab.PodIP6(7, 3)}} {
		must(t, netlab.Veth(netlab.End{NS: p.ns, Name: "eth0", CIDR: p.v4 + "/24", CIDR6: p.v6 + "/64"},
			netlab.End{NS: node, Name: fmt.Sprintf("veth%d", i), Master: netlab.NodeBridge}))
		must(t, p.ns.Route("default", netlab.PodGateway(7)))
		must(t, p.ns.Route("default", netlab.PodGateway6(7)))
	}
	k := openTestKernel(t, Options{})
	if st := probeState(k, "blackhole"); st != ProbeAttached {
		t.Fatalf("probe blackhole is %s", st)
	}
	goneAddr, liveAddr := netip.MustParseAddr(goneIP), netip.MustParseAddr(liveIP)
	must(t, k.WatchAddr(goneAddr))
	must(t, k.WatchAddr(liveAddr))
	// Both answer while they are there (a refusal: nothing listens), so
	// the node's neighbour entries are resolved, as for pods in service.
	if got := dialAll(t, fabric, goneIP, 2); got[syscall.ECONNREFUSED] != 2 {
		t.Fatalf("dials to the pod before its network went: %v", got)
	}
	if got := dialAll(t, fabric, liveIP, 2); got[syscall.ECONNREFUSED] != 2 {
		t.Fatalf("dials to the neighbour: %v", got)
	}
	if !neighbour {
		must(t, live.IP("link del eth0"))
	}
	must(t, k.BlackholeAddr(goneAddr))
	must(t, gone.IP("link del eth0"))
	failed := dialAll(t, fabric, goneIP, attempts)
	if failed[nil] != attempts {
		t.Fatalf("dials after the pod's network went: %v, want %d failed without a refusal", failed, attempts)
	}
	if got := dialAll(t, fabric, liveIP, 3); neighbour && got[syscall.ECONNREFUSED] != 3 {
		t.Fatalf("dials to the neighbour afterwards: %v", got)
	}
	// The last queued SYNs are dropped when the resolution fails, 3 s
	// after it began.
	evs := collect(k, 15*time.Second, func(evs []collector.Event) bool { return distinctAttempts(evs) >= attempts })
	evs = append(evs, drain(k, 4*time.Second)...)
	reasons := map[uint32]int{}
	for _, ev := range evs {
		if ev.Type != collector.EventBlackholed {
			continue
		}
		if ev.Local.Addr() != goneAddr || ev.Local.Port() != closedPort || ev.Remote.Addr().String() != fabricIP {
			t.Errorf("blackholed event %+v: want %s:%d from %s", ev, goneIP, closedPort, fabricIP)
		}
		reasons[ev.Reason]++
	}
	if got := distinctAttempts(evs); got != attempts {
		t.Fatalf("%d distinct attempts reported blackholed (drop reasons %v), want %d", got, reasons, attempts)
	}
	t.Logf("%d attempts, %d drops by reason %v", attempts, countType(evs, collector.EventBlackholed, 0), reasons)
}

// distinctAttempts counts the blackholed attempts among evs by client
// socket and sequence number, as correlate does.
func distinctAttempts(evs []collector.Event) int {
	seen := map[string]bool{}
	for _, ev := range evs {
		if ev.Type == collector.EventBlackholed {
			seen[fmt.Sprintf("%s/%d", ev.Remote, ev.Seq)] = true
		}
	}
	return len(seen)
}

// dialAll dials addr's closed port n times from ns, one at a time, each
// bounded by 1 s as a router's dial is, and tallies the outcomes:
// ECONNREFUSED, or nil for a dial that failed otherwise (a timeout, no
// route to host).
func dialAll(t *testing.T, ns *netlab.NS, addr string, n int) map[error]int {
	t.Helper()
	got := map[error]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := ns.Dial(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(closedPort)))
		cancel()
		switch {
		case err == nil:
			c.Close()
			t.Fatalf("a dial to %s:%d connected", addr, closedPort)
		case errors.Is(err, syscall.ECONNREFUSED):
			got[syscall.ECONNREFUSED]++
		default:
			got[nil]++
		}
	}
	return got
}
