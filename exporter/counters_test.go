package exporter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/drainwatch/drainwatch/correlate"
)

// shifted moves every mark of t by d and gives it another pod.
func shifted(t correlate.Termination, uid string, d time.Duration) correlate.Termination {
	m := &t.Marks
	for _, x := range []*time.Time{&m.DeleteRequested, &m.DeletionSeen, &m.Killing, &m.PrestopFailed, &m.StopSignal,
		&m.EndpointsNotReady, &m.ListenerClosed, &m.LastAccept, &m.Sigkill, &m.Exit, &m.PodGone} {
		if !x.IsZero() {
			*x = x.Add(d)
		}
	}
	t.PodUID = uid
	return t
}

// beyondTTL is a revision whose first two terminations ended more than the
// 1 h TTL ago and whose third, 50 min later, keeps its series live.
func beyondTTL(c *clock) (*Metrics, []correlate.Termination) {
	ts := []correlate.Termination{naiveTermination(), killedTermination(), shifted(probedTermination(), "uid-p", 50*time.Minute)}
	c.t = at(60)
	m := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	m.ObserveTermination(ts[0])
	m.ObserveTermination(ts[1])
	c.t = at(60).Add(50 * time.Minute)
	m.ObserveTermination(ts[2])
	c.t = at(60).Add(90 * time.Minute)
	m.Expire(nil)
	return m, ts
}

const wantTotalsBeyondTTL = `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 88
# HELP drainwatch_requests_killed_by_sigkill_total Accepted connections with a request in flight torn down because their process died of SIGKILL.
# TYPE drainwatch_requests_killed_by_sigkill_total counter
drainwatch_requests_killed_by_sigkill_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 3
# HELP drainwatch_connections_accepted_after_endpoint_removal_total Connections accepted after the pod's endpoint became not ready: routing had not converged yet.
# TYPE drainwatch_connections_accepted_after_endpoint_removal_total counter
drainwatch_connections_accepted_after_endpoint_removal_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 3
# HELP drainwatch_terminations_total Pod terminations completed on this node, by rollout, outcome (clean, refused, killed, refused_and_killed, blackholed, reset, partial) and cause (rollout, scale_down, eviction, preemption, node_pressure, node_shutdown, container_restart, oom_kill, delete, unknown).
# TYPE drainwatch_terminations_total counter
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="killed",revision="3",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="partial",revision="3",workload="web",workload_kind="Deployment"} 1
drainwatch_terminations_total{cause="rollout",namespace="shop",outcome="refused",revision="3",workload="web",workload_kind="Deployment"} 1
`

var totalsBeyondTTL = []string{"drainwatch_connections_refused_after_sigterm_total", "drainwatch_requests_killed_by_sigkill_total",
	"drainwatch_connections_accepted_after_endpoint_removal_total", "drainwatch_terminations_total"}

// TestCountersRestoredBeyondTTL: a revision's series hold terminations
// older than the TTL; a restart that restores the saved counters (JSON, as
// the daemon stores them) and then replays the stored terminations exposes
// exactly what the previous run did, and counts later terminations on top.
func TestCountersRestoredBeyondTTL(t *testing.T) {
	c := &clock{}
	before, stored := beyondTTL(c)
	after := restarted(t, before, c)
	for _, st := range stored {
		if after.ObserveTermination(st) {
			t.Errorf("%s counted again after the restore", st.PodUID)
		}
	}
	must(t, testutil.GatherAndCompare(after.Registry(), strings.NewReader(wantTotalsBeyondTTL), totalsBeyondTTL...))
	if got, want := exposition(t, after), exposition(t, before); got != want {
		t.Errorf("restored exposition:\n%s\nwant the previous run's:\n%s", got, want)
	}

	if !after.ObserveTermination(shifted(naiveTermination(), "uid-later", 89*time.Minute)) {
		t.Fatal("a termination completed after the restart was not counted")
	}
	want := strings.Replace(wantTotalsBeyondTTL, `workload_kind="Deployment"} 88`, `workload_kind="Deployment"} 132`, 1)
	want = strings.Replace(want, `accepted_after_endpoint_removal_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 3`,
		`accepted_after_endpoint_removal_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 6`, 1)
	want = strings.Replace(want, `outcome="refused",revision="3",workload="web",workload_kind="Deployment"} 1`,
		`outcome="refused",revision="3",workload="web",workload_kind="Deployment"} 2`, 1)
	must(t, testutil.GatherAndCompare(after.Registry(), strings.NewReader(want), totalsBeyondTTL...))
}

