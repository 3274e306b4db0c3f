package correlate

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Hand-built event sequences. Times are milliseconds from t0, the moment of
// the stop signal in most scenarios; one sequence mixes API and kernel
// events in the order the correlator processes them.

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

const (
	podA, podB = "uid-a", "uid-b"
	netA, netB = uint32(4026532001), uint32(4026532002)
	cgA, cgB   = uint64(7001), uint64(7002)
	initPID    = uint32(4100)
)

var (
	ipA  = netip.MustParseAddr("10.244.1.7")
	ipB  = netip.MustParseAddr("10.244.1.8")
	port = uint16(8080)
)

// bind is a BindNetns/BindCgroup call of the daemon.
type bind struct {
	uid    string
	netns  uint32
	cgroup uint64
}

// netnsDestroyed is a NetnsGone call.
type netnsDestroyed struct {
	ino uint32
	at  time.Time
}

// gap is a KernelGap call.
type gap struct {
	reason   string
	from, to time.Time
}

// gapEnd is an EndGap call.
type gapEnd struct {
	reason string
	to     time.Time
}

func feed(c *Correlator, evs []any) {
	for _, e := range evs {
		switch e := e.(type) {
		case collector.PodUpdate:
			c.Pod(e)
		case collector.PodDeleted:
			c.PodDeleted(e)
		case collector.KubeletEvent:
			c.Kubelet(e)
		case collector.EndpointUpdate:
			c.Endpoint(e)
		case collector.NodeUpdate:
			c.Node(e)
		case collector.Event:
			c.Kernel(e)
		case bindCgroup:
			c.BindCgroup(e.uid, e.container, e.cgroup)
		case bind:
			if e.netns != 0 {
				c.BindNetns(e.uid, e.netns)
			}
			if e.cgroup != 0 {
				c.BindCgroup(e.uid, "app", e.cgroup)
			}
		case gap:
			c.KernelGap(e.reason, e.from, e.to)
		case gapEnd:
			c.EndGap(e.reason, e.to)
		case netnsDestroyed:
			c.NetnsGone(e.ino, e.at)
		case []any:
			feed(c, e)
		default:
			panic("feed: unknown step")
		}
	}
}

func podOf(uid string, ip netip.Addr, grace time.Duration, started bool) collector.Pod {
	ct := collector.Container{Name: "app"}
	if started {
		ct.ID = strings.Repeat("c", 64)
	}
	return collector.Pod{UID: uid, Namespace: "shop", Name: "web-" + uid, Node: "node-1", IP: ip,
		Workload:    collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"},
		GracePeriod: grace, Containers: []collector.Container{ct}, Ready: true}
}

// born is a pod seen pending (so every listener it opens is observed), then
// running, bound to its netns and cgroup.
func born(uid string, ip netip.Addr, ino uint32, cg uint64, grace time.Duration, seen time.Time) []any {
	return []any{
		collector.PodUpdate{Seen: seen, Pod: podOf(uid, ip, grace, false)},
		bind{uid, ino, cg},
		collector.PodUpdate{Seen: seen.Add(time.Millisecond), Pod: podOf(uid, ip, grace, true)},
	}
}

// deleting is the pod update carrying the deletion, requested at requested.
func deleting(uid string, ip netip.Addr, grace time.Duration, requested, seen time.Time) collector.PodUpdate {
	p := podOf(uid, ip, grace, true)
	p.DeletionTimestamp, p.DeletionGracePeriod = requested.Add(grace), grace
	p.Ready = false
	return collector.PodUpdate{Seen: seen, Pod: p}
}

func gone(uid string, at time.Time) collector.PodDeleted {
	return collector.PodDeleted{Seen: at, UID: uid}
}

func killing(uid string, at time.Time) collector.KubeletEvent {
	return collector.KubeletEvent{PodUID: uid, Reason: ReasonKilling, Message: "Stopping container app", Time: at}
}

func notReady(uid string, at time.Time) collector.EndpointUpdate {
	return collector.EndpointUpdate{Seen: at, PodUID: uid, Present: true, Serving: true, Terminating: true}
}

// sock is a socket event from the client 10.244.2.9:40000. A refused one is
// a SYN of its own (a sequence number from its time): repeating one is a
// retransmission, see synMemory.
func sock(typ collector.EventType, ino uint32, ip netip.Addr, cookie uint64, at time.Time) collector.Event {
	e := collector.Event{Type: typ, Time: at, NetnsIno: ino, SockCookie: cookie,
		Local: netip.AddrPortFrom(ip, port), Remote: netip.MustParseAddrPort("10.244.2.9:40000")}
	if typ == collector.EventRefused {
		e.Seq = uint32(at.UnixNano())
	}
	return e
}

func openListener(ino uint32, at time.Time) collector.Event {
	return sock(collector.EventListenOpen, ino, ipA, 1, at)
}

