package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/promtest"
)

// promTotals are a namespace's sums of drainwatch's counters.
type promTotals struct{ refused, killed, killedAtExit, probes, resets, blackholed int }

// counterMetrics are the counters the table compares, in promTotals' order.
var counterMetrics = []string{
	"drainwatch_connections_refused_after_sigterm_total",
	"drainwatch_requests_killed_by_sigkill_total",
	"drainwatch_requests_killed_at_exit_total",
	"drainwatch_probe_connections_refused_total",
	"drainwatch_connections_reset_at_shutdown_total",
	"drainwatch_connections_blackholed_total",
}

func (t *promTotals) fields() []*int {
	return []*int{&t.refused, &t.killed, &t.killedAtExit, &t.probes, &t.resets, &t.blackholed}
}

// apiTotals are the daemons' API's sums over the namespace's complete
// terminations (the ones the metrics count): every one, not only the
// row's, since a scenario may stop more afterwards (the liveness
// scenario's scale to zero deletes its pod, whose readiness probe can meet
// the closed listener).
func (l *Lab) apiTotals(ctx context.Context, ns string) (promTotals, error) {
	vs, err := l.Terminations(ctx, ns)
	if err != nil {
		return promTotals{}, err
	}
	vs = slices.DeleteFunc(vs, func(v exporter.TerminationView) bool { return !v.Complete })
	c := sumCounts(vs...)
	return promTotals{c.RefusedAfterSigterm, c.RequestsKilledBySigkill, c.RequestsKilledAtExit, c.ProbeRefused, c.ConnectionsResetAtShutdown, c.ConnectionsBlackholed}, nil
}

// checkPrometheus compares, for every scenario namespace that took its
// numbers from the daemons' API, Prometheus's sums of the counters with
// the API's for the same namespace, read until they agree (a termination
// completing between the two reads) or promAgreeTimeout: the metrics path
// must tell the same story. A difference becomes the row's error.
func (l *Lab) checkPrometheus(ctx context.Context, results []Result) {
	checked, differ := 0, 0
	for i, r := range results {
		if r.Source != "api" || r.Error != "" {
			continue
		}
		checked++
		prom, api, err := l.promAgrees(ctx, r.Namespace)
		switch {
		case err != nil:
			results[i].Error = err.Error()
		case prom != api:
			results[i].Error = fmt.Sprintf("prometheus %s differs from the daemons' API %s", prom, api)
		}
		if results[i].Error != "" {
			differ++
		}
	}
	l.progress.Step("prometheus against the daemons' API: %d scenarios checked, %d differ", checked, differ)
}

// promAgreeTimeout bounds how long checkPrometheus waits for Prometheus's
// next scrapes to catch up with the API.
const promAgreeTimeout = 30 * time.Second

// promAgrees reads Prometheus's and the API's totals of ns until they are
// equal or promAgreeTimeout passes, and returns the last of each.
func (l *Lab) promAgrees(ctx context.Context, ns string) (prom, api promTotals, err error) {
	deadline := time.Now().Add(promAgreeTimeout)
	for {
		if prom, err = l.promTotals(ctx, ns); err != nil {
			return prom, api, err
		}
		if api, err = l.apiTotals(ctx, ns); err != nil || prom == api || time.Now().After(deadline) {
			return prom, api, err
		}
		select {
		case <-ctx.Done():
			return prom, api, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (t promTotals) String() string {
	return fmt.Sprintf("(refused %d, killed %d, killed at exit %d, probe refused %d, reset at shutdown %d, blackholed %d)",
		t.refused, t.killed, t.killedAtExit, t.probes, t.resets, t.blackholed)
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
