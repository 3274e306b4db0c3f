package exporter

import (
	"net/netip"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// t0 is the delete request of the synthetic terminations below.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(seconds float64) time.Time { return t0.Add(time.Duration(seconds * float64(time.Second))) }

var web3 = collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"}

// naiveTermination is the seeds' first experiment: no preStop, the listener
// closes 125 ms after SIGTERM while routing still sends traffic for 1.25 s.
func naiveTermination() correlate.Termination {
	return correlate.Termination{
		PodUID: "uid-a", Pod: "web-6d4f-a", Node: "node-1", PodIP: netip.MustParseAddr("10.244.1.7"),
		Workload: web3, GracePeriod: 30 * time.Second,
		Marks: correlate.Marks{DeleteRequested: at(0), DeletionSeen: at(0.01), Killing: at(0),
			StopSignal: at(0), ListenerClosed: at(0.125), EndpointsNotReady: at(0.25),
			LastAccept: at(0.5), Exit: at(2.5), PodGone: at(3)},
		Counts:     correlate.Counts{RefusedAfterSigterm: 44, AcceptedAfterEndpointsNotReady: 3},
		StopSignal: 15, StopSignalTarget: "uvicorn", LastConnAttempt: at(1.25),
		Connections: []correlate.ConnPoint{{Time: at(0.05)}, {Time: at(0.5)}, {Time: at(0.75), Refused: true}, {Time: at(1.25), Refused: true}},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagNoDrainDelay,
			Message: "44 connections refused after SIGTERM: the listener closed 0.125 s after the stop signal, routing took 1.000 s",
			Fix:     "set preStop sleep ≥ 2 s: routing took 1.0 s"}},
		Outcome: "refused", Complete: true, Cause: correlate.CauseRollout, CauseEvidence: "Deployment web moved from revision 3 to 4",
	}
}

// killedTermination has a 1.5 s preStop but a drain longer than its grace.
func killedTermination() correlate.Termination {
	return correlate.Termination{
		PodUID: "uid-b", Pod: "web-6d4f-b", Node: "node-1", PodIP: netip.MustParseAddr("10.244.1.8"),
		Workload: web3, GracePeriod: 30 * time.Second,
		Marks: correlate.Marks{DeleteRequested: at(0), Killing: at(0.5), StopSignal: at(2),
			EndpointsNotReady: at(0.5), LastAccept: at(1), ListenerClosed: at(2),
			Sigkill: at(30.5), Exit: at(32)},
		Counts:   correlate.Counts{RequestsKilledBySigkill: 1, InflightAtStopSignal: 1},
		ExitCode: 137, ExitSignal: 9, StopSignal: 15, StopSignalTarget: "java", LastConnAttempt: at(1),
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagRequestsKilled,
			Message: "1 request in flight killed by SIGKILL after the 30 s grace period",
			Fix:     "raise terminationGracePeriodSeconds above preStop + drain + margin (≥ 35 s)"}},
		Outcome: "killed", Complete: true,
	}
}

// barePod is a pod without a controller: it must not create per-pod series.
func barePod() correlate.Termination {
	return correlate.Termination{
		PodUID: "uid-c", Pod: "lonely-pod", Node: "node-1",
		Workload:  collector.Workload{Namespace: "default", Kind: "none", Name: "lonely-pod"},
		Marks:     correlate.Marks{StopSignal: at(0), Exit: at(0.25)},
		Diagnoses: []correlate.Diagnosis{{Code: correlate.DiagClean, Message: "no connection lost"}},
		Outcome:   "clean", Complete: true, Cause: correlate.CauseDelete,
	}
}

// probedTermination has readiness probes refused through its drain, a
// listener closed on a full accept queue, and a daemon restart during it.
func probedTermination() correlate.Termination {
	return correlate.Termination{
		PodUID: "uid-p", Pod: "web-6d4f-p", Node: "node-1", PodIP: netip.MustParseAddr("10.244.1.9"),
		Workload: web3, GracePeriod: 30 * time.Second,
		Marks: correlate.Marks{DeleteRequested: at(0), Killing: at(0), StopSignal: at(0.1),
			EndpointsNotReady: at(0.3), ListenerClosed: at(0.2), LastAccept: at(0.15), Exit: at(4.2), PodGone: at(5)},
		Counts: correlate.Counts{RefusedAfterSigterm: 44, RequestsKilledBySigkill: 2, StreamsKilledBySigkill: 1,
			ConnectionsResetAtShutdown: 6, ProbeRefused: 4},
		StopSignal: 3, StopSignalAPI: 15, StopSignalTarget: "nginx", LastConnAttempt: at(1.1),
		Connections: []correlate.ConnPoint{{Time: at(0.05)}, {Time: at(0.6), Refused: true}, {Time: at(1.1), Refused: true},
			{Time: at(1.2), Refused: true, Probe: true}, {Time: at(2.2), Refused: true, Probe: true}},
		Sources: []correlate.Source{{Comm: "kubelet", Probe: true, Accepted: 2, Refused: 4}, {Comm: "envoy", Accepted: 10}},
		Diagnoses: []correlate.Diagnosis{
			{Code: correlate.DiagShutdownResets, Message: "6 connections reset when the listener closed with a full accept queue",
				Fix: "stop accepting only after the endpoint is removed: preStop sleep ≥ 1 s"},
			{Code: correlate.DiagStreamsKilled, Message: "1 open stream killed by SIGKILL", Fix: "close long-lived streams at the stop signal"},
			{Code: correlate.DiagStopSignalMismatch, Message: "the runtime sent SIGQUIT, the API names SIGTERM"}},
		Outcome: "partial", Complete: true, Partial: true,
		PartialReasons: []string{"daemon_down", "probe_unavailable:tcp_send_reset", "something_new"},
	}
}
