package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// checkPrometheus compares, for every scenario namespace that took its
// numbers from the daemons' API, Prometheus's sums of the two counters with
// the API's: the metrics path must tell the same story. A difference
// becomes the row's error.
func (l *Lab) checkPrometheus(ctx context.Context, results []Result) {
	checked, differ := 0, 0
	for i, r := range results {
		if r.Source != "api" || r.Error != "" {
			continue
		}
		checked++
		refused, killed, err := l.promTotals(ctx, r.Namespace)
		switch {
		case err != nil:
			results[i].Error = err.Error()
		case refused != r.DrainwatchRefused || killed != r.DrainwatchKilled:
			results[i].Error = fmt.Sprintf("prometheus (refused %d, killed %d) differs from the daemons' API (refused %d, killed %d)",
				refused, killed, r.DrainwatchRefused, r.DrainwatchKilled)
		}
		if results[i].Error != "" {
			differ++
		}
	}
	l.progress.Step("prometheus against the daemons' API: %d scenarios checked, %d differ", checked, differ)
}

// promTotals waits until Prometheus has scraped the namespace's
// terminations and returns its refused and killed totals.
func (l *Lab) promTotals(ctx context.Context, ns string) (refused, killed int, err error) {
	sel := fmt.Sprintf(`{namespace=%q}`, ns)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sum := func(metric string) string { return "sum(" + metric + sel + ")" }
	if _, err := l.Prom.QueryWhen(qctx, sum("drainwatch_terminations_total"), nonEmpty); err != nil {
		return 0, 0, fmt.Errorf("prometheus: %w", err)
	}
	vals := make([]int, 2)
	for i, m := range []string{"drainwatch_connections_refused_after_sigterm_total", "drainwatch_requests_killed_by_sigkill_total"} {
		s, err := l.Prom.Query(ctx, sum(m))
		if err != nil {
			return 0, 0, fmt.Errorf("prometheus: %w", err)
		}
		vals[i] = first(s)
	}
	return vals[0], vals[1], nil
}

// first is the value of a one-sample vector, 0 when empty.
func first(s []promtest.Sample) int {
	if len(s) == 0 {
		return 0
	}
	return int(s[0].Value)
}
