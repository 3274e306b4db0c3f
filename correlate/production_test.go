package correlate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Pods shaped like production's (issue 9): the kubelet's probes, stop
// signals the API does not name, resets by the shutdown, streams, and the
// views that cannot be complete.

// from makes a pod-side event opened by a node-local task named comm.
func from(e collector.Event, comm string) collector.Event {
	e.SenderPID, e.SenderCgroup = 77, 1
	copy(e.SenderComm[:], comm)
	return e
}

// probe makes each event of evs one the kubelet opened.
func probe(evs []any) []any {
	out := make([]any, len(evs))
	for i, e := range evs {
		out[i] = from(e.(collector.Event), "kubelet")
	}
	return out
}

// drained: stop signal at 0, listener closed at 100 ms, exit at 4 s; clients
// refused 10 times from 200 ms every 50 ms; endpoint not ready at 50 ms.
func drained(stopSig uint32, extra ...any) []any { return drainedN(stopSig, 10, extra...) }

// drainedN is drained with n client refusals.
func drainedN(stopSig uint32, n int, extra ...any) []any {
	grace := 30 * time.Second
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, stopSig, true, "server", ms(0)),
		notReady(podA, ms(50)),
		closeListener(netA, ms(100)),
		refusals(netA, ipA, n, 200, 50),
	}
	evs = append(evs, extra...)
	return append(evs, exited(cgA, initPID, 0, 0, true, ms(4000)), gone(podA, ms(4100)))
}

