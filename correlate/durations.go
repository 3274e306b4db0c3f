package correlate

import "time"

// Names of the derived durations of docs/design.md, the keys of Durations.
const (
	DurRoutingLag         = "routing_lag_observed" // last connection attempt − endpoints_not_ready
	DurListenerCloseDelay = "listener_close_delay" // listener_closed − stop_signal (negative: closed before it)
	DurPrestop            = "prestop_duration"     // stop_signal − killing
	DurDrain              = "drain_duration"       // exit − stop_signal
	DurGraceUsed          = "grace_used"           // exit − delete_requested, against GracePeriod
)

// Phase label values of drainwatch_termination_phase_seconds, a bounded set:
// each is the derived duration of the same name without its suffix.
const (
	PhasePrestop            = "prestop"              // stop_signal − killing
	PhaseDrain              = "drain"                // exit − stop_signal
	PhaseGraceUsed          = "grace_used"           // exit − delete_requested
	PhaseListenerCloseDelay = "listener_close_delay" // listener_closed − stop_signal
)

// PhaseNames lists every phase label value in a fixed order.
func PhaseNames() []string {
	return []string{PhasePrestop, PhaseListenerCloseDelay, PhaseDrain, PhaseGraceUsed}
}

// Durations returns the derived durations whose two ends were observed,
// keyed by the Dur* names. Only listener_close_delay may be negative (the
// listener closed before the stop signal: a preStop or a crash stopped the
// server); the others are omitted when negative, which only clock skew
// between API and kernel marks can produce.
func (t Termination) Durations() map[string]time.Duration {
	m := t.Marks
	out := make(map[string]time.Duration, 5)
	if d, ok := t.RoutingLag(); ok {
		out[DurRoutingLag] = d
	}
	if !m.StopSignal.IsZero() && !m.ListenerClosed.IsZero() {
		out[DurListenerCloseDelay] = m.ListenerClosed.Sub(m.StopSignal)
	}
	putSpan(out, DurPrestop, m.Killing, m.StopSignal)
	putSpan(out, DurDrain, m.StopSignal, m.Exit)
	putSpan(out, DurGraceUsed, m.DeleteRequested, m.Exit)
	return out
}

// Phases returns the non-negative phase durations for the phase histogram,
// keyed by the Phase* label values.
func (t Termination) Phases() map[string]time.Duration {
	d := t.Durations()
	out := make(map[string]time.Duration, 4)
	for phase, dur := range map[string]string{
		PhasePrestop: DurPrestop, PhaseDrain: DurDrain, PhaseGraceUsed: DurGraceUsed,
		PhaseListenerCloseDelay: DurListenerCloseDelay,
	} {
		if v, ok := d[dur]; ok && v >= 0 {
			out[phase] = v
		}
	}
	return out
}

// RoutingLag is routing_lag_observed: the last connection attempt minus
// endpoints_not_ready, a lower bound of how long routing took to converge
// for this pod. ok is false when either end is missing or no attempt came
// after endpoints_not_ready.
func (t Termination) RoutingLag() (time.Duration, bool) {
	from, to := t.Marks.EndpointsNotReady, t.LastConnAttempt
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return 0, false
	}
	return to.Sub(from), true
}

func putSpan(out map[string]time.Duration, name string, from, to time.Time) {
	if !from.IsZero() && !to.IsZero() && !to.Before(from) {
		out[name] = to.Sub(from)
	}
}
