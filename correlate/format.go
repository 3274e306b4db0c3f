package correlate

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// deletionRef is when the termination began from the pod's point of view:
// deletion_seen, else Killing, else the stop signal.
func deletionRef(t Termination) time.Time {
	for _, x := range []time.Time{t.Marks.DeletionSeen, t.Marks.Killing, t.Marks.StopSignal} {
		if !x.IsZero() {
			return x
		}
	}
	return time.Time{}
}

// deletionRefName names deletionRef's mark in messages: a termination the
// kubelet began (an eviction, a node shutdown, a container restart) has no
// deletion to be relative to.
func deletionRefName(t Termination) string {
	switch {
	case !t.Marks.DeletionSeen.IsZero():
		return "the deletion"
	case !t.Marks.Killing.IsZero():
		return "the kubelet's Killing"
	}
	return "the stop signal"
}

// routingTook is how long traffic kept arriving after the deletion: the
// time a preStop sleep must cover (it starts at the deletion, like routing
// convergence). The slowest source counts its requests reset on reused
// connections too, which are no connection attempt.
func routingTook(t Termination) (time.Duration, bool) {
	ref, last := deletionRef(t), t.LastConnAttempt
	if s, ok := t.SlowestSource(); ok {
		last = later(last, s.Last)
	}
	if ref.IsZero() || last.IsZero() || last.Before(ref) {
		return 0, false
	}
	return last.Sub(ref), true
}

// sleepFor is the preStop sleep, in whole seconds as the sleep action takes
// them, that covers a routing convergence of took plus the margin.
func sleepFor(took time.Duration, cfg Config) int {
	return max(1, int(math.Ceil((took + cfg.PreStopMargin).Seconds())))
}

// Seconds formatting, defined here once for every output (messages, the
// API's text timeline, the UI):
//   - FormatSeconds: three significant digits and no exponent, for
//     messages: a listener can close microseconds after the deletion, and
//     "3.49e-05s" is not for people.
//   - FormatSecondsMs: to the millisecond ("30.000s"), for durations in
//     tables.
//   - FormatOffset: signed, to the millisecond ("+0.125s"), for a mark's
//     place on a timeline.

// FormatSeconds formats d in seconds with three significant digits.
func FormatSeconds(d time.Duration) string {
	v, _ := strconv.ParseFloat(fmt.Sprintf("%.3g", d.Seconds()), 64)
	return strconv.FormatFloat(v, 'f', -1, 64) + "s"
}

// FormatSecondsMs formats d in seconds to the millisecond.
func FormatSecondsMs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// FormatOffset formats d in seconds to the millisecond, with its sign.
func FormatOffset(d time.Duration) string { return fmt.Sprintf("%+.3fs", d.Seconds()) }

// relative phrases when `to` happened relative to `from`, named what
// ("0.5s after the stop signal", "0.003s before the deletion"), or "" when
// either mark is missing: a message leaves the clause out rather than
// print a placeholder.
func relative(from, to time.Time, what string) string {
	if from.IsZero() || to.IsZero() {
		return ""
	}
	if to.Before(from) {
		return FormatSeconds(from.Sub(to)) + " before " + what
	}
	return FormatSeconds(to.Sub(from)) + " after " + what
}

// clause prefixes a non-empty phrase with sep.
func clause(sep, phrase string) string {
	if phrase == "" {
		return ""
	}
	return sep + phrase
}