func TestProductionPods(t *testing.T) {
	withAPISignal := func(sig uint32) any {
		u := deleting(podA, ipA, 30*time.Second, ms(-20), ms(-9))
		u.Pod.Containers[0].StopSignal = sig
		return u
	}
	killedAt30s := func(evs ...any) []any {
		base := drainedN(15, 0)
		base = base[:len(base)-2]
		base = append(base, signal(cgA, initPID, 9, true, "server", ms(30000)))
		base = append(base, evs...)
		return append(base, exited(cgA, initPID, 137, 9, true, ms(30002)), gone(podA, ms(30100)))
	}
	for _, tc := range []struct {
		name      string
		evs       []any
		counts    Counts
		last      time.Time // LastConnAttempt
		sources   []Source
		codes     []string
		outcome   string
		partial   []string
		stop      uint32
		stopAPI   uint32
		hostNet   bool
		noNetBind bool
	}{
		{name: "readiness probes refused after the listener closed are not client refusals",
			evs:    drained(15, probe(refusals(netA, ipA, 4, 1000, 1000))...),
			counts: Counts{RefusedAfterSigterm: 10, ProbeRefused: 4}, last: ms(650),
			sources: []Source{{Comm: "kubelet", Probe: true, Refused: 4}},
			codes:   []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused, stop: 15},
		{name: "a probe accepted during the drain does not move the routing lag",
			evs:    drained(15, from(accept(netA, 51, ms(3000)), "kubelet")),
			counts: Counts{RefusedAfterSigterm: 10}, last: ms(650),
			sources: []Source{{Comm: "kubelet", Probe: true, Accepted: 1}},
			codes:   []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused, stop: 15},
		{name: "a node-local proxy is client traffic, listed by source",
			evs:    drained(15, from(accept(netA, 52, ms(150)), "envoy"), from(sock(collector.EventRefused, netA, ipA, 0, ms(900)), "envoy")),
			counts: Counts{RefusedAfterSigterm: 11, AcceptedAfterEndpointsNotReady: 1}, last: ms(900),
			sources: []Source{{Comm: "envoy", Accepted: 1, Refused: 1}},
			codes:   []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused, stop: 15},
		{name: "the image's SIGQUIT is the stop signal although the API names none",
			evs:    drained(3),
			counts: Counts{RefusedAfterSigterm: 10}, last: ms(650),
			codes: []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused, stop: 3},
		{name: "the API naming another signal than the one sent is a diagnosis",
			evs:    drained(10, withAPISignal(15)),
			counts: Counts{RefusedAfterSigterm: 10}, last: ms(650),
			codes: []string{DiagListenerClosedEarly, DiagNoDrainDelay, DiagStopSignalMismatch}, outcome: OutcomeRefused,
			stop: 10, stopAPI: 15},
		{name: "a signal from inside the container is not the stop signal",
			evs: func() []any {
				evs := drained(15)
				// A preStop `kill -HUP 1` before the runtime's SIGTERM.
				return append(evs[:4], append([]any{fromContainer(signal(cgA, initPID, 1, true, "server", ms(-3)), cgA)}, evs[4:]...)...)
			}(),
			counts: Counts{RefusedAfterSigterm: 10}, last: ms(650),
			codes: []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused, stop: 15},
		{name: "accept-queue resets at listener close and a half-open handshake count once each",
			evs: drained(15,
				// Two connections reset in the accept queue (never accepted,
				// nothing in flight), one request closed unanswered by the
				// live server, a client of a reset connection sending more
				// (its segment meets no socket: not counted again), a
				// half-open handshake's ACK meeting no socket.
				queueReset(61, "10.244.2.9:41001", ms(100)), queueReset(62, "10.244.2.9:41002", ms(100)),
				closedUnanswered(63, "10.244.2.9:41003", ms(300)),
				noSocketReset("10.244.2.9:41001", ms(120)),
				noSocketReset("10.244.2.9:41004", ms(130)),
				// Between the pod's own containers over loopback (a proxy's
				// pooled connection to its backend): no client's.
				noSocketReset("127.0.0.1:8081", ms(140)),
				func() collector.Event {
					e := queueReset(64, "127.0.0.1:41005", ms(150))
					e.Local = netip.MustParseAddrPort("127.0.0.1:8081")
					return e
				}(),
			),
			counts: Counts{RefusedAfterSigterm: 10, ConnectionsResetAtShutdown: 4, InflightAtStopSignal: 1}, last: ms(650),
			codes: []string{DiagListenerClosedEarly, DiagNoDrainDelay, DiagShutdownResets}, outcome: OutcomeRefused, stop: 15},
		{name: "resets alone make the outcome reset",
			evs:    drainedN(15, 0, queueReset(61, "10.244.2.9:41001", ms(100))),
			counts: Counts{ConnectionsResetAtShutdown: 1},
			codes:  []string{DiagNoDrainDelay, DiagShutdownResets}, outcome: OutcomeReset, stop: 15},
		{name: "open streams cut by SIGKILL are killed requests, and say so",
			evs: killedAt30s(stream(71, ms(30001)), stream(72, ms(30001)),
				inflight(netA, initPID, 73, collector.CauseSigkill, ms(30001))),
			counts:  Counts{RequestsKilledBySigkill: 3, StreamsKilledBySigkill: 2, InflightAtStopSignal: 3},
			codes:   []string{DiagNoDrainDelay, DiagGraceExceeded, DiagRequestsKilled, DiagStreamsKilled, DiagBudgetTooSmall},
			outcome: OutcomeKilled, stop: 15},
		{name: "a probe's connection killed in flight is not a client's",
			evs:     killedAt30s(from(inflight(netA, initPID, 74, collector.CauseSigkill, ms(30001)), "kubelet")),
			codes:   []string{DiagNoDrainDelay, DiagGraceExceeded, DiagBudgetTooSmall},
			outcome: OutcomeClean, stop: 15},
		{name: "a hostNetwork pod is never clean", hostNet: true,
			evs:     []any{born(podA, ipA, 0, cgA, 30*time.Second, ms(-60000)), deleting(podA, ipA, 30*time.Second, ms(-20), ms(-10)), signal(cgA, initPID, 15, true, "server", ms(0)), exited(cgA, initPID, 0, 0, true, ms(100)), gone(podA, ms(200))},
			outcome: OutcomePartial, partial: []string{PartialHostNetwork}, stop: 15},
		{name: "a pod whose namespace was never bound is never clean", noNetBind: true,
			evs:     []any{born(podA, ipA, 0, cgA, 30*time.Second, ms(-60000)), deleting(podA, ipA, 30*time.Second, ms(-20), ms(-10)), signal(cgA, initPID, 15, true, "server", ms(0)), exited(cgA, initPID, 0, 0, true, ms(100)), gone(podA, ms(200))},
			outcome: OutcomePartial, partial: []string{PartialNetnsUnbound}, stop: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			if tc.hostNet {
				c.HostNetwork(podA)
			}
			got := finish(t, c, tc.evs, ms(40000))
			if got.Counts != tc.counts {
				t.Errorf("counts = %+v, want %+v", got.Counts, tc.counts)
			}
			if !got.LastConnAttempt.Equal(tc.last) && !(got.LastConnAttempt.IsZero() && tc.last.IsZero()) {
				t.Errorf("last attempt at %v, want %v", got.LastConnAttempt.Sub(t0), tc.last.Sub(t0))
			}
			if !slices.Equal(got.Sources, tc.sources) {
				t.Errorf("sources = %+v, want %+v", got.Sources, tc.sources)
			}
			if !slices.Equal(codes(got), tc.codes) && !(len(tc.codes) == 0 && slices.Equal(codes(got), []string{DiagClean})) {
				t.Errorf("diagnoses = %v, want %v", codes(got), tc.codes)
			}
			if got.Outcome != tc.outcome {
				t.Errorf("outcome = %q, want %q", got.Outcome, tc.outcome)
			}
			if !slices.Equal(got.PartialReasons, tc.partial) {
				t.Errorf("partial = %v, want %v", got.PartialReasons, tc.partial)
			}
			if got.StopSignal != tc.stop || got.StopSignalAPI != tc.stopAPI {
				t.Errorf("stop signal %d (API %d), want %d (API %d)", got.StopSignal, got.StopSignalAPI, tc.stop, tc.stopAPI)
			}
			for _, p := range got.Connections {
				if p.Probe && p.Time.After(tc.last) && tc.last.IsZero() {
					t.Errorf("probe point %v counted as an attempt", p)
				}
			}
		})
	}
}

