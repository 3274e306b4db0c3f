package correlate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Terminations that begin without a deletion: the kubelet's stops (node
// pressure, node shutdown), container restarts (liveness, OOM, crash).

const livenessKill = "Container app failed liveness probe, will be restarted"

func probeKilling(uid string, at time.Time) collector.KubeletEvent {
	return collector.KubeletEvent{PodUID: uid, Reason: ReasonKilling, Message: livenessKill, Time: at}
}

// evicted is the kubelet's status update of a pod it evicts under node
// pressure (or stops for a node shutdown): no deletion.
func evicted(uid string, ip netip.Addr, grace time.Duration, reason, message string, seen time.Time) collector.PodUpdate {
	p := podOf(uid, ip, grace, true)
	p.Stop = collector.StopEvidence{Disruption: disruptionByKubelet, Reason: reason, Message: message}
	return collector.PodUpdate{Seen: seen, Pod: p}
}

func oomRestarted(uid string, ip netip.Addr, grace time.Duration, seen time.Time) collector.PodUpdate {
	u := running(uid, ip, grace, "e", seen)
	u.Pod.Containers[0].LastReason = "OOMKilled"
	return u
}

// TestContainerTerminations: each way a container or a pod stops without
// a deletion first, with what its clients lost counted exactly.
func TestContainerTerminations(t *testing.T) {
	grace := 30 * time.Second
	tail := DefaultConfig().KernelTail
	shutdown := "Pod was terminated in response to imminent node shutdown."
	for _, tc := range []struct {
		name      string
		evs       []any
		at        time.Time
		cause     string
		diag      string
		start     time.Time
		after     int // refused_after_sigterm
		killed    int
		stopped   bool // a stop signal was seen
		exitCode  int32
		remaining bool // the pod still has a termination afterwards
	}{{
		// Killing, then the stop signal; the server closes its listener
		// at once and drains 1 s; the pod stays Ready: 6 refused before
		// the exit, 3 after it until the container runs again.
		name: "liveness", cause: CauseContainerRestart, diag: DiagLivenessRestart, start: ms(-5), after: 9, stopped: true, exitCode: 0,
		evs: []any{
			probeKilling(podA, ms(-5)),
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(2)),
			refusals(netA, ipA, 6, 100, 150),
			exited(cgA, initPID, 0, 0, true, ms(1000)),
			refusals(netA, ipA, 3, 1100, 100),
			running(podA, ipA, grace, "d", ms(1400)),
			openListener(netA, ms(1450)),
		},
		at: ms(1400).Add(tail),
	}, {
		// The stop signal processed before the Killing Event (the kernel
		// ahead of the API): one termination, the cause from the Killing.
		name: "liveness, kernel first", cause: CauseContainerRestart, diag: DiagLivenessRestart, start: ms(-5), after: 2, stopped: true,
		evs: []any{
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(2)),
			refusals(netA, ipA, 2, 100, 100),
			probeKilling(podA, ms(-5)),
			exited(cgA, initPID, 0, 0, true, ms(500)),
			running(podA, ipA, grace, "d", ms(900)),
		},
		at: ms(900).Add(tail),
	}, {
		// The kernel's OOM killer: SIGKILL, no stop signal; 2 requests in
		// flight die with the process, 4 connections refused until the
		// container runs again; the API says OOMKilled in lastState.
		name: "oom kill", cause: CauseOOMKill, diag: DiagOOMKilled, start: ms(0), after: 4, killed: 2, exitCode: 137,
		evs: []any{
			accepts(netA, 3, -300, 100),
			exited(cgA, initPID, 137, 9, true, ms(0)),
			inflight(netA, initPID, 700, collector.CauseSigkill, ms(1)),
			inflight(netA, initPID, 800, collector.CauseSigkill, ms(1)),
			refusals(netA, ipA, 4, 100, 100),
			oomRestarted(podA, ipA, grace, ms(800)),
		},
		at: ms(800).Add(tail),
	}, {
		// Same, with the API's OOMKilled never seen: the kernel alone
		// recognises the OOM killer's SIGKILL.
		name: "oom kill, kernel only", cause: CauseOOMKill, diag: DiagOOMKilled, start: ms(0), after: 1, killed: 1, exitCode: 137,
		evs: []any{
			exited(cgA, initPID, 137, 9, true, ms(0)),
			inflight(netA, initPID, 700, collector.CauseSigkill, ms(1)),
			refusals(netA, ipA, 1, 100, 100),
			running(podA, ipA, grace, "d", ms(800)),
		},
		at: ms(800).Add(tail),
	}, {
		// A SIGKILL from outside the container (a person, a node tool)
		// is not the OOM killer's: a crash.
		name: "kill -9 from the node", cause: CauseContainerRestart, diag: DiagContainerCrashed, start: ms(0), after: 1, killed: 1, exitCode: 137,
		evs: []any{
			kill(cgA, initPID, 555, collector.SignalDelivered, true, ms(-1)),
			exited(cgA, initPID, 137, 9, true, ms(0)),
			inflight(netA, initPID, 700, collector.CauseSigkill, ms(1)),
			refusals(netA, ipA, 1, 100, 100),
			running(podA, ipA, grace, "d", ms(800)),
		},
		at: ms(800).Add(tail),
	}, {
		name: "crash", cause: CauseContainerRestart, diag: DiagContainerCrashed, start: ms(0), after: 5, exitCode: 2,
		evs: []any{
			exited(cgA, initPID, 2, 0, true, ms(0)),
			refusals(netA, ipA, 5, 100, 100),
			running(podA, ipA, grace, "d", ms(800)),
		},
		at: ms(800).Add(tail),
	}, {
		// The kubelet evicts under node pressure: status first, then the
		// stop signal; the naive server refuses at once while the slice
		// stays ready; the sandbox goes, and the pod object stays
		// (Failed) until the pod GC or a person deletes it.
		name: "node pressure", cause: CauseNodePressure, diag: DiagListenerClosedEarly, start: ms(-10), after: 7, stopped: true,
		evs: []any{
			evicted(podA, ipA, grace, "Evicted", "The node was low on resource: memory.", ms(-20)),
			killing(podA, ms(-10)),
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(1)),
			refusals(netA, ipA, 7, 10, 100),
			exited(cgA, initPID, 0, 0, true, ms(800)),
			netnsGone(netA, ms(900)),
		},
		at: ms(900).Add(tail),
	}, {
		// The daemon holds the namespace open while it watches it: the
		// API's terminal phase with every container terminated ends it.
		name: "node pressure, stopped in the API", cause: CauseNodePressure, diag: DiagListenerClosedEarly, start: ms(-10), after: 2, stopped: true,
		evs: []any{
			evicted(podA, ipA, grace, "Evicted", "The node was low on resource: memory.", ms(-20)),
			killing(podA, ms(-10)),
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(1)),
			refusals(netA, ipA, 2, 10, 100),
			exited(cgA, initPID, 0, 0, true, ms(300)),
			terminal(evicted(podA, ipA, grace, "Evicted", "The node was low on resource: memory.", ms(400))),
		},
		at: ms(400).Add(tail),
	}, {
		// The deletion arrives later: it joins the same termination.
		name: "node shutdown, deleted later", cause: CauseNodeShutdown, diag: DiagListenerClosedEarly, start: ms(0), after: 3, stopped: true,
		evs: []any{
			evicted(podA, ipA, grace, "Terminated", shutdown, ms(-20)),
			signal(cgA, initPID, 15, true, "server", ms(0)),
			closeListener(netA, ms(1)),
			refusals(netA, ipA, 3, 10, 100),
			exited(cgA, initPID, 0, 0, true, ms(500)),
			deletedAfter(evicted(podA, ipA, grace, "Terminated", shutdown, ms(0)), ms(600)),
			gone(podA, ms(700)),
		},
		at: ms(700).Add(tail),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, born(podA, ipA, netA, cgA, grace, ms(-60000)))
			feed(c, []any{openListener(netA, ms(-59000))})
			got := finish(t, c, tc.evs, tc.at)
			n := got.Counts
			if got.Cause != tc.cause || n.RefusedAfterSigterm != tc.after || n.RefusedBeforeSigterm != 0 || n.RequestsKilledBySigkill != tc.killed {
				t.Errorf("cause %q (%s) refused after %d before %d killed %d, want %q %d 0 %d",
					got.Cause, got.CauseEvidence, n.RefusedAfterSigterm, n.RefusedBeforeSigterm, n.RequestsKilledBySigkill, tc.cause, tc.after, tc.killed)
			}
			if got.Partial || !got.Start().Equal(tc.start) || got.ExitCode != tc.exitCode || got.Marks.StopSignal.IsZero() == tc.stopped {
				t.Errorf("partial %v start %v exit %d stop signal %v, want complete %v %d stop seen %v",
					got.PartialReasons, got.Start().Sub(t0), got.ExitCode, got.Marks.StopSignal.Sub(t0), tc.start.Sub(t0), tc.exitCode, tc.stopped)
			}
			container := tc.cause == CauseContainerRestart || tc.cause == CauseOOMKill
			if (got.Container == "app") != container || (got.Key() == podA) == container {
				t.Errorf("container %q key %q, want a container's termination: %v", got.Container, got.Key(), container)
			}
			if !slices.Contains(codes(got), tc.diag) || (tc.cause == CauseOOMKill && slices.Contains(codes(got), DiagRequestsKilled)) {
				t.Errorf("diagnoses %v, want %s (and for an OOM kill no %s: no grace period to raise)", codes(got), tc.diag, DiagRequestsKilled)
			}
			if done := c.Tick(tc.at.Add(time.Hour)); len(done) != 0 {
				t.Errorf("%d more terminations completed: counted twice", len(done))
			}
		})
	}
}

