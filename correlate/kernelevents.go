package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// Kernel takes one kernel event. It is on the daemon's hot path: events of
// pods that are not terminating cost a map lookup or two and, for an accept,
// one store into a preallocated ring.
func (c *Correlator) Kernel(e collector.Event) {
	if c.replayed(e.Time) {
		return // counted before the snapshot this correlator was restored from
	}
	c.watermark(e.Time)
	p, container := c.attribute(&e)
	if p == nil {
		c.unattributed[e.Type]++
		return
	}
	p.KernelSeen = true
	if p.Startup != nil && startupType(&e) && !claimedByTermination(p.Term, &e) {
		c.startupKernel(p.Startup, &e)
	}
	if p.Term == nil && e.WorthReplaying() {
		p.Early.push(&e)
	}
	c.dispatch(p, container, &e)
}

// replayed says whether an event at t was counted before the snapshot
// this correlator was restored from: earlier than the watermark, or one of
// the events at the watermark's own time that were already counted.
func (c *Correlator) replayed(t time.Time) bool {
	if c.replay.At.IsZero() || t.After(c.replay.At) {
		return false
	}
	if t.Equal(c.replay.At) {
		if c.replay.Ties == 0 {
			return false
		}
		c.replay.Ties--
	}
	return true
}

// watermark advances the latest kernel event time and counts the events
// at it, so a replay can skip exactly those.
func (c *Correlator) watermark(t time.Time) {
	switch {
	case t.After(c.kernelSeen.At):
		c.kernelSeen = Watermark{At: t, Ties: 1}
	case t.Equal(c.kernelSeen.At):
		c.kernelSeen.Ties++
	}
}

// dispatch hands e to what a termination does with its type, and reports
// whether the type has a handler (a type without one is attributed and
// counted, and otherwise ignored). A switch of direct calls, not a table of
// funcs: an indirect call would move every event to the heap.
func (c *Correlator) dispatch(p *podState, container string, e *collector.Event) bool {
	switch e.Type {
	case collector.EventAccept:
		c.accept(p, e)
	case collector.EventListenOpen:
		p.Listeners.open(e.SockCookie, listenerInfo{Port: e.Local.Port(), Container: container,
			Loopback: e.Local.Addr().Unmap().IsLoopback()})
	case collector.EventListenClose:
		listenClose(p, container, e)
	case collector.EventRefused:
		c.refused(p.Term, e)
	case collector.EventReset:
		if !c.resetOnReuse(p, e) {
			c.reset(p.Term, e)
		}
	case collector.EventSignal:
		c.signal(p, container, e)
	case collector.EventExit:
		if !sandboxTeardown(p, container) {
			c.exitBegins(p, container, e)
			exit(p.Term, container, e)
		}
	case collector.EventConnClosedInflight:
		c.connClosed(p.Term, e)
	case collector.EventBlackholed:
		c.blackholed(p, e)
	case collector.EventIdleClose:
		c.idleClosed(p, e)
	default:
		return false
	}
	return true
}

// replayEarly feeds the termination the rare events seen before it was
// open, from the deletion request on: a preStop that killed the server
// can be processed before the API event that began the termination.
func (c *Correlator) replayEarly(p *podState) {
	m := p.Term.T.Marks
	floor := m.DeleteRequested
	if floor.IsZero() {
		floor = m.DeletionSeen.Add(-c.cfg.SignalLead)
	}
	if !p.Early.Overwritten.Before(floor) {
		p.Term.EarlyOverflow = true
	}
	early := p.Early.drain()
	closed := lastServingClose(p, early, floor)
	for i, e := range early {
		switch {
		case e.Time.Before(floor):
		case e.Type == collector.EventReset && reuseResetReason(e.Reason) != "":
			// Counted for the workload when it arrived (see resetOnReuse):
			// a reset on reuse between the deletion request and the
			// termination's opening stays a steady-state one.
		case e.Type == collector.EventListenClose:
			// The listener set already took this close; its record and,
			// for the close that ended serving, the mark are due.
			_, container := c.attribute(&e)
			replayListenClose(p, container, &e, i == closed)
		default:
			_, container := c.attribute(&e)
			c.dispatch(p, container, &e)
		}
	}
}

