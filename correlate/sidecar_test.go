package correlate

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// A pod the way a mesh runs one: container proxy (cgroup cgProxy) listens
// on 15006, where the pod's iptables REDIRECT sends every connection to
// port 8080, and forwards over loopback to container app (cgApp), which
// listens on the wildcard :8080 but is reached only by the proxy.
const (
	cgProxy, cgApp = uint64(7101), uint64(7102)
	proxyPID       = uint32(4200)
	proxyPort      = uint16(15006)
)

var loopback = netip.MustParseAddr("127.0.0.1")

// meshPod is a pod update of the two-container pod.
func meshPod(u collector.PodUpdate) collector.PodUpdate {
	app := u.Pod.Containers[0]
	proxy := app
	proxy.Name = "proxy"
	if proxy.ID != "" {
		proxy.ID = strings.Repeat("d", 64)
	}
	u.Pod.Containers = []collector.Container{proxy, app}
	return u
}

// meshEvent is a socket event of the mesh pod: at local (the pod's
// address, or loopback inside it) from remote, by the task of cgroup cg for
// listen events.
func meshEvent(typ collector.EventType, local, remote netip.AddrPort, cookie uint64, cg uint64, at time.Time) collector.Event {
	e := collector.Event{Type: typ, Time: at, NetnsIno: netA, SockCookie: cookie, Local: local, Remote: remote, CgroupID: cg}
	if typ == collector.EventRefused {
		e.Seq = uint32(at.UnixNano())
	}
	return e
}

// meshBornSeen is the pod born, bound to its netns and both cgroups, with
// its two listeners' listen events seen when opens is set (else the pod
// listened before the daemon watched its namespace).
func meshBornSeen(grace time.Duration, opens bool) []any {
	evs := born(podA, ipA, netA, 0, grace, ms(-60000))
	for i, e := range evs {
		if u, ok := e.(collector.PodUpdate); ok {
			evs[i] = meshPod(u)
		}
	}
	evs = append(evs, bindCgroup{podA, "proxy", cgProxy}, bindCgroup{podA, "app", cgApp})
	if !opens {
		return evs
	}
	return append(evs,
		meshEvent(collector.EventListenOpen, netip.AddrPortFrom(netip.IPv4Unspecified(), port), netip.AddrPort{}, 1, cgApp, ms(-59000)),
		meshEvent(collector.EventListenOpen, netip.AddrPortFrom(netip.IPv4Unspecified(), proxyPort), netip.AddrPort{}, 2, cgProxy, ms(-59000)),
	)
}

// bindCgroup is a BindCgroup call for a named container.
type bindCgroup struct {
	uid, container string
	cgroup         uint64
}

// through is one client request through the proxy at `at` ms: the
// client's accept at the pod's address and the proxy's forward accepted
// by the app over loopback.
func through(n int, at int) []any {
	client := netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), uint16(41000+n))
	fwd := netip.AddrPortFrom(loopback, uint16(51000+n))
	return []any{
		meshEvent(collector.EventAccept, netip.AddrPortFrom(ipA, proxyPort), client, uint64(5000+2*n), 0, ms(at)),
		meshEvent(collector.EventAccept, netip.AddrPortFrom(loopback, port), fwd, uint64(5001+2*n), 0, ms(at)),
	}
}

// TestSidecarStopOrders: a proxy in the pod in front of the app, stopped
// in either order, its listeners' opens seen or not (then their closes say
// where they listened). Proxy first (no preStop, its listener closes at its
// stop signal while the app sleeps in its preStop): the clients' SYNs,
// redirected to 15006, are refused; listener_closed is the proxy's and the
// fix names container proxy. App first (the proxy sleeps in its preStop):
// the app's listener closes at its SIGTERM, the proxy keeps accepting and
// its forwards to 127.0.0.1:8080 are refused inside the pod, never a
// client's refusal; listener_closed is the proxy's close at the end, the
// app's an inner one, and the fix names container app. Either way the
// proxy's forwards are not client connections: accepted after the
// endpoint's removal counts the clients' accepts once.
func TestSidecarStopOrders(t *testing.T) {
	for _, opens := range []bool{true, false} {
		suffix := ""
		if !opens {
			suffix = ", listening before the watch"
		}
		t.Run("proxy first"+suffix, func(t *testing.T) { proxyFirst(t, opens) })
		t.Run("app first"+suffix, func(t *testing.T) { appFirst(t, opens) })
	}
}

