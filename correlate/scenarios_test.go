package correlate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// The seeds' naive server: SIGTERM at t0, the listener closes 5 ms later,
// 44 SYNs in the following second are refused, the endpoint becomes not
// ready at +0.3 s (processed after the refusals), exit at +2.4 s.
func naive() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		accepts(netA, 3, -500, 100),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "uvicorn", ms(0)),
		accepts(netA, 3, 1, 1),
		closeListener(netA, ms(5)),
		refusals(netA, ipA, 44, 20, 20),
		notReady(podA, ms(300)),
		exited(cgA, initPID, 0, 0, true, ms(2400)),
		gone(podA, ms(2600)),
	}
}

// protocol is the seeds' servicewright: the listener stays open 1.5 s after
// SIGTERM; 50 requests in the second after it are all accepted. The
// EndpointSlice update (ready=false at +0.3 s) is processed after the stop
// signal and after every accept it precedes when endpointLate.
func protocol(endpointLate bool) []any {
	grace := 30 * time.Second
	evs := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "python", ms(0)),
	}
	if endpointLate {
		evs = append(evs, accepts(netA, 50, 20, 20), notReady(podA, ms(300)))
	} else {
		evs = append(evs, accepts(netA, 14, 20, 20), notReady(podA, ms(300)), accepts(netA, 36, 300, 20))
	}
	return append(evs,
		closeListener(netA, ms(1500)),
		exited(cgA, initPID, 0, 0, true, ms(2410)),
		gone(podA, ms(2600)))
}

// deleteBeforeKernel: the API delete (pod_gone at +0.5 s) is processed
// before the last refusals and the exit.
func deleteBeforeKernel() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(5)),
		refusals(netA, ipA, 10, 20, 20),
		gone(podA, ms(500)),
		refusals(netA, ipA, 20, 520, 20),
		exited(cgA, initPID, 143, 15, true, ms(2400)),
	}
}

// prestopKillsServer: the preStop hook makes the server quit (no signal):
// the listener closes, init exits 0, and the runtime, finding the container
// gone, sends no stop signal. Refusals follow. kernelFirst processes the
// kernel events before the API deletion that they follow.
func prestopKillsServer(kernelFirst bool) []any {
	grace := 30 * time.Second
	api := []any{deleting(podA, ipA, grace, ms(-20), ms(-10)), killing(podA, ms(-5))}
	kernel := []any{
		closeListener(netA, ms(200)),
		exited(cgA, initPID, 0, 0, true, ms(250)),
		refusals(netA, ipA, 10, 300, 50),
	}
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000))}
	if kernelFirst {
		evs = append(evs, kernel, api)
	} else {
		evs = append(evs, api, kernel)
	}
	return append(evs, gone(podA, ms(2000)))
}

// ignoreTerm: a shell is PID 1 and ignores SIGTERM; three requests are in
// flight; SIGKILL after the 3 s grace kills them (one is multiplexed and
// reported twice); exit 137.
func ignoreTerm() []any {
	grace := 3 * time.Second
	child := initPID + 1
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		accept(netA, 11, ms(-500)), accept(netA, 12, ms(-400)), accept(netA, 13, ms(-300)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "sh", ms(0)),
		signal(cgA, initPID, 9, true, "sh", ms(3000)),
		signal(cgA, child, 9, false, "server", ms(3000)),
		exited(cgA, child, 137, 9, false, ms(3001)),
		inflight(netA, child, 11, collector.CauseSigkill, ms(3001)),
		inflight(netA, child, 12, collector.CauseSigkill, ms(3001)),
		inflight(netA, child, 13, collector.CauseSigkill, ms(3001)),
		inflight(netA, child, 11, collector.CauseSigkill, ms(3001)),
		closeListener(netA, ms(3001)),
		exited(cgA, initPID, 137, 9, true, ms(3002)),
		gone(podA, ms(3500)),
	}
}

