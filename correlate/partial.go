package correlate

import (
	"slices"
	"time"
)

// What the daemon could not see, and the partial reasons that say so:
// gaps in the kernel's stream, host-network pods, API-side marks that
// changed unwatched.

// Partial reasons the correlator gives itself; KernelGap reasons are the
// caller's (e.g. "events_lost", "probe_unavailable", "daemon_down").
const (
	PartialStartedLate   = "daemon_started_during_termination"
	PartialNoStopSignal  = "stop_signal_not_seen"
	PartialNoExit        = "exit_not_seen"
	PartialAcceptHistory = "accept_history_overflow"
	PartialHostNetwork   = "host_network"
	PartialNetnsUnbound  = "netns_not_bound"
	PartialEarlyOverflow = "early_events_overflow"
	PartialAPIBlind      = "api_unreachable" // an API-side mark changed unwatched
	maxGaps              = 64
)

// HostNetwork marks a pod that runs in the node's network namespace: its
// sockets cannot be told from the node's, so its terminations are partial.
func (c *Correlator) HostNetwork(podUID string) {
	if _, done := c.done[podUID]; done || podUID == "" {
		return
	}
	c.pod(podUID).HostNet = true
}

// KernelGap records a span in which kernel events were lost or not
// collected (ring buffer full, a probe unavailable, the daemon down).
// Terminations overlapping it are partial with that reason. Open listeners
// may have been missed, so every pod's listener set stops being complete.
// A zero to leaves the gap open until further notice: a later KernelGap
// with the same reason and a non-zero to closes it there. A far-future to
// (the daemon's year 9999) is open as well, and stays so.
func (c *Correlator) KernelGap(reason string, from, to time.Time) {
	for _, p := range c.pods {
		p.Listeners.Complete = false
	}
	for i, g := range c.gaps {
		if g.Reason == reason && g.To.IsZero() {
			c.gaps[i].From, c.gaps[i].To = earlier(g.From, from), to
			return
		}
	}
	if len(c.gaps) == maxGaps {
		i := evictable(c.gaps)
		c.gaps = slices.Delete(c.gaps, i, i+1)
	}
	c.gaps = append(c.gaps, kernelGap{Reason: reason, From: from, To: to})
}

// EndGap closes at to the open gap with this reason, if there is one (a
// span whose end was not known when it began: see KernelGap's zero to).
// Without one it does nothing, so a caller can call it whenever the cause
// is known to be over, also after a restart restored the open gap.
func (c *Correlator) EndGap(reason string, to time.Time) {
	for i, g := range c.gaps {
		if g.Reason == reason && g.open() {
			c.gaps[i].To = to
			return
		}
	}
}

// evictable is the gap to drop when the list is full: the oldest closed
// one, so an open gap (a probe still missing) keeps marking terminations.
func evictable(gaps []kernelGap) int {
	for i, g := range gaps {
		if !g.open() {
			return i
		}
	}
	return 0
}

// open says whether the gap has no end yet (zero to).
func (g kernelGap) open() bool { return g.To.IsZero() }

// markAPIBlind makes t partial with api_unreachable while a mark the API
// side alone could give is unknown because the API side was not watched
// when it changed, and takes the reason back once the kernel set it.
func markAPIBlind(t *termState) {
	m := t.T.Marks
	blind := (t.EndpointsBlind && m.EndpointsNotReady.IsZero()) || (!t.GoneBy.IsZero() && m.PodGone.IsZero())
	has := slices.Contains(t.T.PartialReasons, PartialAPIBlind)
	switch {
	case blind && !has:
		addPartial(&t.T, PartialAPIBlind)
	case !blind && has:
		t.T.PartialReasons = slices.DeleteFunc(slices.Clone(t.T.PartialReasons), func(r string) bool { return r == PartialAPIBlind })
		t.T.Partial = len(t.T.PartialReasons) > 0
	}
}

// markPartial adds the reasons the kernel view of t is incomplete and
// reports whether it may lack the stop signal. Missing marks only count in
// a final record: in progress they may still come.
func (c *Correlator) markPartial(p *podState, t *Termination, final bool) (blind bool) {
	ts := p.Term
	if ts.StartedLate {
		addPartial(t, PartialStartedLate)
		blind = true
	}
	if ts.EarlyOverflow {
		addPartial(t, PartialEarlyOverflow)
		blind = true
	}
	if p.HostNet {
		addPartial(t, PartialHostNetwork)
	} else if final && ts.Ran && p.NetnsIno == 0 {
		addPartial(t, PartialNetnsUnbound)
	}
	for _, g := range c.gaps {
		if overlaps(g, t.Start(), c.end(p)) {
			addPartial(t, g.Reason)
			blind = true
		}
	}
	if final && ts.Ran && t.Marks.StopSignal.IsZero() && !ts.ByExit {
		// Without an exit the kernel may have missed the stop signal: the
		// refusals must not leave the headline count. With one, the server
		// stopped before any stop signal came (a preStop that killed it, a
		// crash): its refusals were before the stop signal, and the record
		// still says that no stop signal was seen.
		addPartial(t, PartialNoStopSignal)
		blind = blind || t.Marks.Exit.IsZero()
	}
	if final && ts.Ran && t.Marks.Exit.IsZero() {
		addPartial(t, PartialNoExit)
	}
	return blind
}

// overlaps says whether g overlaps [from, to]; a zero to is open-ended
// on either side.
func overlaps(g kernelGap, from, to time.Time) bool {
	return (g.open() || !g.To.Before(from)) && (to.IsZero() || !g.From.After(to))
}

func addPartial(t *Termination, reason string) {
	t.Partial = true
	if !slices.Contains(t.PartialReasons, reason) {
		t.PartialReasons = append(t.PartialReasons, reason)
	}
}
