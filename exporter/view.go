package exporter

import (
	"cmp"
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// TerminationView is a termination as the HTTP API serves it: the record
// itself plus its derived durations in seconds (DESIGN.md names:
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

// StartTime is the first observed mark of t (delete_requested normally), or
// zero when none was observed.
func StartTime(t correlate.Termination) time.Time {
	first := time.Time{}
	for _, m := range MarkList(t.Marks) {
		if first.IsZero() || m.Time.Before(first) {
			first = m.Time
		}
	}
	return first
}

// lastTime is the latest observed mark of t.
func lastTime(t correlate.Termination) time.Time {
	last := time.Time{}
	for _, m := range MarkList(t.Marks) {
		if m.Time.After(last) {
			last = m.Time
		}
	}
	return last
}

// Mark is one named, observed mark of a timeline.
type Mark struct {
	Name string
	Time time.Time
}

// MarkList returns the observed marks in time order (ties keep the DESIGN.md
// order, which is the causal one).
func MarkList(m correlate.Marks) []Mark {
	all := []Mark{
		{"delete_requested", m.DeleteRequested}, {"deletion_seen", m.DeletionSeen},
		{"killing", m.Killing}, {"prestop_failed", m.PrestopFailed},
		{"stop_signal", m.StopSignal}, {"endpoints_not_ready", m.EndpointsNotReady},
		{"listener_closed", m.ListenerClosed}, {"last_accept", m.LastAccept},
		{"sigkill", m.Sigkill}, {"exit", m.Exit}, {"pod_gone", m.PodGone},
	}
	out := all[:0]
	for _, mk := range all {
		if !mk.Time.IsZero() {
			out = append(out, mk)
		}
	}
	slices.SortStableFunc(out, func(a, b Mark) int { return a.Time.Compare(b.Time) })
	return out
}

// sortTerminations orders terminations by start time, then pod name.
func sortTerminations(ts []correlate.Termination) {
	slices.SortStableFunc(ts, func(a, b correlate.Termination) int {
		return cmp.Or(StartTime(a).Compare(StartTime(b)), cmp.Compare(a.Pod, b.Pod))
	})
}

// sortViews orders views like sortTerminations.
func sortViews(vs []TerminationView) {
	slices.SortStableFunc(vs, func(a, b TerminationView) int {
		return cmp.Or(StartTime(a.Termination).Compare(StartTime(b.Termination)), cmp.Compare(a.Pod, b.Pod))
	})
}
