package correlate

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Peer addresses of the routing-source tests: node-1 (this node, pod CIDR
// 10.244.1.0/24, the pods' bridge 10.244.1.1), node-2 (InternalIP
// 10.240.2.2, pod CIDR 10.244.2.0/24) and its pod 10.244.2.7 (an L7 proxy).
var (
	nodes = []any{
		collector.NodeUpdate{Name: "node-1", Addrs: addrs("10.240.1.2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
		collector.NodeUpdate{Name: "node-2", Addrs: addrs("10.240.2.2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}},
	}
	bridge1 = "10.244.1.1:41000"
	node2   = "10.240.2.2:42000"
	proxy2  = "10.244.2.7:43000"
	outside = "192.0.2.7:44000"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// fromPeer sets the peer of a kernel event.
func fromPeer(peer string, e collector.Event) collector.Event {
	e.Remote = netip.MustParseAddrPort(peer)
	return e
}

// acceptsFrom are n accepts from peer every `every` ms from `at` ms.
func acceptsFrom(peer string, n, at, every int) []any {
	var evs []any
	for i := range n {
		t := at + i*every
		evs = append(evs, fromPeer(peer, accept(netA, uint64(5000+t), ms(t))))
	}
	return evs
}

func refusedFrom(peer string, n, at, every int) []any {
	var evs []any
	for _, e := range refusals(netA, ipA, n, at, every) {
		evs = append(evs, fromPeer(peer, e.(collector.Event)))
	}
	return evs
}

// routed is the seeds' protocol server (listener closed at +1.5 s) with
// the given traffic, the endpoint not ready at +0.3 s: processed in
// order, or after all the traffic when late.
func routed(late bool, traffic ...any) []any {
	grace := 30 * time.Second
	evs := []any{nodes,
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		born(podB, ipB, netB, cgB, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
	}
	if !late {
		evs = append(evs, notReady(podA, ms(300)))
	}
	evs = append(evs, traffic...)
	if late {
		evs = append(evs, notReady(podA, ms(300)))
	}
	return append(evs, closeListener(netA, ms(1500)), exited(cgA, initPID, 0, 0, true, ms(2410)), gone(podA, ms(2600)))
}

func TestRoutingSources(t *testing.T) {
	two := []any{
		acceptsFrom(bridge1, 10, 100, 50), // node-1 (its kube-proxy DNAT from the host), until +0.55 s: 6 after the mark
		acceptsFrom(proxy2, 20, 100, 40),  // node-2's proxy pod, until +0.86 s: 15 after the mark
		fromPeer(proxy2, rst(77, reasonTimewait, ms(1000))),
	}
	for _, tc := range []struct {
		name    string
		steps   []any
		want    []string // source accepted/refused/reset last
		slowest string
	}{
		{"kube-proxy and a proxy pod", routed(false, two...),
			[]string{"pod 10.244.2.7 on node node-2 [10.244.2.7] 15/0/1 1s 700ms", "node node-1 [10.244.1.1] 6/0/0 550ms 250ms"},
			"pod 10.244.2.7 on node node-2"},
		{"the mark processed after the traffic", routed(true, two...),
			[]string{"pod 10.244.2.7 on node node-2 [10.244.2.7] 15/0/1 1s 700ms", "node node-1 [10.244.1.1] 6/0/0 550ms 250ms"},
			"pod 10.244.2.7 on node node-2"},
		{"a node's address, a local pod, an outside client; refusals", routed(false,
			acceptsFrom(node2, 3, 400, 100), refusedFrom(node2, 2, 1600, 100),
			acceptsFrom(ipB.String()+":45000", 1, 310, 1), acceptsFrom(outside, 1, 320, 1)),
			[]string{"node node-2 [10.240.2.2] 3/2/0 1.7s 1.4s", "external 192.0.2.7 [192.0.2.7] 1/0/0 320ms 20ms", "pod shop/web-uid-b [10.244.1.8] 1/0/0 310ms 10ms"},
			"node node-2"},
		{"node address and bridge are one node", routed(false, acceptsFrom(bridge1, 1, 400, 1), acceptsFrom("10.240.1.2:1", 1, 500, 1)),
			[]string{"node node-1 [10.240.1.2 10.244.1.1] 2/0/0 500ms 200ms"}, "node node-1"},
		{"only before the mark", routed(false, acceptsFrom(outside, 3, 100, 50)), []string{"unknown"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := finish(t, New(Config{}), tc.steps, ms(60000))
			if rows := sourceRows(got.RoutingSources); !slices.Equal(rows, tc.want) && !(tc.want[0] == "unknown" && rows == nil) {
				t.Errorf("routing sources\n%q\nwant\n%q", rows, tc.want)
			}
			if s, ok := got.SlowestSource(); s.Source != tc.slowest || ok != (tc.slowest != "") {
				t.Errorf("slowest %q %v, want %q", s.Source, ok, tc.slowest)
			}
		})
	}
}

func sourceRows(ss []RoutingSource) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s %v %d/%d/%d %v %v", s.Source, s.Addrs, s.Accepted, s.Refused, s.ResetOnReuse, s.Last.Sub(t0), s.Lag))
	}
	return out
}

// TestRoutingSourcesBounded: 10 outside clients, the i-th last sending at
// +0.4 s + i×10 ms: the 7 slowest are listed, the 3 others summed.
func TestRoutingSourcesBounded(t *testing.T) {
	var traffic []any
	for i := range 10 {
		traffic = append(traffic, acceptsFrom(fmt.Sprintf("192.0.2.%d:1000", 10+i), 2, 300+i*10, 100))
	}
	got := finish(t, New(Config{}), routed(false, traffic...), ms(60000)).RoutingSources
	if len(got) != maxRoutingSources || got[0].Source != "external 192.0.2.19" || got[0].Lag != 190*time.Millisecond {
		t.Fatalf("sources %q, want %d, the slowest external 192.0.2.19 at 190ms", sourceRows(got), maxRoutingSources)
	}
	others := got[len(got)-1]
	if others.Kind != SourceOthers || others.Source != "3 other sources" || others.Accepted != 6 || others.Lag != 120*time.Millisecond {
		t.Errorf("others %+v, want 3 sources, 6 accepted, 120ms", others)
	}
}

// TestSlowestSourceFix: the preStop sleep covers the slowest source, whose
// last request came on a reused connection (no connection attempt), and
// the fix names it: 1.61 s after the deletion + 0.5 s is 3 s (the last
// connection attempt alone, +0.5 s, would give 2 s).
func TestSlowestSourceFix(t *testing.T) {
	steps := routed(false, acceptsFrom(bridge1, 3, 300, 100), fromPeer(proxy2, rst(77, reasonTimewait, ms(1600))))
	// A naive server: the listener closes right after the stop signal.
	steps = slices.DeleteFunc(steps, func(s any) bool {
		e, ok := s.(collector.Event)
		return ok && e.Type == collector.EventListenClose
	})
	steps = append(steps[:len(steps)-2], append([]any{closeListener(netA, ms(5))}, steps[len(steps)-2:]...)...)
	d := diagnosis(finish(t, New(Config{}), steps, ms(60000)), DiagNoDrainDelay)
	want := "add preStop sleep ≥ 3s or keep serving that long after the stop signal; slowest source: pod 10.244.2.7 on node node-2, 1.3s after the endpoint became not ready"
	if d.Fix != want {
		t.Errorf("fix %q, want %q", d.Fix, want)
	}
}