func netnsGone(ino uint32, at time.Time) netnsDestroyed { return netnsDestroyed{ino, at} }

func deletedAfter(u collector.PodUpdate, at time.Time) collector.PodUpdate {
	u.Seen = at
	u.Pod.DeletionTimestamp, u.Pod.DeletionGracePeriod = at, 0
	return u
}

// A signal to the init from outside that stops nothing (a reload's SIGHUP)
// stays hidden and is dropped once the pod watch has gone past the longest
// a stop can take; a Killing relisted from before the watch began starts
// nothing either.
func TestSignsThatStopNothing(t *testing.T) {
	grace := 30 * time.Second
	c := New(Config{})
	feed(c, born(podA, ipA, netA, cgA, grace, ms(-60000)))
	feed(c, []any{
		running(podA, ipA, grace, "c", ms(-100)), // the daemon's first list
		killing(podA, ms(-50000)),                // an old restart's Event, relisted
		signal(cgA, initPID, 1, true, "server", ms(0)),
		refusals(netA, ipA, 2, 10, 10),
	})
	if _, ok := c.Get(podA); ok {
		t.Fatalf("an unconfirmed stop signal is listed")
	}
	feed(c, []any{running(podA, ipA, grace, "c", ms(40000))})
	if done := c.Tick(ms(40000)); len(done) != 0 {
		t.Fatalf("a reload signal completed %d terminations", len(done))
	}
	if p := c.pods[podA]; p.Term != nil {
		t.Fatalf("a reload signal left a termination")
	}
}

