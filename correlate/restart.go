package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

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