const meshGrace = 30 * time.Second

var (
	appListener   = netip.AddrPortFrom(netip.IPv4Unspecified(), port)
	proxyListener = netip.AddrPortFrom(netip.IPv4Unspecified(), proxyPort)
	meshDelete    = meshPod(deleting(podA, ipA, meshGrace, ms(-20), ms(-10)))
)

func initSignal(cg uint64, pid uint32, s uint32, comm string, at time.Time) collector.Event {
	return signal(cg, pid, s, true, comm, at)
}

func listenerClosed(local netip.AddrPort, cookie, cg uint64, at time.Time) collector.Event {
	return meshEvent(collector.EventListenClose, local, netip.AddrPort{}, cookie, cg, at)
}

// refusedOuter is a client's SYN refused at the proxy's redirected port;
// refusedInner the proxy's forward refused by the app over loopback.
func refusedOuter(n, at int) collector.Event {
	return meshEvent(collector.EventRefused, netip.AddrPortFrom(ipA, proxyPort),
		netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), uint16(42000+n)), 0, 0, ms(at))
}

func refusedInner(n, at int) collector.Event {
	return meshEvent(collector.EventRefused, netip.AddrPortFrom(loopback, port),
		netip.AddrPortFrom(loopback, uint16(52000+n)), 0, 0, ms(at))
}

func proxyFirst(t *testing.T, opens bool) {
	{
		evs := append(meshBornSeen(meshGrace, opens), through(0, -30000), through(1, -5000), meshDelete, notReady(podA, ms(-5)),
			initSignal(cgProxy, proxyPID, 10, "haproxy", ms(0)), listenerClosed(proxyListener, 2, cgProxy, ms(3)))
		for i := range 5 {
			evs = append(evs, refusedOuter(i, 100+100*i))
		}
		evs = append(evs, exited(cgProxy, proxyPID, 0, 0, true, ms(600)),
			initSignal(cgApp, initPID, 15, "server", ms(2000)), listenerClosed(appListener, 1, cgApp, ms(2001)),
			exited(cgApp, initPID, 0, 0, true, ms(2010)), gone(podA, ms(2100)))
		got := finish(t, New(Config{}), evs, ms(60000))
		if got.Counts.RefusedAfterSigterm != 5 || got.Counts.RefusedInsidePod != 0 {
			t.Errorf("refused after the stop signal %d, inside the pod %d; want 5 and 0", got.Counts.RefusedAfterSigterm, got.Counts.RefusedInsidePod)
		}
		if !got.Marks.ListenerClosed.Equal(ms(3)) {
			t.Errorf("listener_closed at %v, want +3ms (the proxy's: the clients' listener)", got.Marks.ListenerClosed.Sub(t0))
		}
		want := []ListenerClose{{Container: "proxy", Port: proxyPort, At: ms(3)}, {Container: "app", Port: port, Inner: true, At: ms(2001)}}
		if !slices.Equal(got.Listeners, want) {
			t.Errorf("listeners %+v, want %+v", got.Listeners, want)
		}
		d := diagnosis(got, DiagListenerClosedEarly)
		if !strings.Contains(d.Message, "container proxy's listener :15006 closed") || !strings.Contains(d.Fix, "to container proxy") {
			t.Errorf("diagnosis %q, fix %q: want the proxy's listener and fix named", d.Message, d.Fix)
		}
		if got.Outcome != OutcomeRefused {
			t.Errorf("outcome %s, want %s", got.Outcome, OutcomeRefused)
		}
	}
}