// TestCountersRebuiltWithoutState shows what the saved counters prevent: a
// daemon rebuilding its counters from the stored terminations alone counts
// only those within the TTL, and refused_after_sigterm_total would drop
// from 88 to 44.
func TestCountersRebuiltWithoutState(t *testing.T) {
	c := &clock{}
	_, stored := beyondTTL(c)
	rebuilt := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	for _, st := range stored {
		rebuilt.ObserveTermination(st)
	}
	want := `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 44
`
	must(t, testutil.GatherAndCompare(rebuilt.Registry(), strings.NewReader(want), totalsBeyondTTL[0]))
}

// TestCountersExpireWithTheirSeries: a series the TTL expires leaves the
// saved state too, and a state of another version is refused.
func TestCountersExpireWithTheirSeries(t *testing.T) {
	c := &clock{}
	m, _ := beyondTTL(c)
	c.t = c.t.Add(time.Hour)
	if n := m.Expire(nil); n != 1 {
		t.Fatalf("expired %d revisions, want 1", n)
	}
	cs := m.Counters()
	if len(cs.Revisions) != 0 || len(cs.Workloads) != 0 || len(cs.Counted) != 0 || cs.Version != CounterStateVersion {
		t.Errorf("state after expiry = %+v, want empty at version %d", cs, CounterStateVersion)
	}
	cs.Version = CounterStateVersion + 1
	if err := m.RestoreCounters(cs); err == nil {
		t.Error("a state of a future version was restored")
	}
}

// restarted is a daemon's Metrics after a restart: before's counters saved
// as JSON, as the daemon stores them, and restored.
func restarted(t *testing.T, before *Metrics, c *clock) *Metrics {
	t.Helper()
	saved, err := json.Marshal(before.Counters())
	must(t, err)
	var cs CounterState
	must(t, json.Unmarshal(saved, &cs))
	after := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	must(t, after.RestoreCounters(cs))
	return after
}

// exposition is the text exposition of the per-rollout series.
func exposition(t *testing.T, m *Metrics) string {
	t.Helper()
	b, err := testutil.CollectAndFormat(rolloutCollector{m}, expfmt.TypeTextPlain)
	must(t, err)
	return string(b)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Counters saved before terminations had a cause (outcome keys without
// one) are restored with cause "unknown", never dropped.
func TestCountersRestoredFromBeforeCauses(t *testing.T) {
	var cs CounterState
	must(t, json.Unmarshal([]byte(`{"version":1,"revisions":[{"labels":["shop","Deployment","web","3"],"outcomes":{"refused":2},
		"refused_after_sigterm":88,"updated":"2026-11-30T10:00:00Z"}]}`), &cs))
	m := NewMetrics(Options{SeriesTTL: time.Hour, Now: func() time.Time { return at(60) }})
	must(t, m.RestoreCounters(cs))
	want := `
# HELP drainwatch_terminations_total Pod terminations completed on this node, by rollout, outcome (clean, refused, killed, refused_and_killed, blackholed, reset, partial) and cause (rollout, scale_down, eviction, preemption, node_pressure, node_shutdown, container_restart, oom_kill, delete, unknown).
# TYPE drainwatch_terminations_total counter
drainwatch_terminations_total{cause="unknown",namespace="shop",outcome="refused",revision="3",workload="web",workload_kind="Deployment"} 2
`
	must(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "drainwatch_terminations_total"))
}

// Requests killed at exit survive a restart through the saved counters,
// and a state saved before they were counted restores them at 0.
func TestCountersKilledAtExitRestored(t *testing.T) {
	const name = "drainwatch_requests_killed_at_exit_total"
	c := &clock{t: at(60)}
	before := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	term := killedTermination()
	term.Counts = correlate.Counts{RequestsKilledAtExit: 4, InflightAtStopSignal: 4}
	before.ObserveTermination(term)
	after := restarted(t, before, c)
	want := `
# HELP drainwatch_requests_killed_at_exit_total Accepted connections with a request in flight torn down because their process exited by anything other than SIGKILL: the stop signal's default action (no handler), another fatal signal (a crash), or its own exit before its requests finished (a shutdown timeout shorter than the longest request).
# TYPE drainwatch_requests_killed_at_exit_total counter
drainwatch_requests_killed_at_exit_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 4
`
	must(t, testutil.GatherAndCompare(after.Registry(), strings.NewReader(want), name))

	var old CounterState
	must(t, json.Unmarshal([]byte(`{"version":1,"revisions":[{"labels":["shop","Deployment","web","3"],"outcomes":{"killed":1},
		"requests_killed_by_sigkill":3,"updated":"2026-11-30T10:00:00Z"}]}`), &old))
	m := NewMetrics(Options{SeriesTTL: time.Hour, Now: c.now})
	must(t, m.RestoreCounters(old))
	must(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(strings.Replace(want, "} 4", "} 0", 1)), name))
}