// forking: a master (PID 1) and workers in the same cgroup and netns; the
// workers hold the connections. The master forwards SIGTERM to the workers
// (not stop signals); one worker finishes and resets an idle connection
// with unread bytes at exit; the other is killed with a request in flight
// when the 2 s grace runs out.
func forking() []any {
	grace := 2 * time.Second
	w1, w2 := initPID+1, initPID+2
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		signal(cgA, w2, 15, false, "worker", ms(-30000)),
		accept(netA, 21, ms(-200)), accept(netA, 22, ms(-150)), accept(netA, 23, ms(-100)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		signal(cgA, initPID, 15, true, "master", ms(0)),
		notReady(podA, ms(1)),
		signal(cgA, w1, 15, false, "worker", ms(1)),
		signal(cgA, w2, 15, false, "worker", ms(1)),
		closeListener(netA, ms(10)),
		exited(cgA, w1, 0, 0, false, ms(500)),
		reset(netA, w1, 23, ms(500)),
		signal(cgA, initPID, 9, true, "master", ms(2000)),
		signal(cgA, w2, 9, false, "worker", ms(2000)),
		inflight(netA, w2, 22, collector.CauseSigkill, ms(2001)),
		exited(cgA, w2, 137, 9, false, ms(2001)),
		exited(cgA, initPID, 137, 9, true, ms(2002)),
		gone(podA, ms(2500)),
	}
}

// lateStart: the daemon's first sight of the pod is its deletion, 3 s after
// it was requested; the stop signal was missed.
func lateStart() []any {
	grace := 30 * time.Second
	return []any{
		bind{podA, netA, cgA},
		deleting(podA, ipA, grace, ms(-3000), ms(50)),
		refusals(netA, ipA, 6, 100, 100),
		exited(cgA, initPID, 0, 0, true, ms(1000)),
		gone(podA, ms(1200)),
	}
}

// kernelAhead: the stop signal and the first refusals are processed before
// the API deletion they follow.
func kernelAhead() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(5)),
		refusals(netA, ipA, 5, 20, 20),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		refusals(netA, ipA, 2, 200, 20),
		exited(cgA, initPID, 0, 0, true, ms(500)),
		gone(podA, ms(700)),
	}
}

// budget: grace 3 s, preStop sleep 2 s, drain 1.5 s: no SIGKILL (the
// kubelet's 2 s floor) but no margin either.
func budget() []any {
	grace := 3 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-2020), ms(-2010)),
		killing(podA, ms(-2000)),
		signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(10)),
		exited(cgA, initPID, 0, 0, true, ms(1500)),
		gone(podA, ms(1700)),
	}
}

// prestopFailed: the preStop exec of a missing binary fails at once.
func prestopHookFails() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		killing(podA, ms(-5)),
		collector.KubeletEvent{PodUID: podA, Reason: ReasonFailedPreStopHook, Message: "PreStopHook failed", Time: ms(-4)},
		signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(1600)),
		exited(cgA, initPID, 0, 0, true, ms(1700)),
		gone(podA, ms(1900)),
	}
}

// naiveWithPrestop: the naive server behind a preStop sleep of 2 s and a
// router that follows the EndpointSlice after 1 s: traffic stops at the
// router 1 s after the deletion, SIGTERM comes 2 s after it.
func naiveWithPrestop() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-2020), ms(-2010)),
		killing(podA, ms(-2000)),
		notReady(podA, ms(-1990)),
		accepts(netA, 50, -2000, 20), // until the router converges at −1 s
		signal(cgA, initPID, 15, true, "uvicorn", ms(0)),
		closeListener(netA, ms(5)),
		exited(cgA, initPID, 0, 0, true, ms(2400)),
		gone(podA, ms(2600)),
	}
}

// worker: a pod behind no Service (its endpoint never present) closes its
// metrics listener at once: nothing is routed to it, no delay is needed.
func worker() []any {
	grace := 30 * time.Second
	return []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
		collector.EndpointUpdate{Seen: ms(-30000), PodUID: podA},
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		signal(cgA, initPID, 15, true, "worker", ms(0)),
		closeListener(netA, ms(5)),
		exited(cgA, initPID, 0, 0, true, ms(100)),
		gone(podA, ms(200)),
	}
}