// TestEarlyOverflowIsPartial: more rare events than the Early ring holds
// arrive before the deletion is seen; one of them may have been the
// termination's, so the record is partial.
func TestEarlyOverflowIsPartial(t *testing.T) {
	grace := 30 * time.Second
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000))}
	evs = append(evs, refusals(netA, ipA, earlySize+5, -18, 0)...)
	evs = append(evs, deleting(podA, ipA, grace, ms(-20), ms(-10)), signal(cgA, initPID, 15, true, "server", ms(0)),
		exited(cgA, initPID, 0, 0, true, ms(100)), gone(podA, ms(200)))
	got := finish(t, New(Config{}), evs, ms(6000))
	if !slices.Contains(got.PartialReasons, PartialEarlyOverflow) {
		t.Errorf("partial = %v, want %s", got.PartialReasons, PartialEarlyOverflow)
	}
}

func queueReset(cookie uint64, remote string, at time.Time) collector.Event {
	e := sock(collector.EventConnClosedInflight, netA, ipA, cookie, at)
	e.Remote, e.Cause, e.PID = netip.MustParseAddrPort(remote), collector.CauseClose, initPID
	return e
}

func closedUnanswered(cookie uint64, remote string, at time.Time) collector.Event {
	e := queueReset(cookie, remote, at)
	e.Inflight = collector.InflightRequest
	return e
}

func noSocketReset(remote string, at time.Time) collector.Event {
	e := sock(collector.EventReset, netA, ipA, 0, at)
	e.Remote, e.Reason = netip.MustParseAddrPort(remote), 1
	return e
}

func stream(cookie uint64, at time.Time) collector.Event {
	e := inflight(netA, initPID, cookie, collector.CauseSigkill, at)
	e.Inflight = collector.InflightStream
	return e
}

// TestReusedNetnsInodeNamesAnotherPod: the namespace inode of a gone pod is
// reused by the next pod's namespace while the binding is still held (a
// daemon restarted after the pod went away). A refusal in that namespace
// addressed to another IP is not the gone pod's.
func TestReusedNetnsInodeNamesAnotherPod(t *testing.T) {
	evs := drainedN(15, 3)
	evs = append(evs[:len(evs)-1], sock(collector.EventRefused, netA, ipB, 0, ms(3000)), evs[len(evs)-1])
	got := finish(t, New(Config{}), evs, ms(40000))
	if got.Counts.RefusedAfterSigterm != 3 {
		t.Errorf("refused after the stop signal %d, want 3: the refusal to %s in a reused namespace is not %s's", got.Counts.RefusedAfterSigterm, ipB, ipA)
	}
}
