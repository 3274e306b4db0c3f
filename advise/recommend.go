package advise

import (
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/correlate"
)

// recommend applies the rule to a's statistics:
//
//	preStop sleep = ⌈p(routing lag) + margin⌉ s
//	grace period  = preStop sleep + ⌈p(drain) + margin⌉ s
//
// each only from at least MinTerminations samples; with fewer, nothing is
// advised and Why says what is missing.
//
// The server idle timeout (idleTimeout) rests on pool reuses, each a lost
// request, not on terminations: it is advised without the minimum.
func recommend(a *Advice, r Rule) {
	defer idleTimeout(a, r)
	pct := fmt.Sprintf("p%g", r.Percentile)
	if a.RoutingLag.N < r.MinTerminations || a.Drain.N < r.MinTerminations {
		a.Why = append(a.Why, fmt.Sprintf("too few terminations to advise: routing lag measured in %d, drain in %d, the rule wants %d (%d skipped: partial, incomplete or container restarts)",
			a.RoutingLag.N, a.Drain.N, r.MinTerminations, a.Skipped))
		return
	}
	a.Enough = true
	lag, drain := time.Duration(a.RoutingLag.P), time.Duration(a.Drain.P)
	a.PrestopSleepSeconds = ceilSeconds(lag + r.Margin)
	drainPart := ceilSeconds(drain + r.Margin)
	a.TerminationGraceSeconds = a.PrestopSleepSeconds + drainPart
	a.Why = append(a.Why,
		fmt.Sprintf("preStop sleep %d s = ⌈%s routing lag %s + margin %s⌉ (over %d terminations; max %s)",
			a.PrestopSleepSeconds, pct, sec(lag), sec(r.Margin), a.RoutingLag.N, sec(time.Duration(a.RoutingLag.Max))),
		fmt.Sprintf("terminationGracePeriodSeconds %d = preStop %d s + ⌈%s drain %s + margin %s⌉ (over %d terminations; max %s)",
			a.TerminationGraceSeconds, a.PrestopSleepSeconds, pct, sec(drain), sec(r.Margin), a.Drain.N, sec(time.Duration(a.Drain.Max))))
	notes(a)
}

// idleTimeout advises the server's keep-alive idle timeout when a pool
// reused a connection the server had closed idle:
//
//	server idle timeout = ⌈longest pool idle + margin⌉ s
//
// The longest idle a pool held a connection before reusing it is a lower
// bound of that pool's idle timeout: a longer timeout that has not yet
// reused a connection after a longer idle shows on its next reuse.
func idleTimeout(a *Advice, r Rule) {
	k := a.KeepAlive
	if k.PoolReuses == 0 {
		return
	}
	pool := time.Duration(k.PoolIdleMax)
	a.ServerIdleTimeoutSeconds = ceilSeconds(pool + r.Margin)
	a.Why = append(a.Why, fmt.Sprintf("server keep-alive idle timeout %d s = ⌈longest pool idle %s + margin %s⌉ (%d requests reset on reuse of connections the server had closed after %s to %s idle; not in the patch: the server's own setting)",
		a.ServerIdleTimeoutSeconds, sec(pool), sec(r.Margin), k.PoolReuses, sec(time.Duration(k.IdleMin)), sec(time.Duration(k.IdleMax))))
}

// notes adds what the values rest on and what they do not cover. Advice
// from Prometheus has its own (histogramNotes).
func notes(a *Advice) {
	if a.From == FromPrometheus {
		return
	}
	if a.DrainCutBySigkill > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("SIGKILL ended the drain of %d of %d terminations: their drain is a lower bound, the server needs longer (or ignores its stop signal)",
			a.DrainCutBySigkill, a.Terminations))
	}
	if a.ResetsBeforeStopSignal > 0 && a.ServerIdleTimeoutSeconds == 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("%d requests were reset on reused connections before the stop signal: the server's idle timeout is shorter than a connection pool's in front of it; set it above every upstream pool's idle timeout (drainwatch sees the resets, not the pools' settings)",
			a.ResetsBeforeStopSignal))
	}
	if n := a.ResetsOnReuse - a.ResetsBeforeStopSignal; n > 0 {
		a.Notes = append(a.Notes, fmt.Sprintf("%d requests were reset on reused connections after the stop signal: the shutdown closed idle connections routing still used; the preStop sleep keeps the server open until routing has moved", n))
	}
}

func sec(d time.Duration) string { return correlate.FormatSecondsMs(d) }
