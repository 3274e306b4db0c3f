package exporter

import (
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// Phase label values of drainwatch_termination_phase_seconds, with the
// DESIGN.md derived durations they carry.
const (
	PhasePrestop            = "prestop"              // stop_signal − killing
	PhaseListenerCloseDelay = "listener_close_delay" // listener_closed − stop_signal
	PhaseDrain              = "drain"                // exit − stop_signal
	PhaseGraceUsed          = "grace_used"           // exit − delete_requested
)

// phases lists the phase labels in a fixed order.
var phases = []string{PhasePrestop, PhaseListenerCloseDelay, PhaseDrain, PhaseGraceUsed}

// phaseDurations returns the derived durations of t whose two marks were
// both observed, keyed by phase label. A negative span (clock skew between
// API and kernel marks) is dropped rather than reported.
func phaseDurations(t correlate.Termination) map[string]time.Duration {
	m := t.Marks
	spans := map[string][2]time.Time{
		PhasePrestop:            {m.Killing, m.StopSignal},
		PhaseListenerCloseDelay: {m.StopSignal, m.ListenerClosed},
		PhaseDrain:              {m.StopSignal, m.Exit},
		PhaseGraceUsed:          {m.DeleteRequested, m.Exit},
	}
	out := make(map[string]time.Duration, len(spans))
	for phase, s := range spans {
		if d, ok := span(s[0], s[1]); ok {
			out[phase] = d
		}
	}
	return out
}

// routingLag is routing_lag_observed: the last connection attempt (accepted
// or refused) minus endpoints_not_ready. ok is false when either end is
// missing or no attempt came after endpoints_not_ready.
func routingLag(t correlate.Termination) (time.Duration, bool) {
	last := t.Marks.LastAccept
	for _, c := range t.Connections {
		if c.Time.After(last) {
			last = c.Time
		}
	}
	return span(t.Marks.EndpointsNotReady, last)
}

func span(from, to time.Time) (time.Duration, bool) {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return 0, false
	}
	return to.Sub(from), true
}
