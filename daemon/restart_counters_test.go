package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
)

var rolloutTotals = []string{
	"drainwatch_terminations_total", "drainwatch_connections_refused_after_sigterm_total",
	"drainwatch_requests_killed_by_sigkill_total", "drainwatch_connections_accepted_after_endpoint_removal_total",
	"drainwatch_connections_reset_at_shutdown_total", "drainwatch_probe_connections_refused_total",
	"drainwatch_terminations_partial_total", "drainwatch_termination_phase_seconds", "drainwatch_routing_lag_seconds",
}

// completedAt is a complete termination of shop/web revision 7 that ended
// at end.
func completedAt(uid string, end time.Time, c correlate.Counts, outcome string, partial ...string) correlate.Termination {
	return correlate.Termination{
		PodUID: uid, Pod: "web-" + uid, Complete: true, Outcome: outcome, Counts: c,
		Partial: len(partial) > 0, PartialReasons: partial,
		Workload: collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "7"},
		Marks:    correlate.Marks{StopSignal: end.Add(-3 * time.Second), Exit: end.Add(-time.Second), PodGone: end},
	}
}

// TestCountersSurviveRestartBeyondTTL: a revision's first termination
// ended 90 min before the restart (beyond the 1 h TTL) and its second 40
// min before (its series is live). The store of the previous run restores
// every series exactly, including what the first termination counted,
// and the replayed stored terminations count nothing twice.
func TestCountersSurviveRestartBeyondTTL(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	first := completedAt("a", t0, correlate.Counts{RefusedAfterSigterm: 44, ProbeRefused: 3}, "refused")
	second := completedAt("b", t0.Add(50*time.Minute), correlate.Counts{RefusedAfterSigterm: 5,
		RequestsKilledBySigkill: 2, ConnectionsResetAtShutdown: 6, ProbeRefused: 4}, "partial", "daemon_down")

	before := previousRun(&now, first, second)
	dir := t.TempDir()
	saveRun(t, dir, before, now, first, second)

	d, err := New(Config{NodeName: "node-1", StateDir: dir, CgroupRoot: dir, Now: clock})
	must(t, err)
	cp := openRestored(t, d, dir)
	d.restoreCompleted(cp, stored(t, d))

	want := `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} 49
# HELP drainwatch_requests_killed_by_sigkill_total Accepted connections with a request in flight torn down because their process died of SIGKILL.
# TYPE drainwatch_requests_killed_by_sigkill_total counter
drainwatch_requests_killed_by_sigkill_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} 2
# HELP drainwatch_probe_connections_refused_total Connection attempts by this node's kubelet (readiness probes) refused during terminations: not client traffic, never in connections_refused_after_sigterm_total.
# TYPE drainwatch_probe_connections_refused_total counter
drainwatch_probe_connections_refused_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} 7
# HELP drainwatch_connections_reset_at_shutdown_total Connections the shutdown reset while the process was alive (ECONNRESET or an empty reply at the client): accepted connections still queued when the listener closed, handshakes it left half-open, and connections with a request in flight the server closed or reset before answering.
# TYPE drainwatch_connections_reset_at_shutdown_total counter
drainwatch_connections_reset_at_shutdown_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} 6
# HELP drainwatch_terminations_total Pod terminations completed on this node, by rollout, outcome (clean, refused, killed, refused_and_killed, blackholed, reset, partial) and cause (rollout, scale_down, eviction, preemption, node_pressure, node_shutdown, container_restart, oom_kill, delete, unknown).
# TYPE drainwatch_terminations_total counter
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="partial",revision="7",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="refused",revision="7",workload="web",workload_kind="Deployment"} 1
`
	must(t, testutil.GatherAndCompare(d.Metrics().Registry(), strings.NewReader(want),
		"drainwatch_connections_refused_after_sigterm_total", "drainwatch_requests_killed_by_sigkill_total",
		"drainwatch_probe_connections_refused_total", "drainwatch_connections_reset_at_shutdown_total",
		"drainwatch_terminations_total"))
	if got, was := rolloutExposition(t, d.Metrics()), rolloutExposition(t, before); got != was {
		t.Errorf("after the restart:\n%s\nbefore:\n%s", got, was)
	}
}

