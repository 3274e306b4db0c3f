package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// promTotals are a namespace's sums of drainwatch's counters.
type promTotals struct{ refused, killed, killedAtExit, probes, resets int }

// counterMetrics are the counters the table compares, in promTotals' order.
var counterMetrics = []string{
	"drainwatch_connections_refused_after_sigterm_total",
	"drainwatch_requests_killed_by_sigkill_total",
	"drainwatch_requests_killed_at_exit_total",
	"drainwatch_probe_connections_refused_total",
	"drainwatch_connections_reset_at_shutdown_total",
}

func (t *promTotals) fields() []*int {
	return []*int{&t.refused, &t.killed, &t.killedAtExit, &t.probes, &t.resets}
}

// apiTotals are a row's drainwatch numbers as the daemons' API gave them.
func apiTotals(r Result) promTotals {
	return promTotals{r.DrainwatchRefused, r.DrainwatchKilled, r.DrainwatchKilledAtExit, r.DrainwatchProbeRefused, r.DrainwatchResetAtShutdown}
}

// checkPrometheus compares, for every scenario namespace that took its
// numbers from the daemons' API, Prometheus's sums of the counters with
// the API's: the metrics path must tell the same story. A difference
// becomes the row's error.
func (l *Lab) checkPrometheus(ctx context.Context, results []Result) {
	checked, differ := 0, 0
	for i, r := range results {
		if r.Source != "api" || r.Error != "" {
			continue
		}
		checked++
		prom, err := l.promTotals(ctx, r.Namespace)
		switch {
		case err != nil:
			results[i].Error = err.Error()
		case prom != apiTotals(r):
			results[i].Error = fmt.Sprintf("prometheus %s differs from the daemons' API %s", prom, apiTotals(r))
		}
		if results[i].Error != "" {
			differ++
		}
	}
	l.progress.Step("prometheus against the daemons' API: %d scenarios checked, %d differ", checked, differ)
}

func (t promTotals) String() string {
	return fmt.Sprintf("(refused %d, killed %d, killed at exit %d, probe refused %d, reset at shutdown %d)",
		t.refused, t.killed, t.killedAtExit, t.probes, t.resets)
}

// promTotals waits until Prometheus has scraped the namespace's
// terminations and returns its totals.
func (l *Lab) promTotals(ctx context.Context, ns string) (promTotals, error) {
	sel := fmt.Sprintf(`{namespace=%q}`, ns)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sum := func(metric string) string { return "sum(" + metric + sel + ")" }
	var t promTotals
	if _, err := l.Prom.QueryWhen(qctx, sum("drainwatch_terminations_total"), nonEmpty); err != nil {
		return t, fmt.Errorf("prometheus: %w", err)
	}
	for i, f := range t.fields() {
		s, err := l.Prom.Query(ctx, sum(counterMetrics[i]))
		if err != nil {
			return t, fmt.Errorf("prometheus: %w", err)
		}
		*f = first(s)
	}
	return t, nil
}

// first is the value of a one-sample vector, 0 when empty.
func first(s []promtest.Sample) int {
	if len(s) == 0 {
		return 0
	}
	return int(s[0].Value)
}
