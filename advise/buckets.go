package advise

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// FromPrometheus is Advice.From for advice read from the shipped
// histograms (drainwatch advise --prometheus).
const FromPrometheus = "prometheus"

// Names in Stat.Above.
const (
	AboveP50 = "p50"
	AboveP   = "percentile"
	AboveMax = "max"
)

// Bucket is one histogram bucket as Prometheus stores it: its upper bound
// (le, +Inf for the last) and the observations at or below it.
type Bucket struct {
	LE    float64
	Count int
}

// Histograms are what Prometheus holds of one workload over a window:
// counts, not samples. Terminations excludes container restarts, which are
// counted apart; the histograms include both, and partial terminations.
type Histograms struct {
	Workload                  WorkloadRef
	RoutingLag, Drain, Grace  []Bucket
	Terminations              int
	ContainerRestarts         int
	ResetsOnReuse             int
	ResetsOutsideTerminations int
	RequestsKilledBySigkill   int
	EstimatedSeries           int // series whose counter reset in the window: increase()'s estimate
}

// AdviseHistograms applies the rule to each workload's histograms, in
// workload order. The percentiles are bucket upper bounds (bucketStat),
// so the values err long; a percentile past the last bucket advises
// nothing.
func AdviseHistograms(hs []Histograms, r Rule) []Advice {
	out := make([]Advice, 0, len(hs))
	for _, h := range hs {
		out = append(out, adviseHistogram(h, r))
	}
	slices.SortFunc(out, func(a, b Advice) int { return cmp.Compare(a.Workload.String(), b.Workload.String()) })
	return out
}

func adviseHistogram(h Histograms, r Rule) Advice {
	a := Advice{Workload: h.Workload, From: FromPrometheus, Terminations: h.Terminations, Skipped: h.ContainerRestarts,
		RoutingLag: bucketStat(h.RoutingLag, r.Percentile), Drain: bucketStat(h.Drain, r.Percentile),
		GraceUsed: bucketStat(h.Grace, r.Percentile), ResetsOnReuse: h.ResetsOnReuse,
		ResetsOutsideTerminations: h.ResetsOutsideTerminations, RequestsKilledBySigkill: h.RequestsKilledBySigkill,
		Rule: r.String(), Percentile: r.Percentile}
	if why := pastLastBucket(a, r); why != "" {
		a.Why = append(a.Why, why)
	} else {
		recommend(&a, r)
	}
	a.Notes = append(a.Notes, histogramNotes(a, h)...)
	return a
}

// pastLastBucket says why nothing is advised when the rule's percentile of
// routing lag or drain is past the last bucket bound: the histogram only
// says it is longer.
func pastLastBucket(a Advice, r Rule) string {
	for _, m := range []struct {
		name string
		s    Stat
	}{{"routing lag", a.RoutingLag}, {"drain", a.Drain}} {
		if m.s.N >= r.MinTerminations && slices.Contains(m.s.Above, AboveP) {
			return fmt.Sprintf("p%g %s is above the histogram's last bucket bound %s: nothing advised (the daemons' terminations have the values: drainwatch advise without --prometheus)",
				r.Percentile, m.name, sec(time.Duration(m.s.P)))
		}
	}
	return ""
}

// bucketStat summarises a histogram conservatively: N is its count, each
// value the upper bound of the bucket holding that nearest rank (never
// interpolated down), Max the bound of the highest non-empty bucket. A
// value in the +Inf bucket is set to the last finite bound and named in
// Above: it is only known to be longer.
func bucketStat(buckets []Bucket, p float64) Stat {
	bs := cumulative(buckets)
	if len(bs) == 0 || bs[len(bs)-1].Count == 0 {
		return Stat{}
	}
	n := bs[len(bs)-1].Count
	s := Stat{N: n}
	var above []string
	bound := func(name string, rank int) Seconds {
		v, inf := upperBound(bs, rank)
		if inf {
			above = append(above, name)
		}
		return v
	}
	s.P50 = bound(AboveP50, nearestRankIndex(n, 50)+1)
	s.P = bound(AboveP, nearestRankIndex(n, p)+1)
	s.Max = bound(AboveMax, n)
	s.Above = above
	return s
}

// cumulative sorts buckets by bound and makes their counts non-decreasing:
// counts read at slightly different times, or estimated, can disagree.
func cumulative(buckets []Bucket) []Bucket {
	bs := slices.Clone(buckets)
	slices.SortFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.LE, b.LE) })
	for i := 1; i < len(bs); i++ {
		bs[i].Count = max(bs[i].Count, bs[i-1].Count)
	}
	return bs
}

// upperBound is the bound of the first bucket holding rank observations;
// in the +Inf bucket, the last finite bound and true.
func upperBound(bs []Bucket, rank int) (Seconds, bool) {
	last := 0.0
	for _, b := range bs {
		if math.IsInf(b.LE, 1) {
			break
		}
		if b.Count >= rank {
			return secondsOf(b.LE), false
		}
		last = b.LE
	}
	return secondsOf(last), true
}

func secondsOf(v float64) Seconds { return Seconds(math.Round(v * float64(time.Second))) }

// histogramNotes say what advice from the histograms cannot see.
func histogramNotes(a Advice, h Histograms) []string {
	notes := []string{"from Prometheus: the shipped histograms carry no per-source routing lag and no sample values: " +
		"each percentile is the upper bound of the bucket holding it, so the values err long; the histograms count every complete termination, " +
		"partial ones and container restarts' drains too, and a routing lag only where traffic came after the endpoint was removed"}
	if a.RequestsKilledBySigkill > 0 {
		notes = append(notes, fmt.Sprintf("%d requests were killed by SIGKILL: SIGKILL ended at least one drain, which is then a lower bound (how many drains it ended is not in the metrics)",
			a.RequestsKilledBySigkill))
	}
	if a.ResetsOutsideTerminations > 0 {
		notes = append(notes, fmt.Sprintf("%d requests were reset on reused connections of pods that were not terminating: the server's idle timeout is shorter than a connection pool's in front of it; "+
			"set it above every upstream pool's idle timeout (drainwatch sees the resets, not the pools' settings)", a.ResetsOutsideTerminations))
	}
	if a.ResetsOnReuse > 0 {
		notes = append(notes, fmt.Sprintf("%d requests were reset on reused connections during terminations; the metrics do not split them at the stop signal: "+
			"after it, the shutdown closed idle connections routing still used (the preStop sleep covers that), before it, the idle timeout is too short (the count outside terminations stands for that)", a.ResetsOnReuse))
	}
	if h.EstimatedSeries > 0 {
		notes = append(notes, fmt.Sprintf("%d series' counters reset in the window (a daemon that lost its state, or series that expired and came back): their counts are increase()'s estimates, rounded, which extrapolation can put off by one or more",
			h.EstimatedSeries))
	}
	return notes
}