// TestCountersRebuiltFromAnOlderStore: a store without saved counters (an
// older drainwatch) rebuilds them from the terminations within the TTL. It
// is the one case docs/metrics.md names where a _total series falls: the
// previous run exposed 49 (both terminations; the series was live), the
// restarted daemon 5 (the first one is beyond the TTL and not counted
// again). Prometheus takes the fall for a counter reset.
func TestCountersRebuiltFromAnOlderStore(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	first := completedAt("a", t0, correlate.Counts{RefusedAfterSigterm: 44}, "refused")
	second := completedAt("b", t0.Add(50*time.Minute), correlate.Counts{RefusedAfterSigterm: 5}, "refused")
	before := previousRun(&now, first, second)
	must(t, testutil.GatherAndCompare(before.Registry(), strings.NewReader(refusedExposition(49)), "drainwatch_connections_refused_after_sigterm_total"))
	dir := t.TempDir()
	saveRun(t, dir, nil, now, first, second) // an older drainwatch saved no counters
	d, err := New(Config{NodeName: "node-1", StateDir: dir, CgroupRoot: dir, Now: clock})
	must(t, err)
	d.restoreCompleted(openRestored(t, d, dir), stored(t, d))
	must(t, testutil.GatherAndCompare(d.Metrics().Registry(), strings.NewReader(refusedExposition(5)), "drainwatch_connections_refused_after_sigterm_total"))
}

// TestCountersFromAnOlderCopyOfTheStore: the state directory restored from
// a copy taken after the first termination (44) and before the second (5)
// brings back the copy's counters, 44, where the last run exposed 49: the
// docs/metrics.md's other case of a falling series. Nothing is counted twice.
func TestCountersFromAnOlderCopyOfTheStore(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Second)
	clock := func() time.Time { return now }
	first := completedAt("a", t0, correlate.Counts{RefusedAfterSigterm: 44}, "refused")
	second := completedAt("b", t0.Add(10*time.Minute), correlate.Counts{RefusedAfterSigterm: 5}, "refused")
	m := exporter.NewMetrics(exporter.Options{Now: clock})
	m.ObserveTermination(first)
	copied := t.TempDir()
	saveRun(t, copied, m, now, first)
	now = t0.Add(10*time.Minute + time.Second)
	m.ObserveTermination(second)
	must(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(refusedExposition(49)), "drainwatch_connections_refused_after_sigterm_total"))
	now = t0.Add(20 * time.Minute)
	d, err := New(Config{NodeName: "node-1", StateDir: copied, CgroupRoot: copied, Now: clock})
	must(t, err)
	d.restoreCompleted(openRestored(t, d, copied), stored(t, d))
	must(t, testutil.GatherAndCompare(d.Metrics().Registry(), strings.NewReader(refusedExposition(44)), "drainwatch_connections_refused_after_sigterm_total"))
}

// refusedExposition is shop/web revision 7's refused-after-SIGTERM series
// at n.
func refusedExposition(n int) string {
	return fmt.Sprintf(`
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="7",workload="web",workload_kind="Deployment"} %d
`, n)
}

// previousRun is the previous run's metrics, read through *now: first
// counted 1 s after its end, second 1 s after its own (50 min later), the
// TTL applied at t0 + 90 min (where *now is left).
func previousRun(now *time.Time, first, second correlate.Termination) *exporter.Metrics {
	m := exporter.NewMetrics(exporter.Options{Now: func() time.Time { return *now }})
	*now = first.Marks.PodGone.Add(time.Second)
	m.ObserveTermination(first)
	*now = second.Marks.PodGone.Add(time.Second)
	m.ObserveTermination(second)
	*now = first.Marks.PodGone.Add(90 * time.Minute)
	m.Expire(nil)
	return m
}

// saveRun writes what the previous run's checkpoint leaves: its counters
// (none when m is nil) and its complete terminations.
func saveRun(t testing.TB, dir string, m *exporter.Metrics, alive time.Time, ts ...correlate.Termination) {
	t.Helper()
	s, err := OpenStore(dir)
	must(t, err)
	cp := Checkpoint{Alive: alive, Clean: true}
	if m != nil {
		cs := m.Counters()
		cp.Counters = &cs
	}
	must(t, s.SaveCheckpoint(cp, ts))
	must(t, s.Close())
}

func openRestored(t *testing.T, d *Daemon, dir string) Checkpoint {
	t.Helper()
	s, err := OpenStore(dir)
	must(t, err)
	t.Cleanup(func() { s.Close() })
	d.store = s
	cp, ok, err := s.LoadCheckpoint()
	must(t, err)
	if !ok {
		t.Fatal("no checkpoint stored")
	}
	return cp
}

// stored is the store's complete terminations.
func stored(t *testing.T, d *Daemon) []correlate.Termination {
	t.Helper()
	ts, err := d.store.Completed()
	must(t, err)
	return ts
}

func rolloutExposition(t *testing.T, m *exporter.Metrics) string {
	t.Helper()
	b, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain, rolloutTotals...)
	must(t, err)
	return string(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
