package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/drainwatch/drainwatch/collector"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newTestMetrics has its clock a minute after the synthetic terminations.
func newTestMetrics() *Metrics {
	return NewMetrics(Options{Now: func() time.Time { return at(60) }})
}

func observeSequence(t *testing.T, m *Metrics) {
	t.Helper()
	counted := []bool{
		m.ObserveTermination(naiveTermination()),
		m.ObserveTermination(killedTermination()),
		m.ObserveTermination(naiveTermination()), // replay: must not count twice
		m.ObserveTermination(barePod()),
	}
	incomplete := naiveTermination()
	incomplete.PodUID, incomplete.Complete = "uid-d", false
	counted = append(counted, m.ObserveTermination(incomplete))
	want := []bool{true, true, false, true, false}
	for i := range want {
		if counted[i] != want[i] {
			t.Fatalf("ObserveTermination #%d = %v, want %v", i, counted[i], want[i])
		}
	}
}

const wantCounters = `
# HELP drainwatch_connections_accepted_after_endpoint_removal_total Connections accepted after the pod's endpoint became not ready: routing had not converged yet.
# TYPE drainwatch_connections_accepted_after_endpoint_removal_total counter
drainwatch_connections_accepted_after_endpoint_removal_total{namespace="default",revision="",workload="",workload_kind="none"} 0
drainwatch_connections_accepted_after_endpoint_removal_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 3
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="default",revision="",workload="",workload_kind="none"} 0
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 44
# HELP drainwatch_requests_killed_by_sigkill_total Accepted connections with a request in flight torn down because their process died of SIGKILL.
# TYPE drainwatch_requests_killed_by_sigkill_total counter
drainwatch_requests_killed_by_sigkill_total{namespace="default",revision="",workload="",workload_kind="none"} 0
drainwatch_requests_killed_by_sigkill_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 1
# HELP drainwatch_terminations_total Pod terminations completed on this node, by rollout, outcome (clean, refused, killed, refused_and_killed, blackholed, reset, partial) and cause (rollout, scale_down, eviction, preemption, node_pressure, node_shutdown, container_restart, oom_kill, delete, unknown).
# TYPE drainwatch_terminations_total counter
drainwatch_terminations_total{cause="delete",namespace="default",outcome="clean",revision="",workload="",workload_kind="none"} 1
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="killed",revision="3",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_total{cause="rollout",namespace="shop",outcome="refused",revision="3",workload="web",workload_kind="Deployment"} 1
`

func TestMetricsCountersAfterSequence(t *testing.T) {
	m := newTestMetrics()
	observeSequence(t, m)
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantCounters),
		"drainwatch_terminations_total", "drainwatch_connections_refused_after_sigterm_total",
		"drainwatch_requests_killed_by_sigkill_total", "drainwatch_connections_accepted_after_endpoint_removal_total")
	if err != nil {
		t.Fatal(err)
	}
}

func TestMetricsPromlintClean(t *testing.T) {
	m := newTestMetrics()
	observeSequence(t, m)
	m.ObserveTermination(probedTermination())
	m.SetProbeState("tcp_send_reset", "attached")
	m.CountKernelEvent(collector.EventRefused)
	m.CountUnattributed(collector.EventReset)
	m.AddKernelEventsLost(2)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsSeriesExpireAfterTTL(t *testing.T) {
	// Observed at +40 s: the TTL runs from each termination's last mark
	// (web: +32 s, the bare pod: +0.25 s).
	c := &clock{t: at(40)}
	m := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	observeSequence(t, m)
	c.t = c.t.Add(59 * time.Minute)
	if n := m.Expire(nil); n != 0 {
		t.Fatalf("expired %d revisions before the TTL, want 0", n)
	}
	c.t = c.t.Add(2 * time.Minute)
	// A termination of web revision 3 is still in progress: web stays.
	if n := m.Expire([]collector.Workload{web3}); n != 1 {
		t.Fatalf("expired %d revisions with web pending, want 1 (the bare pod's)", n)
	}
	if n := testutil.CollectAndCount(rolloutCollector{m}, "drainwatch_terminations_total"); n != 2 {
		t.Fatalf("%d terminations_total series left, want 2 (web: refused, killed)", n)
	}
	if n := m.Expire(nil); n != 1 {
		t.Fatalf("expired %d revisions once nothing is pending, want 1", n)
	}
	if n := testutil.CollectAndCount(rolloutCollector{m}); n != 0 {
		t.Fatalf("%d series left after expiry, want 0", n)
	}
}

// TestRestoredTerminations: after a daemon restart the store replays its
// completed terminations. Those within the TTL continue their series; one
// whose series had expired is not counted again.
func TestRestoredTerminations(t *testing.T) {
	c := &clock{t: at(3).Add(30 * time.Minute)}
	m := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	if !m.ObserveTermination(naiveTermination()) {
		t.Fatal("a termination ended 30 min ago (within the TTL) was not counted")
	}
	c.t = at(32).Add(61 * time.Minute)
	if m.ObserveTermination(killedTermination()) {
		t.Fatal("a termination ended 61 min ago (beyond the TTL) was counted")
	}
	// The naive termination's series expire an hour after its last mark.
	if n := m.Expire(nil); n != 1 {
		t.Fatalf("expired %d revisions, want 1", n)
	}
}

// TestPendingRevisionStartsAtZero: a rollout's revision has its counters at
// zero while its first termination is in progress.
func TestPendingRevisionStartsAtZero(t *testing.T) {
	m := NewMetrics(Options{})
	rev4 := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "4"}
	if n := m.Expire([]collector.Workload{rev4}); n != 0 {
		t.Fatalf("expired %d", n)
	}
	want := `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="4",workload="web",workload_kind="Deployment"} 0
`
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"drainwatch_connections_refused_after_sigterm_total", "drainwatch_terminations_total")
	if err != nil {
		t.Fatal(err)
	}
}