// lastServingClose is the index in early of the listener close that
// listener_closed stands for, -1 for none: the last close of a listener
// the clients reach (listenerSet.serves, by the address and port the
// close names: the listener's own record went with it) once none of those
// is open any more, or, when every listener has closed and none of the
// closes served, the last close (the pod's only listener was bound to
// loopback, as listenClose decides too). When the set is not complete,
// the last serving close stands, as every such close moves the mark.
func lastServingClose(p *podState, early []collector.Event, floor time.Time) int {
	l := &p.Listeners
	if l.Complete && l.anyServing() {
		return -1
	}
	last, lastServing := -1, -1
	for i := range early {
		e := &early[i]
		if e.Type != collector.EventListenClose || e.Time.Before(floor) {
			continue
		}
		last = i
		if l.serves(closedListener(e, "")) {
			lastServing = i
		}
	}
	if lastServing >= 0 || !l.Complete || len(l.Open) > 0 {
		return lastServing
	}
	return last
}

// replayListenClose is listenClose for a close the listener set took
// before the termination began; mark says whether listener_closed is its.
func replayListenClose(p *podState, container string, e *collector.Event, mark bool) {
	info := closedListener(e, container)
	recordListenerClose(p, container, info, p.Listeners.serves(info), e.Time)
	if mark {
		p.Term.T.Marks.ListenerClosed = e.Time
	}
}

// recordListenerClose keeps a close of a pod of several containers, with
// its container, in Termination.Listeners.
func recordListenerClose(p *podState, container string, info listenerInfo, serves bool, at time.Time) {
	t := p.Term
	if len(p.Pod.Containers) > 1 && len(t.T.Listeners) < maxListenerCloses {
		t.T.Listeners = append(t.T.Listeners, ListenerClose{Container: container, Port: info.Port, Inner: !serves, At: at})
	}
}

// closedListener is what a listen_close says of its listener.
func closedListener(e *collector.Event, container string) listenerInfo {
	return listenerInfo{Port: e.Local.Port(), Container: container, Loopback: e.Local.Addr().Unmap().IsLoopback()}
}

func (c *Correlator) accept(p *podState, e *collector.Event) {
	src := c.sourceOf(e)
	t := p.Term
	noteSource(t, src, false)
	if src.probe {
		// The kubelet's probe: not a sign that routing still sends
		// traffic, so neither last_accept nor the accept counts move.
		if t != nil {
			c.point(t, e.Time, false, true)
		}
		return
	}
	if inPod(e) {
		// A container of the pod connecting to another over loopback (a
		// sidecar forwarding to its application): its client's
		// connection was the proxy's own accept, counted there. Only
		// inflight_at_stop_signal's rule needs it: accepted after the
		// stop signal, it was not in flight at it.
		if t != nil && !t.T.Marks.StopSignal.IsZero() && !e.Time.Before(t.T.Marks.StopSignal) {
			t.AcceptedAfterStop = addCookie(t.AcceptedAfterStop, e.SockCookie)
		}
		return
	}
	if len(p.Pod.Containers) > 1 || len(p.Listeners.Info) > 1 {
		p.Listeners.accepted(e.Local.Port())
	}
	c.clientAccept(p, e.Time, e.SockCookie, true)
	notePeer(t, e, peerAccepted)
	if t != nil && len(t.Blackholes) > 0 {
		reached(t, e, false)
	}
}

// clientAccept counts an accept that was not a probe: in the pod's history
// and, during a termination, in its counts; attempt adds it to the
// connection attempts (routing_lag_observed, the timeline). Accepts arrive
// out of order across CPUs: last_accept only moves forward.
func (c *Correlator) clientAccept(p *podState, at time.Time, cookie uint64, attempt bool) {
	p.LastAccept = later(p.LastAccept, at)
	p.Accepts.push(at)
	t := p.Term
	if t == nil {
		return
	}
	m := &t.T.Marks
	m.LastAccept = later(m.LastAccept, at)
	if attempt {
		c.attempt(t, at, false)
	}
	switch {
	case m.EndpointsNotReady.IsZero():
		t.Accepts.add(at)
	case !at.Before(m.EndpointsNotReady):
		t.T.Counts.AcceptedAfterEndpointsNotReady++
	}
	if !m.StopSignal.IsZero() && !at.Before(m.StopSignal) {
		t.AcceptedAfterStop = addCookie(t.AcceptedAfterStop, cookie)
	}
}