func appFirst(t *testing.T, opens bool) {
	{
		evs := append(meshBornSeen(meshGrace, opens), through(0, -30000), meshDelete, notReady(podA, ms(-5)),
			initSignal(cgApp, initPID, 15, "server", ms(0)), listenerClosed(appListener, 1, cgApp, ms(2)),
			exited(cgApp, initPID, 0, 0, true, ms(20)))
		for i := range 4 {
			// A client through the proxy (accepted, counted once) and
			// the proxy's forward refused inside the pod.
			evs = append(evs, through(10+i, 100+100*i)[0], refusedInner(i, 100+100*i))
		}
		evs = append(evs, initSignal(cgProxy, proxyPID, 10, "haproxy", ms(2500)), listenerClosed(proxyListener, 2, cgProxy, ms(2501)),
			exited(cgProxy, proxyPID, 0, 0, true, ms(2600)), gone(podA, ms(2700)))
		got := finish(t, New(Config{}), evs, ms(60000))
		if got.Counts.RefusedAfterSigterm+got.Counts.RefusedBeforeSigterm != 0 || got.Counts.RefusedInsidePod != 4 {
			t.Errorf("refused after/before the stop signal %d/%d, inside the pod %d; want 0/0 and 4",
				got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.Counts.RefusedInsidePod)
		}
		if want := []PortCount{{Port: port, Count: 4, Last: ms(400)}}; !slices.Equal(got.RefusedInsidePorts, want) {
			t.Errorf("refused inside by port %+v, want %+v", got.RefusedInsidePorts, want)
		}
		if got.Counts.AcceptedAfterEndpointsNotReady != 4 {
			t.Errorf("accepted after the endpoint's removal %d, want 4 (the clients', not the proxy's forwards)", got.Counts.AcceptedAfterEndpointsNotReady)
		}
		if !got.Marks.ListenerClosed.Equal(ms(2501)) {
			t.Errorf("listener_closed at %v, want +2501ms (the proxy's; the app's is inside the pod)", got.Marks.ListenerClosed.Sub(t0))
		}
		want := []ListenerClose{{Container: "app", Port: port, Inner: true, At: ms(2)}, {Container: "proxy", Port: proxyPort, At: ms(2501)}}
		if !slices.Equal(got.Listeners, want) {
			t.Errorf("listeners %+v, want %+v", got.Listeners, want)
		}
		d := diagnosis(got, DiagRefusedInsidePod)
		if !strings.Contains(d.Message, "4 connections refused inside the pod at :8080 (container app)") ||
			!strings.HasPrefix(d.Fix, "add preStop sleep ≥ ") || !strings.Contains(d.Fix, "s to container app: the proxy forwarded to it until 0.41s after the deletion") {
			t.Errorf("diagnosis %q, fix %q: want the app named and its sleep", d.Message, d.Fix)
		}
		if slices.Contains(codes(got), DiagListenerClosedEarly) {
			t.Errorf("diagnoses %v: no client was refused", codes(got))
		}
		if got.Outcome != OutcomeRefused {
			t.Errorf("outcome %s, want %s", got.Outcome, OutcomeRefused)
		}
	}
}

// TestSidecarClosesBeforeDeletionSeen: both containers' preStop hooks
// close their listeners (the proxy's first) before the daemon's watch
// delivers the deletion, with no stop signal yet: the closes wait in the
// pod's early events and are replayed when the termination opens.
// listener_closed is still the proxy's close (the clients' listener), not
// the last close replayed (the app's, inside the pod), and each close
// keeps its record.
func TestSidecarClosesBeforeDeletionSeen(t *testing.T) {
	evs := append(meshBornSeen(meshGrace, true), through(0, -30000), listenerClosed(proxyListener, 2, cgProxy, ms(3)),
		listenerClosed(appListener, 1, cgApp, ms(12)),
		meshPod(deleting(podA, ipA, meshGrace, ms(-20), ms(15))), notReady(podA, ms(16)),
		initSignal(cgProxy, proxyPID, 15, "haproxy", ms(1000)), exited(cgProxy, proxyPID, 0, 0, true, ms(1010)),
		initSignal(cgApp, initPID, 15, "server", ms(2000)), exited(cgApp, initPID, 0, 0, true, ms(2010)), gone(podA, ms(2100)))
	got := finish(t, New(Config{}), evs, ms(60000))
	if !got.Marks.ListenerClosed.Equal(ms(3)) {
		t.Errorf("listener_closed at %v, want +3ms (the proxy's: the clients' listener)", got.Marks.ListenerClosed.Sub(t0))
	}
	want := []ListenerClose{{Container: "proxy", Port: proxyPort, At: ms(3)}, {Container: "app", Port: port, Inner: true, At: ms(12)}}
	if !slices.Equal(got.Listeners, want) {
		t.Errorf("listeners %+v, want %+v", got.Listeners, want)
	}
	if got.Partial {
		t.Errorf("partial %v, want complete", got.PartialReasons)
	}
}
