package exporter

import (
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// revisionState holds the counters of one workload revision (the rollout
// identity of docs/design.md, "Metric contract") and when they last changed.
type revisionState struct {
	labels [4]string // namespace, workload_kind, workload, revision
	// outcomes counts terminations by outcomeKey(outcome, cause).
	outcomes map[string]uint64
	refused  uint64
	killed   uint64 // requests killed by SIGKILL
	// killedAtExit: requests killed in flight by an exit other than
	// SIGKILL's.
	killedAtExit uint64
	// blackholed: attempts the node dropped after the pod's network was
	// gone.
	blackholed uint64
	// refusedInside: a sidecar's forwards refused inside the pod.
	refusedInside uint64
	acceptedNR    uint64 // accepted after endpoints not ready
	resets        uint64 // connections reset at shutdown
	reuse         uint64 // requests reset on reused connections
	probes        uint64 // probe connections refused
	// The new pods' side (startup.go): refused after and before Ready,
	// reset after Ready.
	refusedAfterReady, refusedBeforeReady, resetAfterReady uint64
	updated                                                time.Time
}

// workloadState holds the per-workload histograms (no revision label: a
// duration distribution is about the workload's shutdown, across rollouts).
type workloadState struct {
	labels [3]string // namespace, workload_kind, workload
	// partial counts partial terminations by reason label; every reason
	// starts at zero so that the first partial termination of a workload
	// shows to increase() as an increase.
	partial map[string]uint64
	// steadyReuse counts requests reset on reused connections outside
	// terminations (an idle-timeout mismatch in steady state).
	steadyReuse uint64
	phases      map[string]*histogram
	routingLag  *histogram
	// readyToFirstAccept: new pods' Ready to first accepted connection.
	readyToFirstAccept *histogram
	updated            time.Time
}

func newRevisionState(labels [4]string) *revisionState {
	return &revisionState{labels: labels, outcomes: map[string]uint64{}}
}

func newWorkloadState(labels [3]string) *workloadState {
	ws := &workloadState{labels: labels, phases: map[string]*histogram{},
		routingLag: newHistogram(routingLagBuckets), partial: map[string]uint64{},
		readyToFirstAccept: newHistogram(routingLagBuckets)}
	for _, r := range partialReasons {
		ws.partial[r] = 0
	}
	for _, p := range correlate.PhaseNames() {
		ws.phases[p] = newHistogram(phaseBuckets)
	}
	return ws
}

func (r *revisionState) add(t correlate.Termination, now time.Time) {
	r.outcomes[outcomeKey(outcomeLabel(t.Outcome), causeLabel(t.Cause))]++
	r.refused += uint64(max(t.Counts.RefusedAfterSigterm, 0))
	r.killed += uint64(max(t.Counts.RequestsKilledBySigkill, 0))
	r.killedAtExit += uint64(max(t.Counts.RequestsKilledAtExit, 0))
	r.blackholed += uint64(max(t.Counts.ConnectionsBlackholed, 0))
	r.refusedInside += uint64(max(t.Counts.RefusedInsidePod, 0))
	r.acceptedNR += uint64(max(t.Counts.AcceptedAfterEndpointsNotReady, 0))
	r.resets += uint64(max(t.Counts.ConnectionsResetAtShutdown, 0))
	r.reuse += uint64(max(t.Counts.RequestsResetOnReusedConnections, 0))
	r.probes += uint64(max(t.Counts.ProbeRefused, 0))
	if now.After(r.updated) {
		r.updated = now
	}
}

func (w *workloadState) add(t correlate.Termination, now time.Time) {
	for _, r := range partialLabels(t) {
		w.partial[r]++
	}
	for phase, d := range t.Phases() {
		if h := w.phases[phase]; h != nil {
			h.observe(d.Seconds())
		}
	}
	if lag, ok := t.RoutingLag(); ok {
		w.routingLag.observe(lag.Seconds())
	}
	if now.After(w.updated) {
		w.updated = now
	}
}

func workloadOf(rev [4]string) [3]string { return [3]string{rev[0], rev[1], rev[2]} }