// listenClose sets listener_closed when the pod's last listener that its
// clients reach closes (listenerSet.serves: a sidecar's, not the loopback
// backend behind it). When the set of listeners is not known to be
// complete, every such close during the termination moves the mark: the
// last one is the last listener. A pod of several containers keeps each
// close, with its container, in Termination.Listeners.
func listenClose(p *podState, container string, e *collector.Event) {
	info, noneServing := p.Listeners.close(e.SockCookie)
	if info.Port == 0 {
		// Opened before the daemon watched the pod: the close says where
		// it listened, and its task whose it was.
		info = closedListener(e, "")
	}
	t := p.Term
	if t == nil {
		return
	}
	if container == "" {
		container = info.Container
	}
	serves := p.Listeners.serves(info)
	recordListenerClose(p, container, info, serves, e.Time)
	m := &t.T.Marks
	if noneServing && m.ListenerClosed.IsZero() || !p.Listeners.Complete && serves {
		m.ListenerClosed = e.Time
	}
}

// refused classifies a refusal: after the stop signal, or between
// deletion_seen and the stop signal. While no stop signal has been seen a
// refusal is unclassified: it becomes "before" when the stop signal comes;
// if it never does, evaluate decides. Refusals before the termination are
// kept in Early by Kernel and classified when deletion_seen is known. The
// kubelet's probes are counted apart and never as client attempts.
func (c *Correlator) refused(t *termState, e *collector.Event) {
	if t == nil || c.refusals.repeat(e) {
		return
	}
	if inPod(e) {
		refusedInside(t, e)
		return
	}
	reached(t, e, true)
	stop := stopPoint(t)
	afterStop := !stop.IsZero() && !e.Time.Before(stop)
	if !afterStop && (t.Tentative || e.Time.Before(deletionStart(t))) {
		return
	}
	src := c.sourceOf(e)
	noteSource(t, src, true)
	switch {
	case src.probe:
		t.T.Counts.ProbeRefused++
		c.point(t, e.Time, true, true)
		return
	case afterStop:
		t.T.Counts.RefusedAfterSigterm++
	case !stop.IsZero():
		t.T.Counts.RefusedBeforeSigterm++
	default:
		t.Unclassified++
	}
	c.attempt(t, e.Time, true)
	notePeer(t, e, peerRefused)
}

// refusedInside counts a refusal over the pod's loopback (a sidecar's
// forward to a container whose listener closed) from the deletion on, or
// from the stop signal for a termination without a deletion.
func refusedInside(t *termState, e *collector.Event) {
	stop := stopPoint(t)
	if (stop.IsZero() || e.Time.Before(stop)) && (t.Tentative || e.Time.Before(deletionStart(t))) {
		return
	}
	t.T.Counts.RefusedInsidePod++
	port := e.Local.Port()
	for i := range t.T.RefusedInsidePorts {
		if pc := &t.T.RefusedInsidePorts[i]; pc.Port == port {
			pc.Count++
			pc.Last = later(pc.Last, e.Time)
			return
		}
	}
	if len(t.T.RefusedInsidePorts) < maxListenerCloses {
		t.T.RefusedInsidePorts = append(t.T.RefusedInsidePorts, PortCount{Port: port, Count: 1, Last: e.Time})
	}
}

// deletionStart is deletion_seen, or the start of a termination whose
// graceful deletion was never seen (a force delete).
func deletionStart(t *termState) time.Time {
	if !t.T.Marks.DeletionSeen.IsZero() {
		return t.T.Marks.DeletionSeen
	}
	return t.Start
}

// attempt records a connection attempt for routing_lag_observed and the
// timeline.
func (c *Correlator) attempt(t *termState, at time.Time, refused bool) {
	if at.After(t.T.LastConnAttempt) {
		t.T.LastConnAttempt = at
	}
	c.point(t, at, refused, false)
}

// point adds a connection attempt to the timeline page's points (bounded).
func (c *Correlator) point(t *termState, at time.Time, refused, probe bool) {
	if len(t.T.Connections) < c.cfg.MaxConnPoints {
		t.T.Connections = append(t.T.Connections, ConnPoint{Time: at, Refused: refused, Probe: probe})
	}
}

func addCookie(set map[uint64]bool, cookie uint64) map[uint64]bool {
	if cookie == 0 {
		return set
	}
	return addBounded(set, cookie)
}

// addBounded adds k to a per-termination set that stops growing at
// maxTrackedCookies, creating it on first use.
func addBounded[K comparable](set map[K]bool, k K) map[K]bool {
	if len(set) >= maxTrackedCookies {
		return set
	}
	if set == nil {
		set = make(map[K]bool)
	}
	set[k] = true
	return set
}