// The kubelet's Killing processed before the deletion (the Event watch
// ahead of the pod watch) begins the termination; the deletion joins it.
func TestKillingThenDeletionCountsOnce(t *testing.T) {
	grace := 30 * time.Second
	c := New(Config{})
	feed(c, born(podA, ipA, netA, cgA, grace, ms(-60000)))
	done := []Termination{finish(t, c, []any{
		killing(podA, ms(-50)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		refusals(netA, ipA, 3, 10, 10),
		deleting(podA, ipA, grace, ms(-100), ms(60)),
		exited(cgA, initPID, 0, 0, true, ms(200)),
		gone(podA, ms(300)),
	}, ms(300).Add(DefaultConfig().KernelTail))}
	done = append(done, c.Tick(ms(100000))...)
	if len(done) != 1 || done[0].Counts.RefusedAfterSigterm != 3 || !done[0].Start().Equal(ms(-100)) || done[0].Partial {
		t.Fatalf("%d terminations, first refused %d start %v partial %v, want 1 with 3 from -100ms, complete",
			len(done), done[0].Counts.RefusedAfterSigterm, done[0].Start().Sub(t0), done[0].PartialReasons)
	}
}

// terminal is a pod update once every container has terminated, phase
// Failed.
func terminal(u collector.PodUpdate) collector.PodUpdate {
	u.Pod.Terminal = true
	for i := range u.Pod.Containers {
		u.Pod.Containers[i].Terminated = true
	}
	return u
}