func TestScenarios(t *testing.T) {
	tests := []struct {
		name       string
		events     []any
		tick       time.Time
		counts     Counts
		codes      []string
		outcome    string
		partial    []string
		fix        string
		exitCode   int32
		stopSignal time.Time
		sigkill    time.Time
		grace      time.Duration // checked when set
		durations  map[string]time.Duration
	}{
		{name: "naive", events: naive(), tick: ms(7600),
			counts: Counts{RefusedAfterSigterm: 44},
			codes:  []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused,
			fix:        "add preStop sleep ≥ 2s: routing took 0.89s; slowest source: external 10.244.2.9, 0.58s after the endpoint became not ready",
			stopSignal: ms(0),
			durations: map[string]time.Duration{DurRoutingLag: 580 * time.Millisecond,
				DurListenerCloseDelay: 5 * time.Millisecond, DurPrestop: 5 * time.Millisecond,
				DurDrain: 2400 * time.Millisecond, DurGraceUsed: 2420 * time.Millisecond}},
		{name: "protocol, endpoint update after the stop signal and the accepts", events: protocol(true), tick: ms(7600),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0),
			durations: map[string]time.Duration{DurRoutingLag: 700 * time.Millisecond,
				DurListenerCloseDelay: 1500 * time.Millisecond, DurPrestop: 5 * time.Millisecond,
				DurDrain: 2410 * time.Millisecond, DurGraceUsed: 2430 * time.Millisecond}},
		{name: "protocol, endpoint update in time order", events: protocol(false), tick: ms(7600),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "API delete before the last kernel events", events: deleteBeforeKernel(), tick: ms(5500),
			counts: Counts{RefusedAfterSigterm: 30},
			codes:  []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused,
			exitCode: 143, stopSignal: ms(0)},
		{name: "preStop kills the server", events: prestopKillsServer(false), tick: ms(7000),
			counts: Counts{RefusedBeforeSigterm: 10},
			codes:  []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused,
			fix:     "add preStop sleep ≥ 2s: routing took 0.76s",
			partial: []string{PartialNoStopSignal}},
		{name: "preStop kills the server, kernel events processed before the deletion", events: prestopKillsServer(true), tick: ms(7000),
			counts: Counts{RefusedBeforeSigterm: 10},
			codes:  []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused,
			partial: []string{PartialNoStopSignal}},
		{name: "SIGTERM ignored then SIGKILL", events: ignoreTerm(), tick: ms(8500),
			counts: Counts{RequestsKilledBySigkill: 3, InflightAtStopSignal: 3},
			codes:  []string{DiagStopSignalIgnored, DiagRequestsKilled}, outcome: OutcomeKilled,
			exitCode: 137, stopSignal: ms(0), sigkill: ms(3000), grace: 3 * time.Second},
		{name: "forking server, workers hold the connections", events: forking(), tick: ms(7500),
			counts:  Counts{RequestsKilledBySigkill: 1, InflightAtStopSignal: 1, ConnectionsResetAtExit: 1},
			codes:   []string{DiagNoDrainDelay, DiagGraceExceeded, DiagRequestsKilled, DiagBudgetTooSmall},
			outcome: OutcomeKilled, exitCode: 137, stopSignal: ms(0), sigkill: ms(2000)},
		{name: "daemon started after the stop signal", events: lateStart(), tick: ms(6200),
			counts: Counts{RefusedAfterSigterm: 6},
			codes:  []string{DiagListenerClosedEarly}, outcome: OutcomeRefused,
			partial: []string{PartialStartedLate, PartialNoStopSignal}},
		{name: "stop signal processed before the deletion", events: kernelAhead(), tick: ms(5700),
			counts: Counts{RefusedAfterSigterm: 7},
			codes:  []string{DiagListenerClosedEarly, DiagNoDrainDelay}, outcome: OutcomeRefused,
			stopSignal: ms(0)},
		{name: "budget too small", events: budget(), tick: ms(6700),
			codes: []string{DiagBudgetTooSmall}, outcome: OutcomeClean,
			fix: "set terminationGracePeriodSeconds ≥ 5", stopSignal: ms(0)},
		{name: "preStop hook failed", events: prestopHookFails(), tick: ms(6900),
			codes: []string{DiagPrestopFailed}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "naive behind a 2 s preStop sleep", events: naiveWithPrestop(), tick: ms(7600),
			counts: Counts{AcceptedAfterEndpointsNotReady: 49},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "worker behind no Service", events: worker(), tick: ms(5200),
			codes: []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol, the kubelet's final delete with grace 0 keeps the grace", tick: ms(7600),
			events: beforeGone(protocol(true), finalDelete(podA, ipA, 30*time.Second, ms(-20), ms(2500))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0), grace: 30 * time.Second},
		{name: "protocol, the kernel's own SIGKILL to the exiting init", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID, initPID, collector.SignalIgnored, true, ms(2411))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol, a SIGKILL the init sent itself", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID, initPID, collector.SignalDelivered, true, ms(2409))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol, a SIGKILL the kernel dropped for an exiting target", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID, 900, collector.SignalIgnored, true, ms(2409))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol, a SIGKILL from another process after the exit", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID, 900, collector.SignalDelivered, true, ms(2412))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol, the exited init's namespace reaped", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID+1, initPID, collector.SignalDelivered, false, ms(2411)),
				exited(cgA, initPID+1, 137, 9, false, ms(2412))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0)},
		{name: "protocol as integration saw it: the kernel's SIGKILL, then the final delete", tick: ms(7600),
			events: beforeGone(protocol(true), kill(cgA, initPID, initPID, collector.SignalIgnored, true, ms(2411)),
				finalDelete(podA, ipA, 30*time.Second, ms(-20), ms(2500))),
			counts: Counts{AcceptedAfterEndpointsNotReady: 36},
			codes:  []string{DiagClean}, outcome: OutcomeClean, stopSignal: ms(0), grace: 30 * time.Second},
		{name: "kernel gap during the drain", events: append(protocol(true), gap{"events_lost", ms(500), ms(600)}), tick: ms(7600),
			counts:  Counts{AcceptedAfterEndpointsNotReady: 36},
			outcome: OutcomePartial, partial: []string{"events_lost"}, stopSignal: ms(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, tc.events)
			if early := c.Tick(tc.tick.Add(-time.Nanosecond)); len(early) != 0 {
				t.Fatalf("completed before the kernel tail: %+v", early)
			}
			got := finish(t, c, nil, tc.tick)
			if got.Counts != tc.counts {
				t.Errorf("counts = %+v, want %+v", got.Counts, tc.counts)
			}
			if !slices.Equal(codes(got), tc.codes) {
				t.Errorf("diagnoses = %v, want %v\n%+v", codes(got), tc.codes, got.Diagnoses)
			}
			if got.Outcome != tc.outcome {
				t.Errorf("outcome = %q, want %q", got.Outcome, tc.outcome)
			}
			if !slices.Equal(got.PartialReasons, tc.partial) || got.Partial != (len(tc.partial) > 0) {
				t.Errorf("partial = %v %v, want %v", got.Partial, got.PartialReasons, tc.partial)
			}
			if tc.fix != "" && diagnosis(got, tc.codes[0]).Fix != tc.fix {
				t.Errorf("fix = %q, want %q", diagnosis(got, tc.codes[0]).Fix, tc.fix)
			}
			if got.ExitCode != tc.exitCode || !got.Marks.StopSignal.Equal(tc.stopSignal) {
				t.Errorf("exit code %d stop signal %v, want %d %v", got.ExitCode, got.Marks.StopSignal, tc.exitCode, tc.stopSignal)
			}
			if !got.Marks.Sigkill.Equal(tc.sigkill) || tc.grace != 0 && got.GracePeriod != tc.grace {
				t.Errorf("sigkill %v grace %v, want %v %v", got.Marks.Sigkill, got.GracePeriod, tc.sigkill, tc.grace)
			}
			if tc.durations != nil {
				if d := got.Durations(); !mapsEqual(d, tc.durations) {
					t.Errorf("durations = %v, want %v", d, tc.durations)
				}
			}
			if !got.Complete || got.Workload.Revision != "3" {
				t.Errorf("complete %v, workload %+v", got.Complete, got.Workload)
			}
			for _, d := range got.Diagnoses {
				if strings.Contains(d.Message, "?") {
					t.Errorf("%s message has a placeholder: %s", d.Code, d.Message)
				}
				t.Logf("%s: %s | fix: %s", d.Code, d.Message, d.Fix)
			}
		})
	}
}

func mapsEqual(a, b map[string]time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
