package advise

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Scope is the workloads to read from Prometheus: Namespace "" is every
// namespace; Kind and Name, when set, narrow to one workload.
type Scope struct{ Namespace, Kind, Name string }

// Window is what ReadHistograms counts: what the counters gained from
// Start to End.
type Window struct{ Start, End time.Time }

// The shipped series advise reads (exporter/collect.go), and the label
// values it picks from them.
const (
	routingLagBuckets  = "drainwatch_routing_lag_seconds_bucket"
	phaseBuckets       = "drainwatch_termination_phase_seconds_bucket"
	terminationsTotal  = "drainwatch_terminations_total"
	reuseTotal         = "drainwatch_requests_reset_on_reused_connections_total"
	reuseOutsideTotal  = "drainwatch_requests_reset_on_reused_connections_outside_terminations_total"
	killedBySigkill    = "drainwatch_requests_killed_by_sigkill_total"
	containerRestart   = "container_restart" // correlate.CauseContainerRestart
	phaseDrain         = "drain"             // correlate.PhaseDrain
	phaseGraceUsed     = "grace_used"        // correlate.PhaseGraceUsed
	workloadGrouping   = "namespace, workload_kind, workload"
	startValueLookback = "5m" // Prometheus' default lookback delta
)

// counted is one metric advise reads: its series, the labels beyond the
// workload's it is summed by, and where the sums go.
type counted struct {
	metric, match string
	by            []string
	put           func(h *Histograms, labels model.Metric, n int)
}

var countedMetrics = []counted{
	{metric: routingLagBuckets, by: []string{"le"}, put: func(h *Histograms, l model.Metric, n int) {
		h.RoutingLag = append(h.RoutingLag, Bucket{LE: le(l), Count: n})
	}},
	{metric: phaseBuckets, match: `phase=~"` + phaseDrain + "|" + phaseGraceUsed + `"`, by: []string{"le", "phase"},
		put: func(h *Histograms, l model.Metric, n int) {
			b := Bucket{LE: le(l), Count: n}
			if l["phase"] == phaseDrain {
				h.Drain = append(h.Drain, b)
			} else {
				h.Grace = append(h.Grace, b)
			}
		}},
	{metric: terminationsTotal, by: []string{"cause"}, put: func(h *Histograms, l model.Metric, n int) {
		if l["cause"] == containerRestart {
			h.ContainerRestarts += n
		} else {
			h.Terminations += n
		}
	}},
	{metric: reuseTotal, put: func(h *Histograms, _ model.Metric, n int) { h.ResetsOnReuse += n }},
	{metric: reuseOutsideTotal, put: func(h *Histograms, _ model.Metric, n int) { h.ResetsOutsideTerminations += n }},
	{metric: killedBySigkill, put: func(h *Histograms, _ model.Metric, n int) { h.RequestsKilledBySigkill += n }},
}

// le is a bucket's upper bound; +Inf parses as such.
func le(l model.Metric) float64 {
	v, err := strconv.ParseFloat(string(l["le"]), 64)
	if err != nil {
		return math.Inf(1)
	}
	return v
}

// ReadHistograms reads, per workload in scope, what the shipped counters
// and histograms gained over w, summed across the daemons that export
// them. Warnings are Prometheus'.
func ReadHistograms(ctx context.Context, api v1.API, scope Scope, w Window) ([]Histograms, v1.Warnings, error) {
	r := &reader{api: api, scope: scope, w: w, by: map[WorkloadRef]*Histograms{}}
	for _, c := range countedMetrics {
		if err := r.read(ctx, c); err != nil {
			return nil, r.warnings, err
		}
	}
	out := make([]Histograms, 0, len(r.by))
	for _, h := range r.by {
		if h.any() {
			out = append(out, *h)
		}
	}
	return out, r.warnings, nil
}

// any says whether h counted anything: a workload whose series only
// stood still in the window is left out, as the daemons leave out one
// without terminations.
func (h *Histograms) any() bool {
	n := h.Terminations + h.ContainerRestarts + h.ResetsOnReuse + h.ResetsOutsideTerminations + h.RequestsKilledBySigkill
	for _, bs := range [][]Bucket{h.RoutingLag, h.Drain, h.Grace} {
		for _, b := range bs {
			n += b.Count
		}
	}
	return n > 0
}

type reader struct {
	api      v1.API
	scope    Scope
	w        Window
	by       map[WorkloadRef]*Histograms
	warnings v1.Warnings
}

