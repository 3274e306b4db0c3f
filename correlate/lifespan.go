package correlate

import (
	"slices"
	"sort"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// A termination's life, from its first sign to its completion: how it
// begins (a deletion seen, a stop without one: deletionSeen, stopInAPI,
// exitBegins), how a container's termination joins the pod's or ends
// (noteRestart, endContainer), and how it ends (Tick: every container
// exited and the kernel's tail seen, or the deadline).

// minStopGrace is the kubelet's floor for the stop budget.
const minStopGrace = 2 * time.Second

// deletionSeen takes an update of a deleting pod: the deletion ends a
// container's termination it came after, begins the pod's (or joins the
// one a stop signal began, confirming it), and sets delete_requested and
// deletion_seen once.
func (c *Correlator) deletionSeen(p *podState, seen time.Time, firstSight bool) {
	if c.overBy(p, deleteRequested(p.Pod)) {
		c.endContainer(p, seen)
	}
	if p.Term == nil {
		c.begin(p, seen)
		// First sight of a pod already terminating, and no stop signal
		// began its termination: the daemon started during the termination
		// and may have missed its stop signal and first refusals.
		p.Term.StartedLate = firstSight
	}
	t := p.Term
	m := &t.T.Marks
	first := m.DeleteRequested.IsZero()
	applyDeletionGrace(&t.T, p.Pod, first)
	if first {
		m.DeleteRequested = deleteRequested(p.Pod)
	}
	if m.DeletionSeen.IsZero() {
		m.DeletionSeen = seen
		t.Tentative = false
		c.replayEarly(p)
	}
}

// deleteRequested is when the pod's deletion was requested, to the second
// (the deletion timestamp's precision): no later than the request.
func deleteRequested(pod collector.Pod) time.Time {
	return pod.DeletionTimestamp.Add(-pod.DeletionGracePeriod)
}

// begin opens the termination of p at start.
func (c *Correlator) begin(p *podState, start time.Time) {
	t := &termState{Start: start, Ran: anyRunning(p.Pod) || p.KernelSeen, Accepts: newAcceptLog(&p.Accepts),
		IDs: containerIDs(p.Pod)}
	identify(&t.T, p.Pod)
	t.T.Marks.LastAccept = p.LastAccept
	t.T.KeepAlive = p.KeepAlive
	p.Term = t
	// Kubelet Events that raced ahead of the deletion belong to it; older
	// ones are from container restarts.
	lead := start.Add(-c.cfg.SignalLead)
	if !p.Killing.Before(lead) {
		t.T.Marks.Killing = p.Killing
	}
	if !p.PrestopFailed.Before(lead) {
		t.T.Marks.PrestopFailed, t.PrestopMessage = p.PrestopFailed, p.PrestopMessage
	}
	if p.Killing.Before(lead) {
		p.KillingMessage = "" // an earlier stop's: not this one's cause
	}
	setCause(t, p)
	c.endpointsNotReady(p)
}

// A termination begins at the first sign of a stop, whichever comes first:
// the deletion, the kubelet's Killing Event, the stop signal seen in the
// kernel, a DisruptionTarget condition or the kubelet's verdict in the
// pod's status, or an init's exit nobody asked for (a crash, the OOM
// killer). Kubelet-initiated stops (node pressure, node shutdown) begin
// without a deletion, and container restarts never get one.
//
// While the API says nothing about the pod itself stopping (podStops), a
// termination is a container's: it ends when the container runs again
// (Restarted) and completes KernelTail later, leaving the pod to its next
// termination. A deletion that arrives while it has not ended joins it:
// a stop is counted once, whichever sign came first.

// podStops says whether the API says the pod itself stops: a deletion, a
// DisruptionTarget condition, or the kubelet's status verdict (Evicted,
// Preempting, node shutdown).
func podStops(p *podState) bool {
	return !p.Pod.DeletionTimestamp.IsZero() || stoppedBefore(p)
}

// stoppedBefore is podStops without the deletion of the update being
// applied: whether a deletion arriving now joins p's termination.
func stoppedBefore(p *podState) bool {
	t := p.Term
	return kubeletStop(p.Pod) || (t != nil && (!t.T.Marks.DeletionSeen.IsZero() || !goneBy(t).IsZero()))
}

// kubeletStop says whether the pod's status or conditions say it is being
// stopped without (yet) a deletion.
func kubeletStop(pod collector.Pod) bool {
	c, _ := fromStatus(pod.Stop)
	return pod.Stop.Disruption != "" || c != ""
}

// stopsNow says whether a sign of a stop at `at` begins a termination of
// p: the pod runs, and the sign is neither older than the pod watch (a
// relisted Event of an earlier restart) nor than p's last termination.
func (c *Correlator) stopsNow(p *podState, at time.Time) bool {
	running := anyRunning(p.Pod) || p.KernelSeen
	return running && !at.Before(c.podsSeen.Add(-c.cfg.SignalLead)) && at.After(p.LastEnd)
}

// stopInAPI begins p's termination at seen when the API says the pod is
// being stopped before any deletion (the kubelet's eviction or node
// shutdown, a DisruptionTarget condition), and confirms one the kernel
// began.
func (c *Correlator) stopInAPI(p *podState, seen time.Time, firstSight bool) {
	if !p.Pod.DeletionTimestamp.IsZero() || !kubeletStop(p.Pod) {
		return
	}
	if p.Term == nil && (anyRunning(p.Pod) || p.KernelSeen) {
		c.begin(p, seen)
		p.Term.StartedLate = firstSight
	}
	if p.Term != nil {
		p.Term.Tentative = false
	}
}

// exitBegins begins a termination at an init's exit when nothing began one
// before: the container crashed, or was killed with no stop signal (the
// OOM killer). A clean exit (0) is a completion, not a stop; an exit not
// attributed to a container may be the sandbox's.
func (c *Correlator) exitBegins(p *podState, container string, e *collector.Event) {
	abnormal := e.ExitCode != 0 || e.ExitSignal != 0
	if p.Term != nil || !e.TargetInit || container == "" || !abnormal || !p.Known || !e.Time.After(p.LastEnd) {
		return
	}
	c.begin(p, e.Time)
	t := p.Term
	t.ByExit, t.Container = true, container
	t.OutsideKill = !p.OutsideKill.IsZero() && !p.OutsideKill.Before(e.Time.Add(-c.cfg.SignalLead))
}

// noteOutsideKill remembers a SIGKILL to a running task of p from outside
// its containers (the runtime, a person) while no termination is open: an
// exit of SIGKILL with none of these before it is the OOM killer's.
func noteOutsideKill(p *podState, e *collector.Event) {
	if e.Signal == sigkill && e.SenderPID != e.PID && !fromInside(p, e) {
		p.OutsideKill = e.Time
	}
}

// stopPoint is when the stopped container began losing traffic: the stop
// signal, or the exit of a termination begun by an exit (a crash or an OOM
// kill has no stop signal).
func stopPoint(t *termState) time.Time {
	if t.T.Marks.StopSignal.IsZero() && t.ByExit {
		return t.T.Marks.Exit
	}
	return t.T.Marks.StopSignal
}

// noteRestart ends a container's termination when the API shows one of the
// pod's containers running under a new id: the kubelet restarted it.
func noteRestart(t *termState, p *podState, seen time.Time) {
	if !t.Restarted.IsZero() || podStops(p) {
		return
	}
	for _, ct := range p.Pod.Containers {
		if old := t.IDs[ct.Name]; old != "" && ct.ID != "" && ct.ID != old && !ct.Terminated {
			t.Restarted, t.Tentative = seen, false
			return
		}
	}
}

// newInit says whether a stop signal to container's init follows the exit
// of the init that p's container termination stopped: the container runs
// again, and this is the next stop (the pod watch may be silent).
func newInit(p *podState, container string) bool {
	t := p.Term
	if t == nil || podStops(p) {
		return false
	}
	if container != "" {
		return t.InitExited[container]
	}
	return t.SawInitExit
}

// endContainer ends p's container termination at `at` (when the container
// ran again, if not known sooner) and keeps its record for the next Tick;
// the pod stays, for its next termination.
func (c *Correlator) endContainer(p *podState, at time.Time) {
	t := p.Term
	if t.Restarted.IsZero() {
		t.Restarted = at
	}
	if !t.Tentative && t.Ran {
		setCause(t, p)
		rec := c.evaluate(p, true)
		rec.Complete = true
		c.ended = append(c.ended, rec)
	}
	p.Term, p.LastEnd = nil, t.Restarted
	// The kubelet Events belonged to this stop, not to the next.
	p.Killing, p.KillingMessage, p.PrestopFailed, p.PrestopMessage = time.Time{}, "", time.Time{}, ""
}

// containerIDs is the pod's container ids by name, when a termination
// begins: a container running later under another id was restarted.
func containerIDs(pod collector.Pod) map[string]string {
	var ids map[string]string
	for _, ct := range pod.Containers {
		if ct.ID == "" {
			continue
		}
		if ids == nil {
			ids = make(map[string]string, len(pod.Containers))
		}
		ids[ct.Name] = ct.ID
	}
	return ids
}

// unconfirmed says whether t, begun by a stop signal that nothing else
// confirmed (no Killing, deletion, kubelet verdict, exit), stopped
// nothing: the pod watch has been read past the longest a stopped init can
// live (its grace period with the kubelet's floor, then SIGKILL). A signal
// someone sent the init to reload its configuration is one.
func (c *Correlator) unconfirmed(t *termState) bool {
	limit := max(t.T.GracePeriod, minStopGrace) + minStopGrace + c.cfg.SignalLead
	return t.Tentative && c.podsSeen.Sub(t.Start) > limit
}

// overBy says whether p's container termination was over before a
// deletion requested at `requested`: its container ran again before, or
// every init it stopped had exited more than SignalLead before (a watch
// silent about the restart). The deletion then begins a termination of
// its own.
func (c *Correlator) overBy(p *podState, requested time.Time) bool {
	t := p.Term
	if t == nil || stoppedBefore(p) {
		return false
	}
	if !t.Restarted.IsZero() {
		return t.Restarted.Before(requested)
	}
	return t.SawInitExit && t.T.Marks.Exit.Before(requested.Add(-c.cfg.SignalLead))
}

// stoppedContainer names the container of a container's termination: the
// one whose init got the stop signal or exited, else the pod's first (a
// Killing's container is only in its message).
func stoppedContainer(t *termState, pod collector.Pod) string {
	switch {
	case t.Container != "":
		return t.Container
	case t.StopContainer != "":
		return t.StopContainer
	case len(pod.Containers) > 0:
		return pod.Containers[0].Name
	}
	return "?"
}

// noteStopped marks a pod stopped for good with no deletion: terminal,
// every container terminated (the kubelet evicted it, or the node shut
// down). Its termination completes KernelTail later like a gone pod's; a
// deletion that comes later finds it complete and counts nothing twice.
func noteStopped(t *termState, pod collector.Pod, seen time.Time) {
	if !t.Stopped.IsZero() || !pod.Terminal || !pod.DeletionTimestamp.IsZero() || len(pod.Containers) == 0 {
		return
	}
	for _, ct := range pod.Containers {
		if !ct.Terminated {
			return
		}
	}
	t.Stopped, t.Tentative = seen, false
}

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
	t.Listeners, t.RefusedInsidePorts = slices.Clone(t.Listeners), slices.Clone(t.RefusedInsidePorts)
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

// end is the last moment a kernel event can still belong to p's
// termination (zero while the pod is not gone: open-ended).
func (c *Correlator) end(p *podState) time.Time {
	if goneBy(p.Term).IsZero() {
		return time.Time{}
	}
	return c.deadline(p)
}
