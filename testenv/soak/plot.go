package soak

import (
	"fmt"
	"slices"
	"strings"
)

var ticks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values, one block per value, scaled between their
// minimum and maximum (all at the lowest block when flat).
func Sparkline(values []float64) string {
	if len(values) == 0 {
		return ""
	}
	lo, hi := slices.Min(values), slices.Max(values)
	var b strings.Builder
	for _, v := range values {
		i := 0
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(ticks)-1))
		}
		b.WriteRune(ticks[i])
	}
	return b.String()
}

// Plot is one sparkline per sampled column with its first, minimum,
// maximum and last value, and its slope per hour from the baseline on (the
// first sample after the first round, as Check's): flat lines, a last
// value near the first and a slope near 0 are what a soak hopes for. The
// slope is a least-squares fit, so one high sample moves it little.
func Plot(samples []Sample, pods int) string {
	names, cols := series(samples)
	from := 0
	if base, ok := baseline(samples, pods); ok {
		from = slices.IndexFunc(samples, func(s Sample) bool { return s.Elapsed >= base.Elapsed })
	}
	hours := make([]float64, len(samples))
	for i, s := range samples {
		hours[i] = s.Elapsed.Hours()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples; slope: per hour, a least-squares fit from sample %d on\n", len(samples), from+1)
	for i, name := range names {
		if i == 0 || len(cols[i]) == 0 {
			continue // elapsed is the x axis
		}
		c := cols[i]
		fmt.Fprintf(&b, "%-22s %s  first %.0f min %.0f max %.0f last %.0f slope %+.0f\n", name, Sparkline(c),
			c[0], slices.Min(c), slices.Max(c), c[len(c)-1], Slope(hours[from:], c[from:]))
	}
	return b.String()
}

// Slope is the least-squares slope of y over x; 0 with fewer than two
// distinct x.
func Slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 || len(x) != len(y) {
		return 0
	}
	var sx, sy float64
	for i := range x {
		sx, sy = sx+x[i], sy+y[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}
