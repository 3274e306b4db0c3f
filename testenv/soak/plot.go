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
// maximum and last value: flat lines and a last value near the first are
// what a soak hopes for.
func Plot(samples []Sample) string {
	names, cols := series(samples)
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples\n", len(samples))
	for i, name := range names {
		if i == 0 || len(cols[i]) == 0 {
			continue // elapsed is the x axis
		}
		c := cols[i]
		fmt.Fprintf(&b, "%-22s %s  first %.0f min %.0f max %.0f last %.0f\n", name, Sparkline(c), c[0], slices.Min(c), slices.Max(c), c[len(c)-1])
	}
	return b.String()
}
