package exporter

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// DefaultSeriesTTL is how long the series of a revision outlive its last
// completed termination. It spans a slow rollout's pauses and several scrape
// and rule-evaluation intervals, so alerts see the increase before the series
// disappears.
const DefaultSeriesTTL = time.Hour

// Options configure Metrics. Zero values take defaults.
type Options struct {
	// SeriesTTL is DefaultSeriesTTL when zero.
	SeriesTTL time.Duration
	// Now is time.Now when nil; tests pass a fixed clock.
	Now func() time.Time
}

// Metrics is the /metrics side of drainwatch: per-rollout counters and
// histograms fed by completed terminations, and the daemon's self metrics.
// It is safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	ttl      time.Duration
	now      func() time.Time

	mu        sync.Mutex
	seen      map[string][4]string // termination key (Termination.Key) → revision labels it was counted in
	revisions map[[4]string]*revisionState
	workloads map[[3]string]*workloadState

	self *selfMetrics
}

// NewMetrics builds the metrics with their own registry (the rollout
// collector, the self metrics, and the Go and process collectors).
func NewMetrics(opts Options) *Metrics {
	if opts.SeriesTTL == 0 {
		opts.SeriesTTL = DefaultSeriesTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Metrics{
		registry:  prometheus.NewRegistry(),
		ttl:       opts.SeriesTTL,
		now:       opts.Now,
		seen:      map[string][4]string{},
		revisions: map[[4]string]*revisionState{},
		workloads: map[[3]string]*workloadState{},
		self:      newSelfMetrics(),
	}
	m.registry.MustRegister(rolloutCollector{m})
	m.self.register(m.registry)
	return m
}

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ObserveTermination counts one completed termination into its revision's
// series. It is idempotent by pod UID: a termination observed again (a
// correlator replaying its completed records) is not counted twice. It
// reports whether t was counted. Incomplete terminations are ignored: their
// counts may still change.
//
// The TTL runs from the termination's last mark, so a termination restored
// from the daemon's store after a restart counts into series that continue
// where they were, and one whose series had already expired is not counted
// (re-creating its series would look like new losses).
func (m *Metrics) ObserveTermination(t correlate.Termination) bool {
	if !t.Complete || t.PodUID == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.countable(t)
	if !ok {
		return false
	}
	rev := rolloutLabels(t.Workload)
	m.seen[t.Key()] = rev
	rs, ws := m.states(rev)
	rs.add(t, at)
	ws.add(t, at)
	return true
}

// countable says whether t is to be counted (not yet counted, not older
// than the TTL) and from when its series' TTL runs: its last mark.
func (m *Metrics) countable(t correlate.Termination) (time.Time, bool) {
	if _, dup := m.seen[t.Key()]; dup {
		return time.Time{}, false
	}
	now := m.now()
	end := t.Marks.Last()
	if end.IsZero() || end.After(now) {
		return now, true
	}
	return end, end.After(now.Add(-m.ttl))
}

// states returns (creating them) the revision's and its workload's states.
func (m *Metrics) states(rev [4]string) (*revisionState, *workloadState) {
	rs := m.revisions[rev]
	if rs == nil {
		rs = newRevisionState(rev)
		m.revisions[rev] = rs
	}
	wk := workloadOf(rev)
	ws := m.workloads[wk]
	if ws == nil {
		ws = newWorkloadState(wk)
		m.workloads[wk] = ws
	}
	return rs, ws
}

// Expire drops the series of revisions not updated for the TTL, except those
// of pending workloads (terminations not complete yet: their revision's
// series must still be there when they complete). A pending revision
// without series gets them at zero, so that the first termination of a
// rollout shows to rate() and increase() as an increase rather than as a
// series born with its value. Workload histograms expire with their last
// revision. It returns the number of revisions dropped; the daemon calls it
// periodically.
func (m *Metrics) Expire(pending []collector.Workload) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	keep := m.ensurePending(pending, now)
	cutoff := now.Add(-m.ttl)
	live := map[[3]string]bool{}
	dropped := 0
	for key, rs := range m.revisions {
		if keep[key] || rs.updated.After(cutoff) {
			live[workloadOf(key)] = true
			continue
		}
		delete(m.revisions, key)
		dropped++
	}
	m.expireWorkloads(live, cutoff)
	return dropped
}

// ensurePending creates the missing series of pending revisions, at zero
// (their workload's partial counts too), and returns the set of pending
// revisions.
func (m *Metrics) ensurePending(pending []collector.Workload, now time.Time) map[[4]string]bool {
	keep := make(map[[4]string]bool, len(pending))
	for _, w := range pending {
		key := rolloutLabels(w)
		keep[key] = true
		if m.revisions[key] == nil {
			rs, ws := m.states(key)
			rs.updated = now
			ws.updated = maxTime(ws.updated, now)
		}
	}
	return keep
}

// expireWorkloads drops the histograms of workloads without live revisions
// and the UIDs counted into dropped revisions.
func (m *Metrics) expireWorkloads(live map[[3]string]bool, cutoff time.Time) {
	for key, ws := range m.workloads {
		if !live[key] && !ws.updated.After(cutoff) {
			delete(m.workloads, key)
		}
	}
	for uid, key := range m.seen {
		if m.revisions[key] == nil {
			delete(m.seen, uid)
		}
	}
}

// PendingWorkloads returns the workloads of the terminations not complete
// yet, the argument Expire needs.
func PendingWorkloads(ts []correlate.Termination) []collector.Workload {
	var ws []collector.Workload
	for _, t := range ts {
		if !t.Complete {
			ws = append(ws, t.Workload)
		}
	}
	return ws
}

// AddSteadyReuseResets counts requests reset on reused connections of pods
// that were not terminating into their workloads' series
// (drainwatch_requests_reset_on_reused_connections_outside_terminations_total).
// The series lives while it keeps growing and expires like a workload's
// histograms, a TTL after its last increase with no live revision.
func (m *Metrics) AddSteadyReuseResets(counts []correlate.WorkloadCount) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, wc := range counts {
		key := workloadOf(rolloutLabels(wc.Workload))
		ws := m.workloads[key]
		if ws == nil {
			ws = newWorkloadState(key)
			m.workloads[key] = ws
		}
		ws.steadyReuse += uint64(max(wc.N, 0))
		ws.updated = maxTime(ws.updated, now)
	}
}
