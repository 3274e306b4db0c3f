package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// wantHistograms are the derived durations of the sequence: web's prestop
// 0 and 1.5 s, listener_close_delay 0.125 and 0 s, drain 2.5 and 30 s,
// grace_used 2.5 and 32 s, routing lag 1.0 and 0.5 s; the bare pod's drain
// 0.25 s (no delete_requested mark, so no grace_used; no endpoints, no lag).
const wantHistograms = `
# HELP drainwatch_routing_lag_seconds Last connection attempt to a terminating pod minus the time its endpoint became not ready: a lower bound of routing convergence.
# TYPE drainwatch_routing_lag_seconds histogram
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.05"} 0
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.1"} 0
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.25"} 0
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="0.5"} 1
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="1"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="2"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="3"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="5"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="10"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="30"} 2
drainwatch_routing_lag_seconds_bucket{namespace="shop",workload="web",workload_kind="Deployment",le="+Inf"} 2
drainwatch_routing_lag_seconds_sum{namespace="shop",workload="web",workload_kind="Deployment"} 1.5
drainwatch_routing_lag_seconds_count{namespace="shop",workload="web",workload_kind="Deployment"} 2
`

func TestMetricsRoutingLagHistogram(t *testing.T) {
	m := newTestMetrics()
	observeSequence(t, m)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(wantHistograms), "drainwatch_routing_lag_seconds"); err != nil {
		t.Fatal(err)
	}
}

// wantPhases lists, per phase series, count, sum and the cumulative bucket
// counts at le = 0.05 0.1 0.25 0.5 1 2 5 10 30 60 120.
var wantPhases = map[string]struct {
	count   uint64
	sum     float64
	buckets [11]uint64
}{
	"shop/web/prestop":              {2, 1.5, [11]uint64{1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}},
	"shop/web/listener_close_delay": {2, 0.125, [11]uint64{1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
	"shop/web/drain":                {2, 32.5, [11]uint64{0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2}},
	"shop/web/grace_used":           {2, 34.5, [11]uint64{0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2}},
	"default//drain":                {1, 0.25, [11]uint64{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
}

func TestMetricsPhaseHistograms(t *testing.T) {
	m := newTestMetrics()
	observeSequence(t, m)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, mf := range mfs {
		if mf.GetName() != "drainwatch_termination_phase_seconds" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range metric.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			key := l["namespace"] + "/" + l["workload"] + "/" + l["phase"]
			want, ok := wantPhases[key]
			h := metric.GetHistogram()
			if !ok || h.GetSampleCount() != want.count || h.GetSampleSum() != want.sum {
				t.Errorf("%s: count %d sum %v, want %+v (known: %v)", key, h.GetSampleCount(), h.GetSampleSum(), want, ok)
				continue
			}
			for i, b := range h.GetBucket() {
				if b.GetCumulativeCount() != want.buckets[i] || b.GetUpperBound() != phaseBuckets[i] {
					t.Errorf("%s: bucket le=%v = %d, want le=%v %d", key, b.GetUpperBound(), b.GetCumulativeCount(), phaseBuckets[i], want.buckets[i])
				}
			}
			got++
		}
	}
	if got != len(wantPhases) {
		t.Fatalf("%d phase series, want %d", got, len(wantPhases))
	}
}
