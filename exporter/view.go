package exporter

import (
	"slices"

	"github.com/drainwatch/drainwatch/correlate"
)

// TerminationView is a termination as the HTTP API serves it: the record
// itself plus its derived durations in seconds (docs/design.md names:
// prestop_duration, listener_close_delay, drain_duration, grace_used,
// routing_lag_observed), so clients need not recompute them.
type TerminationView struct {
	correlate.Termination
	Durations map[string]float64 `json:"durations_seconds,omitempty"`
}

// NewTerminationView adds the derived durations to t.
func NewTerminationView(t correlate.Termination) TerminationView {
	v := TerminationView{Termination: t, Durations: map[string]float64{}}
	for name, d := range t.Durations() {
		v.Durations[name] = d.Seconds()
	}
	return v
}

// sortViews orders views in the list order (compareOrder): the merged
// answers of several daemons read like one daemon's.
func sortViews(vs []TerminationView) {
	slices.SortStableFunc(vs, func(a, b TerminationView) int { return compareOrder(a.Termination, b.Termination) })
}
