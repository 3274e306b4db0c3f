package exporter

import "github.com/drainwatch/drainwatch/correlate"

// ObserveStartup counts a complete startup into its revision's series (the
// new pods' side of a rollout) once, and reports whether it did. Its key
// in the counted set is the pod's UID with a "startup/" prefix, apart from
// the pod's termination.
func (m *Metrics) ObserveStartup(s correlate.Startup) bool {
	if !s.Complete || s.PodUID == "" {
		return false
	}
	key := "startup/" + s.PodUID
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.seen[key]; dup {
		return false
	}
	now := m.now()
	if end := s.Marks.WindowEnd; !end.IsZero() && !end.After(now.Add(-m.ttl)) {
		return false // older than its series would live
	}
	rev := rolloutLabels(s.Workload)
	m.seen[key] = rev
	rs, ws := m.states(rev)
	n := s.Counts
	rs.refusedAfterReady += uint64(max(n.RefusedAfterReady, 0))
	rs.refusedBeforeReady += uint64(max(n.RefusedBeforeReady, 0))
	rs.resetAfterReady += uint64(max(n.ResetAfterReady, 0))
	rs.updated = maxTime(rs.updated, now)
	if !s.Marks.FirstAccept.IsZero() && !s.Marks.Ready.IsZero() {
		ws.readyToFirstAccept.observe(s.ReadyToFirstAccept.Seconds())
	}
	ws.updated = maxTime(ws.updated, now)
	return true
}
