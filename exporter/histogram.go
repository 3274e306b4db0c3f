package exporter

import "github.com/prometheus/client_golang/prometheus"

// Bucket upper bounds, in seconds. Phases span a 2 s kubelet floor to the
// usual 30–120 s grace periods; routing lag is sub-second on small clusters
// and several seconds on large ones.
var (
	phaseBuckets      = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120}
	routingLagBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30}
)

// histogram is a plain (unlocked) histogram kept inside the rollout state,
// exported as a const histogram so its series can expire with the state.
type histogram struct {
	bounds       []float64
	bucketCounts []uint64 // per bucket, not cumulative
	count        uint64
	sum          float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, bucketCounts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.count++
	h.sum += v
	for i, b := range h.bounds {
		if v <= b {
			h.bucketCounts[i]++
			return
		}
	}
}

func (h *histogram) metric(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	cumulative := make(map[float64]uint64, len(h.bounds))
	var acc uint64
	for i, b := range h.bounds {
		acc += h.bucketCounts[i]
		cumulative[b] = acc
	}
	return prometheus.MustNewConstHistogram(desc, h.count, h.sum, cumulative, labels...)
}

func (h *histogram) counts() HistogramCounts {
	return HistogramCounts{Buckets: append([]uint64(nil), h.bucketCounts...), Count: h.count, Sum: h.sum}
}

// restore sets a histogram saved with the same bounds; one saved with
// other bounds (a later version changed them) starts afresh rather than
// misplacing its observations.
func (h *histogram) restore(hc HistogramCounts) {
	if len(hc.Buckets) != len(h.bounds) {
		return
	}
	copy(h.bucketCounts, hc.Buckets)
	h.count, h.sum = hc.Count, hc.Sum
}
