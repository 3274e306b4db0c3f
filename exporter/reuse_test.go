package exporter

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// reusedTermination is a clean drain whose proxy kept sending on pooled
// connections the shutdown had closed: 3 requests reset on reused
// connections, 2 of them after the stop signal.
func reusedTermination() correlate.Termination {
	t := naiveTermination()
	t.PodUID, t.Pod = "uid-r", "web-6d4f-r"
	t.Counts = correlate.Counts{RequestsResetOnReusedConnections: 3}
	t.ReuseResets = correlate.ReuseResets{AfterStopSignal: 2,
		Reasons: map[string]int{"TCP_TIMEWAIT_SOCKET": 2, "TCP_ABORT_ON_DATA": 1}}
	t.Diagnoses = []correlate.Diagnosis{{Code: correlate.DiagResetOnReuse, Message: "3 requests arrived on keep-alive connections the server had already closed", Fix: "a drain delay"}}
	t.Outcome = correlate.OutcomeReset
	return t
}

const wantReuse = `
# HELP drainwatch_requests_reset_on_reused_connections_outside_terminations_total Requests reset on reused connections (see drainwatch_requests_reset_on_reused_connections_total) of pods that were not terminating: the server's keep-alive idle timeout is shorter than an upstream pool's.
# TYPE drainwatch_requests_reset_on_reused_connections_outside_terminations_total counter
drainwatch_requests_reset_on_reused_connections_outside_terminations_total{namespace="shop",workload="api",workload_kind="StatefulSet"} 7
drainwatch_requests_reset_on_reused_connections_outside_terminations_total{namespace="shop",workload="web",workload_kind="Deployment"} 5
# HELP drainwatch_requests_reset_on_reused_connections_total Requests that arrived on a keep-alive connection the pod's server had already closed (idle timeout, or the shutdown closing idle connections) and were answered with a RST (reasons TCP_ABORT_ON_DATA, TCP_TIMEWAIT_SOCKET): a proxy's pooled connection, a 502 at the proxy. During terminations.
# TYPE drainwatch_requests_reset_on_reused_connections_total counter
drainwatch_requests_reset_on_reused_connections_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 3
`

// TestReuseMetrics: the per-rollout count from terminations, the
// per-workload count outside terminations (two takes add up; no revision
// label), both restored whole from the saved counters.
func TestReuseMetrics(t *testing.T) {
	m := newTestMetrics()
	m.ObserveTermination(reusedTermination())
	web := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web"}
	api := collector.Workload{Namespace: "shop", Kind: "StatefulSet", Name: "api"}
	m.AddSteadyReuseResets([]correlate.WorkloadCount{{Workload: web, N: 2}, {Workload: api, N: 7}})
	m.AddSteadyReuseResets([]correlate.WorkloadCount{{Workload: web, N: 3}})
	restored := newTestMetrics()
	if err := restored.RestoreCounters(m.Counters()); err != nil {
		t.Fatal(err)
	}
	for name, mm := range map[string]*Metrics{"live": m, "restored": restored} {
		err := testutil.GatherAndCompare(mm.Registry(), strings.NewReader(wantReuse),
			"drainwatch_requests_reset_on_reused_connections_total",
			"drainwatch_requests_reset_on_reused_connections_outside_terminations_total")
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestReuseTimelineRowAndEvent: the timeline's fourth counts row gives
// the reasons; the diagnosis has its own Event reason.
func TestReuseTimelineRowAndEvent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(reusedTermination())}); err != nil {
		t.Fatal(err)
	}
	const row = "  reset on reused connections: 3 (after the stop signal: 2; TCP_ABORT_ON_DATA 1, TCP_TIMEWAIT_SOCKET 2)\n"
	if !strings.Contains(b.String(), row) || strings.Contains(b.String(), "keep-alive:") {
		t.Errorf("timeline:\n%s\nwant the row\n%s\nand no keep-alive row (no idle close)", b.String(), row)
	}
	// With the server's idle closes, the measured idle timeouts follow.
	term := reusedTermination()
	term.KeepAlive = correlate.KeepAlive{IdleCloses: 4, IdleMin: 300 * time.Millisecond, IdleMax: 304 * time.Millisecond, PoolReuses: 1, PoolIdleMax: 604917784}
	b.Reset()
	if err := WriteTimelines(&b, []TerminationView{NewTerminationView(term)}); err != nil {
		t.Fatal(err)
	}
	const ka = row + "  keep-alive: the server closed 4 idle connections after 0.300s to 0.304s idle; a pool reused 1 of them, the longest 0.605s after its last data\n"
	if !strings.Contains(b.String(), ka) {
		t.Errorf("timeline:\n%s\nwant the rows\n%s", b.String(), ka)
	}
	if r := EventReason(correlate.DiagResetOnReuse); r != "DrainResetOnReusedConnections" {
		t.Errorf("Event reason %q, want DrainResetOnReusedConnections", r)
	}
}
