package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// What the API server says about the node's pods: pod updates and
// deletions, the kubelet's Events, EndpointSlice transitions; and the
// pod's network namespace going away.

// Kubelet Event reasons the correlator reads.
const (
	ReasonKilling           = "Killing"
	ReasonFailedPreStopHook = "FailedPreStopHook"
)

// Pod takes a pod added or changed. The first update with a
// deletionTimestamp is deletion_seen and begins the termination.
func (c *Correlator) Pod(u collector.PodUpdate) {
	uid := u.Pod.UID
	c.podsSeen = later(c.podsSeen, u.Seen)
	if _, done := c.done[uid]; done || uid == "" {
		return // a replay of a pod whose termination is already complete
	}
	p := c.pod(uid)
	if u.Seen.Before(p.Seen) {
		return // stale: a replay older than what was applied
	}
	p.Seen = u.Seen
	firstSight := !p.Known
	if firstSight {
		// Only a pod seen before its containers started can have had every
		// listen_open observed.
		p.Listeners.Complete = !anyStarted(u.Pod)
	}
	p.Known = true
	p.Pod = u.Pod
	for _, ip := range u.Pod.Addrs() {
		c.idx.ownIP(ip, uid, u.Seen)
	}
	if !u.Pod.DeletionTimestamp.IsZero() {
		c.deletionSeen(p, u.Seen, firstSight)
	}
	c.stopInAPI(p, u.Seen, firstSight)
	c.startupPod(p, u.Seen, firstSight)
	if t := p.Term; t != nil {
		identify(&t.T, p.Pod)
		if !t.T.Marks.StopSignal.IsZero() {
			t.T.StopSignalAPI = apiStopSignal(p.Pod, t.StopContainer)
		}
		noteRestart(t, p, u.Seen)
		noteStopped(t, p.Pod, u.Seen)
		setCause(t, p)
	}
}

// PodDeleted takes a pod removed from the API: pod_gone. A deletion the
// pod watch delivered while catching up after an outage happened any time
// since the outage began: pod_gone stays unknown (the kernel's netns
// destruction may still set it exactly) and the termination completes on
// the time it was received.
func (c *Correlator) PodDeleted(d collector.PodDeleted) {
	p := c.pods[d.UID]
	if p == nil {
		return
	}
	if c.overBy(p, d.Seen) {
		c.endContainer(p, d.Seen)
	}
	if p.Term == nil {
		c.begin(p, d.Seen) // deleted with no graceful deletion seen
	}
	t := p.Term
	t.Tentative = false
	switch {
	case !t.T.Marks.PodGone.IsZero():
	case d.BlindSince.IsZero():
		t.T.Marks.PodGone = d.Seen
	case t.GoneBy.IsZero():
		t.GoneBy = d.Seen
		markAPIBlind(t)
	}
	setCause(t, p)
}

// NetnsGone takes the destruction of a network namespace: pod_gone for a
// terminating pod whose namespace it was. A pod that is not terminating is
// getting a new sandbox, not going away.
func (c *Correlator) NetnsGone(ino uint32, at time.Time) {
	p := c.pods[c.idx.Netns[ino]]
	if ino == 0 || p == nil || p.Term == nil || p.Term.Tentative {
		return
	}
	if p.Term.T.Marks.PodGone.IsZero() {
		p.Term.T.Marks.PodGone = at
		markAPIBlind(p.Term) // exact now, whatever the API side missed
	}
}

// goneBy is when the pod was gone at the latest: pod_gone, else when a
// deletion caught up after an outage was received, else when the API
// showed it stopped for good with no deletion (zero: not gone).
func goneBy(t *termState) time.Time {
	switch {
	case !t.T.Marks.PodGone.IsZero():
		return t.T.Marks.PodGone
	case !t.GoneBy.IsZero():
		return t.GoneBy
	}
	return t.Stopped
}

