package correlate

import (
	"fmt"
	"math"
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

// routingTook is how long traffic kept arriving after the deletion: the
// time a preStop sleep must cover (it starts at the deletion, like routing
// convergence).
func routingTook(t Termination) (time.Duration, bool) {
	ref := deletionRef(t)
	if ref.IsZero() || t.LastConnAttempt.Before(ref) {
		return 0, false
	}
	return t.LastConnAttempt.Sub(ref), true
}

// sleepFor is the preStop sleep, in whole seconds as the sleep action takes
// them, that covers a routing convergence of took plus the margin.
func sleepFor(took time.Duration, cfg Config) int {
	return max(1, int(math.Ceil((took + cfg.PreStopMargin).Seconds())))
}

// secs formats a duration in seconds with three significant digits.
func secs(d time.Duration) string {
	return fmt.Sprintf("%.3gs", d.Seconds())
}

// signedSpan formats to − from, or "?" when a mark is missing.
func signedSpan(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "?"
	}
	return secs(to.Sub(from))
}

func signalName(sig uint32) string {
	switch sig {
	case 0, sigterm:
		return "SIGTERM"
	case 2:
		return "SIGINT"
	case 3:
		return "SIGQUIT"
	case 28:
		return "SIGWINCH"
	}
	return fmt.Sprintf("signal %d", sig)
}