// read sums one metric per workload: exactly where its counters did not
// reset, else increase()'s estimate.
func (r *reader) read(ctx context.Context, c counted) error {
	q := QueriesFor(c.metric, c.match, r.scope, r.w, c.by...)
	exact, err := r.query(ctx, q.Exact)
	if err != nil {
		return err
	}
	reset, err := r.query(ctx, q.Resets)
	if err != nil {
		return err
	}
	if len(reset) > 0 {
		estimate, err := r.query(ctx, q.Increase)
		if err != nil {
			return err
		}
		exact = r.replace(exact, reset, estimate)
	}
	for _, s := range exact {
		c.put(r.histograms(s.Metric), s.Metric, int(math.Round(float64(s.Value))))
	}
	return nil
}

// replace takes the estimate for the groups whose counters reset, and
// counts their series as estimated.
func (r *reader) replace(exact, reset, estimate model.Vector) model.Vector {
	resets := map[model.Fingerprint]bool{}
	for _, s := range reset {
		resets[s.Metric.Fingerprint()] = true
		r.histograms(s.Metric).EstimatedSeries += int(s.Value)
	}
	out := make(model.Vector, 0, len(exact))
	for _, s := range exact {
		if !resets[s.Metric.Fingerprint()] {
			out = append(out, s)
		}
	}
	for _, s := range estimate {
		if resets[s.Metric.Fingerprint()] {
			out = append(out, s)
		}
	}
	return out
}

func (r *reader) histograms(l model.Metric) *Histograms {
	ref := WorkloadRef{Namespace: string(l["namespace"]), Kind: string(l["workload_kind"]), Name: string(l["workload"])}
	h := r.by[ref]
	if h == nil {
		h = &Histograms{Workload: ref}
		r.by[ref] = h
	}
	return h
}

func (r *reader) query(ctx context.Context, q string) (model.Vector, error) {
	v, warnings, _, err := r.api.Query(ctx, q, r.w.End)
	r.warnings = append(r.warnings, warnings...)
	if err != nil {
		return nil, fmt.Errorf("querying Prometheus (%s): %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("querying Prometheus (%s): a %s, want a vector", q, v.Type())
	}
	return vec, nil
}

// Queries are the PromQL expressions that count one metric over a window,
// summed by workload (and more labels), at the window's end.
type Queries struct {
	// Exact is the counters' last value in the window minus their value
	// at its start (0 for a series born in it): no extrapolation, and a
	// series born with its value counts it whole, where increase() would
	// miss it.
	Exact string
	// Resets counts the series whose counter went down in the window (a
	// daemon that lost its state, a series that expired and came back):
	// for those Exact is wrong.
	Resets string
	// Increase is increase()'s estimate, taken for the groups that reset.
	Increase string
}

// QueriesFor writes the Queries of metric, its series selected by scope
// and match (more label matchers, or ""), summed by the workload's labels
// and by.
func QueriesFor(metric, match string, scope Scope, w Window, by ...string) Queries {
	sel := metric + "{" + strings.Join(scopeMatchers(scope, match), ", ") + "}"
	rng := promDuration(w.End.Sub(w.Start))
	grouping := strings.Join(append([]string{workloadGrouping}, by...), ", ")
	last := fmt.Sprintf("last_over_time(%s[%s])", sel, rng)
	start := fmt.Sprintf("last_over_time(%s[%s] offset %s)", sel, startValueLookback, rng)
	return Queries{
		Exact:    fmt.Sprintf("sum by (%s) (%s - (%s or %s * 0))", grouping, last, start, last),
		Resets:   fmt.Sprintf("count by (%s) (resets(%s[%s]) > 0 or %s > min_over_time(%s[%s]))", grouping, sel, rng, start, sel, rng),
		Increase: fmt.Sprintf("sum by (%s) (increase(%s[%s]))", grouping, sel, rng),
	}
}

func scopeMatchers(scope Scope, match string) []string {
	var ms []string
	for _, m := range []struct{ label, value string }{
		{"namespace", scope.Namespace}, {"workload_kind", scope.Kind}, {"workload", scope.Name},
	} {
		if m.value != "" {
			ms = append(ms, m.label+"="+strconv.Quote(m.value))
		}
	}
	if match != "" {
		ms = append(ms, match)
	}
	return ms
}

// promDuration writes d in milliseconds, rounded up: the window starts no
// later than asked.
func promDuration(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10) + "ms"
}