func closeListener(ino uint32, at time.Time) collector.Event {
	return sock(collector.EventListenClose, ino, ipA, 1, at)
}

func accept(ino uint32, cookie uint64, at time.Time) collector.Event {
	return sock(collector.EventAccept, ino, ipA, cookie, at)
}

// refusals are n refused SYNs to ip (netns ino, 0 for unknown), every
// `every` ms from `from` ms.
func refusals(ino uint32, ip netip.Addr, n, from, every int) []any {
	var evs []any
	for i := range n {
		evs = append(evs, sock(collector.EventRefused, ino, ip, 0, ms(from+i*every)))
	}
	return evs
}

// accepts are n accepted connections (cookies from 1000+from) every `every` ms.
func accepts(ino uint32, n, from, every int) []any {
	var evs []any
	for i := range n {
		evs = append(evs, accept(ino, uint64(1000+from+i*every), ms(from+i*every)))
	}
	return evs
}

func signal(cg uint64, pid uint32, sig uint32, init bool, comm string, at time.Time) collector.Event {
	e := collector.Event{Type: collector.EventSignal, Time: at, CgroupID: cg, PID: pid, TID: pid,
		Signal: sig, TargetInit: init, SenderPID: 900}
	copy(e.Comm[:], comm)
	copy(e.SenderComm[:], "containerd-shim")
	return e
}

// fromContainer makes a signal sent by a process of the container whose
// cgroup is cg (a preStop `kill`, a sidecar), not by the runtime.
func fromContainer(e collector.Event, cg uint64) collector.Event {
	e.SenderPID, e.SenderCgroup = initPID+99, cg
	copy(e.SenderComm[:], "kill")
	return e
}

// kill is a SIGKILL to pid generated by sender with the kernel's result.
func kill(cg uint64, pid, sender uint32, result collector.SignalResult, init bool, at time.Time) collector.Event {
	e := signal(cg, pid, 9, init, "server", at)
	e.SenderPID, e.SignalResult, e.SenderComm = sender, result, collector.Comm{}
	return e
}

// finalDelete is the kubelet's last pod update: every container terminated,
// deleted with grace 0 at `at`, the first deletion requested at requested.
func finalDelete(uid string, ip netip.Addr, grace time.Duration, requested, at time.Time) collector.PodUpdate {
	u := deleting(uid, ip, grace, requested, at)
	u.Pod.DeletionTimestamp, u.Pod.DeletionGracePeriod = at, 0
	for i := range u.Pod.Containers {
		u.Pod.Containers[i].Terminated = true
	}
	return u
}

// beforeGone inserts steps before the last step of evs, the pod's removal.
func beforeGone(evs []any, steps ...any) []any {
	out := append([]any(nil), evs[:len(evs)-1]...)
	return append(append(out, steps...), evs[len(evs)-1])
}

func exited(cg uint64, pid uint32, code int32, sig uint32, init bool, at time.Time) collector.Event {
	return collector.Event{Type: collector.EventExit, Time: at, CgroupID: cg, PID: pid, TID: pid,
		ExitCode: code, ExitSignal: sig, TargetInit: init}
}

func inflight(ino uint32, pid uint32, cookie uint64, cause collector.CloseCause, at time.Time) collector.Event {
	e := sock(collector.EventConnClosedInflight, ino, ipA, cookie, at)
	e.PID, e.Cause, e.Inflight = pid, cause, collector.InflightRequest
	return e
}

func reset(ino uint32, pid uint32, cookie uint64, at time.Time) collector.Event {
	e := sock(collector.EventReset, ino, ipA, cookie, at)
	e.PID = pid
	return e
}

func codes(t Termination) []string {
	var cs []string
	for _, d := range t.Diagnoses {
		cs = append(cs, d.Code)
	}
	return cs
}

func diagnosis(t Termination, code string) Diagnosis {
	for _, d := range t.Diagnoses {
		if d.Code == code {
			return d
		}
	}
	return Diagnosis{}
}

// finish feeds evs, ticks at `at` and returns the one termination that
// completed.
func finish(tb testing.TB, c *Correlator, evs []any, at time.Time) Termination {
	tb.Helper()
	feed(c, evs)
	done := c.Tick(at)
	if len(done) != 1 {
		tb.Fatalf("Tick(%v) completed %d terminations, want 1", at.Sub(t0), len(done))
	}
	return done[0]
}

// running is the pod's update once its container runs again under a new
// id (idChar repeated): the kubelet restarted it.
func running(uid string, ip netip.Addr, grace time.Duration, idChar string, seen time.Time) collector.PodUpdate {
	p := podOf(uid, ip, grace, true)
	p.Containers[0].ID = strings.Repeat(idChar, 64)
	return collector.PodUpdate{Seen: seen, Pod: p}
}
