package e2e_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// Two routers in front of the same Service, each with its own lag: one in
// the fabric (the pods see it as the fabric's address on the node's link:
// an outside source), one in the node's own namespace (the pods see it as
// the node's pod bridge: the node, as kube-proxy's DNAT of a host process
// would look).
const (
	fastLag      = 500 * time.Millisecond
	slowLag      = 1500 * time.Millisecond
	sourcesEvery = 20 * time.Millisecond
	sourcesFor   = 5 * time.Second
)

// TestRoutingLagPerSource: a protocol server (drain delay 1 s) with
// clients through both routers; one pod is deleted. For each router,
// drainwatch's routing source has exactly the connections that router's
// records send to the victim at or after endpoints_not_ready (accepted
// and refused apart; a connection dialed across the mark may count on
// either side of it, a dial the pod reset as accepted or not), and its
// last send within the router's record of the last one (accepted before
// the dial, dialed after the SYN).
func TestRoutingLagPerSource(t *testing.T) {
	c, ds := startCluster(t, "e2rs-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-sources")
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 2, "--drain-delay=1s"))
	waitWatching(ctx, t, ds, pods)
	fast, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: fastLag})
	if err != nil {
		t.Fatal(err)
	}
	nodeNS := c.Nodes[0].NodeNS()
	slow := startRouterIn(ctx, t, c, nodeNS, ns, slowLag)
	for (len(fast.Backends()) != 2 || len(slow.Backends()) != 2) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	loads := []client.Load{
		{Dial: c.Dial, Target: fast.Addr(), Path: "/work", Interval: sourcesEvery, Count: int(sourcesFor / sourcesEvery), Duration: sourcesFor, Timeout: time.Second},
		{Dial: nodeNS.Dial, Target: slow.Addr(), Path: "/work", Interval: sourcesEvery, Count: int(sourcesFor / sourcesEvery), Duration: sourcesFor, Timeout: time.Second},
	}
	done := make(chan []client.Request, len(loads))
	for _, l := range loads {
		go func() { reqs, _ := l.Run(ctx); done <- reqs }()
	}
	time.Sleep(time.Second)
	victim := &pods[0]
	if err := c.DeletePod(ctx, victim.Namespace, victim.Name); err != nil {
		t.Fatal(err)
	}
	for range loads {
		<-done
	}
	got := waitComplete(ctx, t, ds[0], string(victim.UID))
	mark := got.Marks.EndpointsNotReady
	if mark.IsZero() {
		t.Fatalf("no endpoints_not_ready: %+v", got.Marks)
	}
	t.Logf("drainwatch: %+v; diagnoses %v", got.RoutingSources, codes(got))
	victimAddr := cluster.PodAddr(victim, cluster.ServerPort)
	for _, src := range []struct {
		name string
		r    *router.Router
		lag  time.Duration
	}{
		{"external " + netlab.FabricIP(1), fast, fastLag},
		{"node " + c.NodeNames[0], slow, slowLag},
	} {
		want := routerSends(src.r.Conns(), victimAddr, mark)
		s, ok := sourceNamed(got, src.name)
		t.Logf("%s (router lag %v): router sent %d accepted, %d refused at or after the mark (%d accepted, %d refused straddling it; %d dials reset, %d unreached), last between %v and %v after it; drainwatch %d accepted, %d refused, last %v after it",
			src.name, src.lag, want.accepted, want.refused, want.straddlingAccepted, want.straddlingRefused, want.resetDials, want.unreached,
			want.lastFrom.Sub(mark), want.lastTo.Sub(mark), s.Accepted, s.Refused, s.Lag)
		if !ok {
			t.Errorf("no routing source %q", src.name)
			continue
		}
		if !want.counts(s) {
			t.Errorf("%s: drainwatch %d accepted %d refused, the router sent %d accepted %d refused after the mark (+%d/%d straddling it, %d dials reset)",
				src.name, s.Accepted, s.Refused, want.accepted, want.refused, want.straddlingAccepted, want.straddlingRefused, want.resetDials)
		}
		if s.Last.Before(want.lastFrom) || s.Last.After(want.lastTo) {
			t.Errorf("%s: last send %v, the router's last connection to the victim was accepted at %v and dialed by %v",
				src.name, s.Last.Sub(mark), want.lastFrom.Sub(mark), want.lastTo.Sub(mark))
		}
	}
	if len(got.RoutingSources) != 2 {
		t.Errorf("routing sources %+v, want the two routers only", got.RoutingSources)
	}
	if slowest, _ := got.SlowestSource(); slowest.Source != "node "+c.NodeNames[0] {
		t.Errorf("slowest source %q, want the node's router", slowest.Source)
	}
}

