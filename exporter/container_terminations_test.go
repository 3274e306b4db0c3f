package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/drainwatch/drainwatch/correlate"
)

// A pod restarts its containers many times and is then deleted: each of
// these is a termination of its own (Termination.Key), counted once each,
// replays of any of them not at all.
func TestContainerTerminationsCountedOnceEach(t *testing.T) {
	m := newTestMetrics()
	restart := func(startSecond float64) correlate.Termination {
		r := naiveTermination()
		r.Container, r.Cause = "server", correlate.CauseContainerRestart
		r.Marks = correlate.Marks{Killing: at(startSecond), StopSignal: at(startSecond + 0.01), Exit: at(startSecond + 1)}
		r.Counts = correlate.Counts{RefusedAfterSigterm: 5}
		return r
	}
	counted := []bool{
		m.ObserveTermination(restart(1)), m.ObserveTermination(restart(10)),
		m.ObserveTermination(restart(1)), // replay
		m.ObserveTermination(naiveTermination()),
	}
	want := []bool{true, true, false, true}
	for i := range want {
		if counted[i] != want[i] {
			t.Fatalf("ObserveTermination #%d = %v, want %v", i, counted[i], want[i])
		}
	}
	const wantTotal = `
# HELP drainwatch_connections_refused_after_sigterm_total Connection attempts answered with a RST (no socket: ECONNREFUSED at the client) from the stop signal until the pod's network namespace was gone.
# TYPE drainwatch_connections_refused_after_sigterm_total counter
drainwatch_connections_refused_after_sigterm_total{namespace="shop",revision="3",workload="web",workload_kind="Deployment"} 54
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantTotal), "drainwatch_connections_refused_after_sigterm_total"); err != nil {
		t.Fatal(err)
	}
}
