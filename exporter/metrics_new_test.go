package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drainwatch/drainwatch/correlate"
)

const wantNewCounters = `
# HELP drainwatch_connections_reset_at_shutdown_total Connections the shutdown reset while the process was alive (ECONNRESET or an empty reply at the client): accepted connections still queued when the listener closed, handshakes it left half-open, and connections with a request in flight the server closed or reset before answering.
# TYPE drainwatch_connections_reset_at_shutdown_total counter
drainwatch_connections_reset_at_shutdown_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 6
# HELP drainwatch_probe_connections_refused_total Connection attempts by this node's kubelet (readiness probes) refused during terminations: not client traffic, never in connections_refused_after_sigterm_total.
# TYPE drainwatch_probe_connections_refused_total counter
drainwatch_probe_connections_refused_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 4
# HELP drainwatch_terminations_partial_total Terminations whose kernel view is incomplete, one increment per reason: daemon_started_during_termination, stop_signal_not_seen, exit_not_seen, accept_history_overflow, host_network, netns_not_bound, early_events_overflow, api_unreachable, events_lost, daemon_down, probe_unavailable, probe_fallback, conn_tracking_full, loss_counters_unreadable, other.
# TYPE drainwatch_terminations_partial_total counter
drainwatch_terminations_partial_total{namespace="shop",reason="accept_history_overflow",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="api_unreachable",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="conn_tracking_full",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="daemon_down",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_partial_total{namespace="shop",reason="daemon_started_during_termination",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="early_events_overflow",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="events_lost",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="exit_not_seen",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="host_network",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="loss_counters_unreadable",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="netns_not_bound",workload="web",workload_kind="Deployment"} 0
drainwatch_terminations_partial_total{namespace="shop",reason="other",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_partial_total{namespace="shop",reason="probe_fallback",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_partial_total{namespace="shop",reason="probe_unavailable",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_partial_total{namespace="shop",reason="stop_signal_not_seen",workload="web",workload_kind="Deployment"} 0
`

// TestMetricsShutdownResetsProbesPartial: the new per-rollout counters
// carry the termination's counts; a partial termination counts once per
// reason, a reason's detail and unknown reasons bounded. A probe's fallback
// (every termination on 5.10) is a reason of its own, not other.
func TestMetricsShutdownResetsProbesPartial(t *testing.T) {
	m := newTestMetrics()
	term := probedTermination()
	term.PartialReasons = append(term.PartialReasons, "probe_fallback:refused")
	if !m.ObserveTermination(term) || m.ObserveTermination(term) {
		t.Fatal("the probed termination was not counted exactly once")
	}
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantNewCounters),
		"drainwatch_connections_reset_at_shutdown_total", "drainwatch_probe_connections_refused_total",
		"drainwatch_terminations_partial_total")
	if err != nil {
		t.Fatal(err)
	}
}

// TestPendingWorkloadPartialStartsAtZero: every partial reason of a
// workload with a termination in progress is at zero before it completes.
func TestPendingWorkloadPartialStartsAtZero(t *testing.T) {
	m := newTestMetrics()
	m.Expire(PendingWorkloads(nil))
	incomplete := probedTermination()
	incomplete.Complete = false
	m.Expire(PendingWorkloads([]correlate.Termination{incomplete}))
	want := strings.ReplaceAll(wantNewCounters, "} 1\n", "} 0\n")
	want = strings.ReplaceAll(strings.ReplaceAll(want, "} 6\n", "} 0\n"), "} 4\n", "} 0\n")
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"drainwatch_connections_reset_at_shutdown_total", "drainwatch_probe_connections_refused_total",
		"drainwatch_terminations_partial_total")
	if err != nil {
		t.Fatal(err)
	}
}
