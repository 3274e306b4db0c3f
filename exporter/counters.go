package exporter

import (
	"fmt"
	"time"
)

// CounterStateVersion is the format of CounterState. A daemon refuses to
// restore a state of another version (its fields may mean something else)
// and rebuilds its counters from the stored terminations instead.
const CounterStateVersion = 1

// CounterState is the cumulative value of every live per-rollout series and
// the pods counted into them: what a restart must restore so that no
// _total series decreases, whatever the age of the terminations behind it.
// The daemon saves it with each checkpoint; series expired by the TTL are
// not in it.
type CounterState struct {
	Version   int                  `json:"version"`
	Revisions []RevisionCounters   `json:"revisions,omitempty"`
	Workloads []WorkloadCounters   `json:"workloads,omitempty"`
	Counted   map[string][4]string `json:"counted,omitempty"` // pod UID → revision labels
}

// RevisionCounters are one revision's counters.
type RevisionCounters struct {
	Labels   [4]string         `json:"labels"` // namespace, workload_kind, workload, revision
	Outcomes map[string]uint64 `json:"outcomes,omitempty"`
	Refused  uint64            `json:"refused_after_sigterm"`
	Killed   uint64            `json:"requests_killed_by_sigkill"`
	// KilledAtExit is absent from the states of drainwatch before it
	// counted requests killed at exit: they restore as 0.
	KilledAtExit uint64 `json:"requests_killed_at_exit,omitempty"`
	// Blackholed is absent from older states: it restores as 0.
	Blackholed uint64 `json:"connections_blackholed,omitempty"`
	// RefusedInside is absent from older states: it restores as 0.
	RefusedInside uint64 `json:"refused_inside_pod,omitempty"`
	Accepted      uint64 `json:"accepted_after_endpoint_removal"`
	Resets        uint64 `json:"connections_reset_at_shutdown"`
	Reuse         uint64 `json:"requests_reset_on_reused_connections,omitempty"`
	Probes        uint64 `json:"probe_connections_refused"`
	// The new pods' side; absent from older states: they restore as 0.
	RefusedAfterReady  uint64    `json:"refused_after_ready,omitempty"`
	RefusedBeforeReady uint64    `json:"refused_before_ready,omitempty"`
	ResetAfterReady    uint64    `json:"reset_after_ready,omitempty"`
	Updated            time.Time `json:"updated"`
}

// WorkloadCounters are one workload's partial counts and histograms.
type WorkloadCounters struct {
	Labels     [3]string                  `json:"labels"` // namespace, workload_kind, workload
	Partial    map[string]uint64          `json:"partial,omitempty"`
	Phases     map[string]HistogramCounts `json:"phases,omitempty"`
	RoutingLag HistogramCounts            `json:"routing_lag"`
	// SteadyReuse: requests reset on reused connections outside
	// terminations.
	SteadyReuse        uint64          `json:"requests_reset_on_reused_connections_outside_terminations,omitempty"`
	ReadyToFirstAccept HistogramCounts `json:"ready_to_first_accept,omitzero"`
	Updated            time.Time       `json:"updated"`
}

// HistogramCounts are a histogram's per-bucket (not cumulative) counts,
// its count and its sum; the bounds are the exporter's.
type HistogramCounts struct {
	Buckets []uint64 `json:"buckets,omitempty"`
	Count   uint64   `json:"count"`
	Sum     float64  `json:"sum"`
}

// Counters returns the state of every live series.
func (m *Metrics) Counters() CounterState {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := CounterState{Version: CounterStateVersion, Counted: make(map[string][4]string, len(m.seen))}
	for _, rs := range m.revisions {
		cs.Revisions = append(cs.Revisions, rs.counters())
	}
	for _, ws := range m.workloads {
		cs.Workloads = append(cs.Workloads, ws.counters())
	}
	for uid, key := range m.seen {
		cs.Counted[uid] = key
	}
	return cs
}

// RestoreCounters replaces the series with a saved state. The pods it
// counted are not counted again by ObserveTermination, so a daemon restores
// its counters first, then observes its stored terminations: only those
// completed after the save count.
func (m *Metrics) RestoreCounters(cs CounterState) error {
	if cs.Version != CounterStateVersion {
		return fmt.Errorf("stored counters have format version %d, this drainwatch reads version %d", cs.Version, CounterStateVersion)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.revisions = make(map[[4]string]*revisionState, len(cs.Revisions))
	for _, rc := range cs.Revisions {
		m.revisions[rc.Labels] = restoreRevision(rc)
	}
	m.workloads = make(map[[3]string]*workloadState, len(cs.Workloads))
	for _, wc := range cs.Workloads {
		m.workloads[wc.Labels] = restoreWorkload(wc)
	}
	m.seen = make(map[string][4]string, len(cs.Counted))
	for uid, key := range cs.Counted {
		m.seen[uid] = key
	}
	return nil
}

func (r *revisionState) counters() RevisionCounters {
	outcomes := make(map[string]uint64, len(r.outcomes))
	for o, n := range r.outcomes {
		outcomes[o] = n
	}
	return RevisionCounters{Labels: r.labels, Outcomes: outcomes, Refused: r.refused, Killed: r.killed,
		KilledAtExit: r.killedAtExit, Blackholed: r.blackholed, RefusedInside: r.refusedInside, Accepted: r.acceptedNR, Resets: r.resets, Reuse: r.reuse, Probes: r.probes, Updated: r.updated,
		RefusedAfterReady: r.refusedAfterReady, RefusedBeforeReady: r.refusedBeforeReady, ResetAfterReady: r.resetAfterReady}
}

func restoreRevision(rc RevisionCounters) *revisionState {
	rs := newRevisionState(rc.Labels)
	for o, n := range rc.Outcomes {
		rs.outcomes[o] = n
	}
	rs.refused, rs.killed, rs.killedAtExit, rs.acceptedNR = rc.Refused, rc.Killed, rc.KilledAtExit, rc.Accepted
	rs.blackholed, rs.refusedInside = rc.Blackholed, rc.RefusedInside
	rs.resets, rs.reuse, rs.probes, rs.updated = rc.Resets, rc.Reuse, rc.Probes, rc.Updated
	rs.refusedAfterReady, rs.refusedBeforeReady, rs.resetAfterReady = rc.RefusedAfterReady, rc.RefusedBeforeReady, rc.ResetAfterReady
	return rs
}

func (w *workloadState) counters() WorkloadCounters {
	wc := WorkloadCounters{Labels: w.labels, Partial: make(map[string]uint64, len(w.partial)),
		Phases: make(map[string]HistogramCounts, len(w.phases)), RoutingLag: w.routingLag.counts(),
		SteadyReuse: w.steadyReuse, Updated: w.updated, ReadyToFirstAccept: w.readyToFirstAccept.counts()}
	for r, n := range w.partial {
		wc.Partial[r] = n
	}
	for p, h := range w.phases {
		wc.Phases[p] = h.counts()
	}
	return wc
}

func restoreWorkload(wc WorkloadCounters) *workloadState {
	ws := newWorkloadState(wc.Labels)
	ws.updated, ws.steadyReuse = wc.Updated, wc.SteadyReuse
	for r, n := range wc.Partial {
		ws.partial[partialLabel(r)] += n
	}
	for p, hc := range wc.Phases {
		if h := ws.phases[p]; h != nil {
			h.restore(hc)
		}
	}
	ws.routingLag.restore(wc.RoutingLag)
	ws.readyToFirstAccept.restore(wc.ReadyToFirstAccept)
	return ws
}