// startRouterIn starts a router inside ns (listening on its loopback,
// dialing the pods from there) for the Service web of namespace.
func startRouterIn(ctx context.Context, t *testing.T, c *cluster.Cluster, ns *netlab.NS, namespace string, delay time.Duration) *router.Router {
	t.Helper()
	ln, err := ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.Start(ctx, router.Config{Client: c.Client, Namespace: namespace, Service: "web", Delay: delay,
		Listener: ln, Dial: ns.Dial, Log: zerolog.Nop()})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	return r
}

// sends is what a router's records say it sent to one backend from a mark
// on: connections whose SYN was surely at or after the mark (accepted from
// the client at or after it), those straddling it (accepted before, dialed
// after: the SYN's side is unknown to the router; a dial on a veth link
// takes well under a millisecond, so they are rare), and the window of the
// last answered connection's SYN (a dial that timed out, once the pod's
// network namespace is gone, reached no socket: no kernel record).
type sends struct {
	accepted, refused int
	// straddlingAccepted and straddlingRefused straddle the mark.
	straddlingAccepted, straddlingRefused int
	// resetDials are dials the pod reset before they returned (a handshake
	// its closing listener reset): its kernel may have accepted them.
	// Dials that timed out or found no route reached no socket.
	resetDials int
	// unreached are the other failed dials (timeouts, no route): logged,
	// never counted.
	unreached        int
	lastFrom, lastTo time.Time
}

func routerSends(conns []router.Conn, backend string, mark time.Time) sends {
	var s sends
	for _, c := range conns {
		if c.Backend != backend || c.Dialed.Before(mark) {
			continue
		}
		answered := c.Outcome == router.Proxied || c.Outcome == router.Refused
		if answered && c.Accepted.After(s.lastFrom) {
			s.lastFrom, s.lastTo = c.Accepted, c.Dialed
		}
		straddling := c.Accepted.Before(mark)
		switch {
		case c.Outcome == router.Refused && straddling:
			s.straddlingRefused++
		case c.Outcome == router.Refused:
			s.refused++
		case c.Outcome == router.Proxied && straddling:
			s.straddlingAccepted++
		case c.Outcome == router.Proxied:
			s.accepted++
		case c.Outcome == router.DialError && strings.Contains(c.Err, syscall.ECONNRESET.Error()):
			s.resetDials++
		case c.Outcome == router.DialError:
			s.unreached++
		}
	}
	return s
}

// counts says whether a source's counts are the router's: equal, but for
// each connection straddling the mark, which may fall on either side, and
// each reset dial, which may have been accepted.
func (s sends) counts(src correlate.RoutingSource) bool {
	within := func(got, want, slack int) bool { return got >= want && got <= want+slack }
	return within(src.Accepted, s.accepted, s.straddlingAccepted+s.resetDials) &&
		within(src.Refused, s.refused, s.straddlingRefused)
}

// sourceNamed finds a termination's routing source by name.
func sourceNamed(t correlate.Termination, name string) (correlate.RoutingSource, bool) {
	for _, s := range t.RoutingSources {
		if s.Source == name {
			return s, true
		}
	}
	return correlate.RoutingSource{}, false
}
