// Package advise turns the terminations drainwatch measured into the values
// a workload needs: a preStop sleep that outlasts the routing lag, and a
// terminationGracePeriodSeconds that holds the sleep and the drain. It is
// pure logic over correlate.Termination (no I/O, no clock): the rule is
// written in docs/advise.md and tested here. The one exception is
// prometheus.go, which reads the shipped histograms from a Prometheus
// server for AdviseHistograms (drainwatch advise --prometheus).
package advise

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// Rule is how measurements become values: the Percentile of the samples
// (nearest rank), over at least MinTerminations terminations, plus Margin.
type Rule struct {
	MinTerminations int
	Percentile      float64
	Margin          time.Duration
}

// DefaultRule is p99 over at least 3 terminations with a 1 s margin.
var DefaultRule = Rule{MinTerminations: 3, Percentile: 99, Margin: time.Second}

// Check reports a rule that cannot be applied.
func (r Rule) Check() error {
	switch {
	case r.MinTerminations < 1:
		return fmt.Errorf("--min-terminations=%d: want 1 or more", r.MinTerminations)
	case r.Percentile <= 0 || r.Percentile > 100:
		return fmt.Errorf("--percentile=%g: want a number in (0, 100]", r.Percentile)
	case r.Margin < 0:
		return fmt.Errorf("--margin=%v is negative", r.Margin)
	}
	return nil
}

// Seconds is a duration written as seconds in JSON and YAML.
type Seconds time.Duration

// MarshalJSON writes s as seconds, to the millisecond.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(s).Seconds())), nil
}

// UnmarshalJSON reads seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("seconds: %w", err)
	}
	*s = Seconds(math.Round(v * float64(time.Second)))
	return nil
}

// Stat summarises samples: how many, the median, the rule's percentile
// (P) and the largest.
type Stat struct {
	N   int     `json:"terminations"`
	P50 Seconds `json:"p50_seconds"`
	P   Seconds `json:"percentile_seconds"`
	Max Seconds `json:"max_seconds"`
	// Above names the values (AboveP50, AboveP, AboveMax) a histogram put
	// past its last bucket bound (advise --prometheus): they are set to
	// that bound, and are only known to be longer.
	Above []string `json:"above_last_bucket_bound,omitempty"`
}

// newStat summarises samples with the percentile p (nearest rank).
func newStat(samples []time.Duration, p float64) Stat {
	if len(samples) == 0 {
		return Stat{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return Stat{N: len(s), P50: Seconds(nearestRank(s, 50)), P: Seconds(nearestRank(s, p)), Max: Seconds(s[len(s)-1])}
}

// nearestRank is the smallest sample with at least p % of the samples at
// or below it: with fewer than 100 samples, p99 is the largest.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	return sorted[nearestRankIndex(len(sorted), p)]
}

// nearestRankIndex is the nearest rank's index into n sorted samples.
func nearestRankIndex(n int, p float64) int {
	i := int(math.Ceil(p/100*float64(n))) - 1
	return max(0, min(i, n-1))
}

// ceilSeconds rounds d up to whole seconds: the sleep action and the grace
// period take whole seconds.
func ceilSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}