// Kubelet takes a kubelet Event about a pod: Killing, FailedPreStopHook.
func (c *Correlator) Kubelet(e collector.KubeletEvent) {
	p := c.pods[e.PodUID]
	if p == nil {
		return
	}
	switch e.Reason {
	case ReasonKilling:
		// The kubelet's Killing: the first sign of a stop it decided (a
		// liveness probe, an eviction) or carries out (a deletion).
		p.Killing, p.KillingMessage = e.Time, e.Message
		if p.Term == nil && c.stopsNow(p, e.Time) {
			c.begin(p, e.Time)
		}
		if t := p.Term; t != nil {
			t.Tentative = false
			if t.T.Marks.Killing.IsZero() {
				t.T.Marks.Killing = e.Time
			}
			setCause(t, p)
		}
	case ReasonFailedPreStopHook:
		if p.Term == nil {
			p.PrestopFailed, p.PrestopMessage = e.Time, e.Message
		} else if p.Term.T.Marks.PrestopFailed.IsZero() {
			p.Term.T.Marks.PrestopFailed, p.Term.PrestopMessage = e.Time, e.Message
		}
	}
}

// Endpoint takes the state of a pod's endpoint. endpoints_not_ready is the
// first state, once the termination has begun, in which the endpoint is
// not ready or gone.
func (c *Correlator) Endpoint(e collector.EndpointUpdate) {
	p := c.pods[e.PodUID]
	if p == nil {
		return
	}
	if e.Present && e.Ready {
		p.NotReadySince, p.NotReadyBlind = time.Time{}, false
		p.EverPresent = true
		return
	}
	// A pod never behind a Service has no endpoint to lose.
	p.EverPresent = p.EverPresent || e.Present
	if p.EverPresent && p.NotReadySince.IsZero() {
		p.NotReadySince = e.Seen
		p.NotReadyBlind = !e.BlindSince.IsZero()
	}
	if p.Term != nil {
		c.endpointsNotReady(p)
	}
}

// endpointsNotReady sets the mark no earlier than the deletion request (an
// endpoint unready before the deletion became "not ready" for this
// termination when it began) and counts the accepts since, which may have
// been processed before this API event. An endpoint seen not ready only
// while the slice watch caught up after an outage became so any time since
// the outage began: the mark stays unknown, and with it the accepts after
// it and the routing lag.
func (c *Correlator) endpointsNotReady(p *podState) {
	t := p.Term
	if !t.T.Marks.EndpointsNotReady.IsZero() || p.NotReadySince.IsZero() {
		return
	}
	if p.NotReadyBlind {
		t.EndpointsBlind = true
		markAPIBlind(t)
		return
	}
	floor := t.T.Marks.DeleteRequested
	if floor.IsZero() {
		floor = t.Start
	}
	mark := later(p.NotReadySince, floor)
	t.T.Marks.EndpointsNotReady = mark
	n, complete := t.Accepts.countSince(mark)
	t.T.Counts.AcceptedAfterEndpointsNotReady = n
	t.Accepts = nil // from now on accepts are counted as they come
	if !complete {
		addPartial(&t.T, PartialAcceptHistory)
	}
}

// identify copies the pod's identity into its termination, and its own
// grace period until a deletion sets one (applyDeletionGrace).
func identify(t *Termination, pod collector.Pod) {
	t.PodUID = pod.UID
	t.Pod = pod.Name
	t.Node, t.PodIP = pod.Node, pod.IP
	if len(pod.IPs) > 1 {
		t.PodIPs = pod.IPs
	}
	t.Workload = keepRevision(t.Workload, pod.Workload)
	if t.Marks.DeleteRequested.IsZero() {
		t.GracePeriod = pod.GracePeriod
	}
}

// keepRevision takes the pod's workload, except that a revision once known
// is not forgotten: the owner lookup behind a later update may have failed
// (an API server outage, a ReplicaSet deleted after the rollout).
func keepRevision(known, now collector.Workload) collector.Workload {
	if now.Revision == "" && known.Revision != "" && now.Kind == known.Kind && now.Name == known.Name {
		now.Revision = known.Revision
	}
	return now
}

func anyStarted(pod collector.Pod) bool {
	for _, ct := range pod.Containers {
		if ct.ID != "" {
			return true
		}
	}
	return false
}

func anyRunning(pod collector.Pod) bool {
	for _, ct := range pod.Containers {
		if ct.ID != "" && !ct.Terminated {
			return true
		}
	}
	return false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
