package correlate

import (
	"slices"
	"sort"
	"time"
)

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
	minStopGrace         = 2 * time.Second // the kubelet's floor for the stop budget
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

// Tick completes the terminations whose pod is gone, or whose container
// runs again, and whose kernel tail has elapsed at now, returns them (oldest first, each once: the caller
// keeps them), and forgets the completed pods Retention no longer keeps.
func (c *Correlator) Tick(now time.Time) []Termination {
	var out []Termination
	for uid, p := range c.pods {
		t := p.Term
		switch {
		case t == nil:
		case c.unconfirmed(t):
			// A stop signal that stopped nothing. Judged by the pod watch,
			// not now: a deletion seen in time may still wait in the
			// loop's queue, and dropping its termination would lose the
			// exit and the listener's close it took in.
			p.Term = nil
		case !t.Restarted.IsZero() && goneBy(t).IsZero() && !now.Before(t.Restarted.Add(c.cfg.KernelTail)):
			// The container runs again; its tail has been waited for.
			c.endContainer(p, t.Restarted)
		case !goneBy(t).IsZero() && !now.Before(c.deadline(p)):
			if t, ran := c.complete(uid, p, now); ran {
				out = append(out, t)
			}
		}
	}
	out, c.ended = append(out, c.ended...), nil
	c.expire(now)
	sort.Slice(out, func(i, j int) bool { return out[i].Start().Before(out[j].Start()) })
	return out
}

// deadline is when a gone pod's termination is complete: KernelTail after
// pod_gone, and while an init's exit has not been seen, no earlier than the
// last moment the runtime can still SIGKILL it (grace, with the kubelet's
// 2 s floor, plus KernelTail).
func (c *Correlator) deadline(p *podState) time.Time {
	t := p.Term
	d := goneBy(t).Add(c.cfg.KernelTail)
	if c.cfg.Blackholes && !p.HostNet {
		d = later(d, blackholeEnd(t, c.cfg))
	}
	if allExited(p) {
		return d
	}
	grace := max(t.T.GracePeriod, minStopGrace)
	return later(d, deletionStart(t).Add(grace+minStopGrace+c.cfg.KernelTail))
}

// allExited says whether every container's init has exited. Without
// cgroup bindings only a single-container pod can be judged.
func allExited(p *podState) bool {
	t := p.Term
	if len(p.Cgroups) == 0 {
		return t.SawInitExit && len(p.Pod.Containers) <= 1
	}
	for name := range p.Cgroups {
		if !t.InitExited[name] {
			return false
		}
	}
	return true
}

// complete ends p's termination and remembers only when, to ignore
// replays. A pod that never ran (deleted while pending, or long finished)
// has no termination to report (ran is false).
func (c *Correlator) complete(uid string, p *podState, now time.Time) (t Termination, ran bool) {
	t = c.evaluate(p, true)
	t.Complete = true
	c.closeStartup(p)
	c.idx.forget(p)
	delete(c.pods, uid)
	c.done[uid] = now
	return t, p.Term.Ran
}

func (c *Correlator) expire(now time.Time) {
	horizon := now.Add(-c.cfg.Retention)
	for uid, at := range c.done {
		if at.Before(horizon) {
			delete(c.done, uid)
		}
	}
	c.gaps = slices.DeleteFunc(c.gaps, func(g kernelGap) bool { return !g.open() && g.To.Before(horizon) })
}

// evaluate returns the record of p's termination with partial reasons,
// diagnoses and outcome.
func (c *Correlator) evaluate(p *podState, final bool) Termination {
	ts := p.Term
	t := ts.T
	t.Connections = slices.Clone(t.Connections)
	t.PartialReasons = slices.Clone(t.PartialReasons)
	// Refusals with no stop signal ever seen: when the kernel view may have
	// missed it, the headline count must not lose them; when it cannot have,
	// the server stopped listening by itself (a preStop, a crash) before
	// any stop signal.
	if c.markPartial(p, &t, final) {
		t.Counts.RefusedAfterSigterm += ts.Unclassified
	} else {
		t.Counts.RefusedBeforeSigterm += ts.Unclassified
	}
	t.RoutingSources = c.routingSources(ts)
	if ts.Peers != nil && ts.Peers.Overflow {
		// The same bound as the accept log's: the sources of some
		// connections before the mark was known are missing.
		addPartial(&t, PartialAcceptHistory)
	}
	if !podStops(p) {
		t.Container = stoppedContainer(ts, p.Pod)
	}
	t.Death = deathOf(ts, c.cfg)
	t.Diagnoses = diagnose(t, ts.PrestopMessage, c.cfg)
	t.Outcome = outcomeOf(t)
	return t
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

// end is the last moment a kernel event can still belong to p's
// termination (zero while the pod is not gone: open-ended).
func (c *Correlator) end(p *podState) time.Time {
	if goneBy(p.Term).IsZero() {
		return time.Time{}
	}
	return c.deadline(p)
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
