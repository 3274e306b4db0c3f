package correlate

import (
	"slices"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// A startup's diagnoses.
const (
	// DiagReadyBeforeListening: client SYNs refused after the pod was Ready.
	DiagReadyBeforeListening = "ready_before_listening"
	// DiagReadyBeforeServing: client connections the pod accepted were
	// reset by it after it was Ready.
	DiagReadyBeforeServing = "ready_before_serving"
)

// startupPod takes a pod update into its startup: a pod seen for the first
// time not Ready and not deleting begins one (a pod already Ready when the
// daemon first saw it started unobserved).
func (c *Correlator) startupPod(p *podState, seen time.Time, firstSight bool) {
	pod := p.Pod
	deleting := !pod.DeletionTimestamp.IsZero()
	if p.Startup == nil {
		if !firstSight || deleting || pod.Ready || c.startupsOpen() >= maxStartups {
			return
		}
		p.Startup = &startupState{S: Startup{PodUID: pod.UID, Window: c.cfg.StartupWindow}}
		p.Startup.S.Marks.Created = pod.Created
		p.Startup.S.NetnsBound = p.NetnsIno != 0
	}
	st := p.Startup
	st.S.Namespace, st.S.Pod, st.S.Node, st.S.Workload = pod.Namespace, pod.Name, pod.Node, pod.Workload
	m := &st.S.Marks
	if m.ContainerStarted.IsZero() && anyStarted(pod) {
		m.ContainerStarted = seen
	}
	switch {
	case deleting:
		st.end(seen)
	case pod.Ready && m.Ready.IsZero():
		c.startupReady(st, seen)
	}
}

// StartupStarting reports whether a pod's startup is open: its accepts
// are needed one by one (the first accepted connection) until it ends.
func (c *Correlator) StartupStarting(uid string) bool {
	p := c.pods[uid]
	return p != nil && p.Startup != nil
}

func (c *Correlator) startupsOpen() int {
	n := 0
	for _, p := range c.pods {
		if p.Startup != nil {
			n++
		}
	}
	return n
}

// startupReady sets Ready and classifies what waited for it.
func (c *Correlator) startupReady(st *startupState, seen time.Time) {
	st.S.Marks.Ready = seen
	st.end(seen.Add(st.S.Window))
	for _, ev := range st.Pending {
		st.classify(ev)
	}
	st.Pending = nil
}

// end closes the window at at, unless it closed earlier.
func (st *startupState) end(at time.Time) {
	if m := &st.S.Marks; m.WindowEnd.IsZero() || at.Before(m.WindowEnd) {
		m.WindowEnd = at
	}
}

// startupKernel takes a kernel event of a pod whose startup is open.
func (c *Correlator) startupKernel(st *startupState, e *collector.Event) {
	switch e.Type {
	case collector.EventListenOpen:
		st.listened(e)
		return
	case collector.EventRefused:
		if c.startupSyns.repeat(e) {
			return
		}
	case collector.EventReset:
		if inPod(e) || !st.clientConn(e) || !settleStartup(st, e) {
			return
		}
	}
	ev := pendingEvent{Time: e.Time, Type: e.Type, Port: e.Local.Port(), Reason: e.Reason, Socket: e.SockCookie != 0}
	if c.sourceOf(e).probe {
		if e.Type == collector.EventRefused && st.inWindow(ev.Time) {
			st.S.Counts.ProbeRefused++
		}
		return
	}
	if e.Type == collector.EventAccept {
		st.Clients = addCookie(st.Clients, e.SockCookie)
		st.ClientRemotes = addBounded(st.ClientRemotes, e.Remote)
	}
	if !st.S.Marks.Ready.IsZero() {
		st.classify(ev)
		return
	}
	if len(st.Pending) < maxPending {
		st.Pending = append(st.Pending, ev)
		return
	}
	addStartupPartial(&st.S, StartupPendingOverflow)
	st.classify(ev) // Ready unknown: before it
}

func (st *startupState) inWindow(t time.Time) bool {
	end := st.S.Marks.WindowEnd
	return end.IsZero() || t.Before(end)
}

// classify counts a client event on its side of Ready.
func (st *startupState) classify(ev pendingEvent) {
	if !st.inWindow(ev.Time) {
		return
	}
	m, n := &st.S.Marks, &st.S.Counts
	before := m.Ready.IsZero() || ev.Time.Before(m.Ready)
	switch {
	case ev.Type == collector.EventRefused && before:
		n.RefusedBeforeReady++
	case ev.Type == collector.EventRefused:
		n.RefusedAfterReady++
		if !slices.Contains(st.S.RefusedPorts, ev.Port) && len(st.S.RefusedPorts) < maxStartupPorts {
			st.S.RefusedPorts = append(st.S.RefusedPorts, ev.Port)
		}
	case before:
	case ev.Type == collector.EventReset:
		n.ResetAfterReady++
		if len(st.S.Resets) < maxStartupPorts {
			st.S.Resets = append(st.S.Resets, ResetMark{At: ev.Time, Port: ev.Port, Reason: ev.Reason, Socket: ev.Socket})
		}
	case ev.Type == collector.EventAccept:
		if m.FirstAccept.IsZero() || ev.Time.Before(m.FirstAccept) {
			m.FirstAccept = ev.Time
		}
	}
}

// listened records the pod's first listener and each port's first.
func (st *startupState) listened(e *collector.Event) {
	m := &st.S.Marks
	if m.FirstListener.IsZero() || e.Time.Before(m.FirstListener) {
		m.FirstListener = e.Time
	}
	port := e.Local.Port()
	i := slices.IndexFunc(st.S.Listeners, func(l PortMark) bool { return l.Port == port })
	switch {
	case i >= 0 && e.Time.Before(st.S.Listeners[i].At):
		st.S.Listeners[i].At = e.Time
	case i < 0 && len(st.S.Listeners) < maxStartupPorts:
		st.S.Listeners = append(st.S.Listeners, PortMark{Port: port, At: e.Time})
	}
}

// clientConn says whether a reset is of a connection the pod accepted
// from a client: by its socket, or, for a RST without one (a segment no
// socket wanted), by the client's address.
func (st *startupState) clientConn(e *collector.Event) bool {
	if e.SockCookie != 0 {
		return st.Clients[e.SockCookie]
	}
	return st.ClientRemotes[e.Remote]
}

// settleStartup reports whether a reset connection was not counted yet.
// A connection the pod's socket reset records its client too: the client's
// segments already on their way (its request, its ACK) meet no socket and
// are answered with a RST of their own, which must not count the same
// connection again. Past the bound every reset counts (a client port reused
// within one window is rare).
func settleStartup(st *startupState, e *collector.Event) bool {
	if e.SockCookie == 0 {
		if st.Remotes[e.Remote] {
			return false
		}
		st.Remotes = addBounded(st.Remotes, e.Remote)
		return true
	}
	if st.Settled[e.SockCookie] {
		return false
	}
	st.Settled = addBounded(st.Settled, e.SockCookie)
	st.Remotes = addBounded(st.Remotes, e.Remote)
	return true
}

func addStartupPartial(s *Startup, reason string) {
	s.Partial = true
	if !slices.Contains(s.PartialReasons, reason) {
		s.PartialReasons = append(s.PartialReasons, reason)
	}
}

// claimedByTermination says whether a client event is the pod's
// termination's, not its startup's: a connection event at or after the
// stop signal (which the kernel stream often delivers before the API's
// deletion ends the startup), or, once the termination is confirmed, at or
// after its deletion. A pod deleted within its startup window would
// otherwise count one refusal twice: refused_after_sigterm and
// refused_after_ready.
func claimedByTermination(t *termState, e *collector.Event) bool {
	if t == nil || e.Type == collector.EventListenOpen {
		return false
	}
	if stop := stopPoint(t); !stop.IsZero() && !e.Time.Before(stop) {
		return true
	}
	return !t.Tentative && !e.Time.Before(deletionStart(t))
}

// startupType says whether a kernel event can matter to a startup. A
// reset on a reused connection is the workload's (reuse.go), not counted
// again here.
func startupType(e *collector.Event) bool {
	switch e.Type {
	case collector.EventListenOpen, collector.EventAccept, collector.EventRefused:
		return true
	case collector.EventReset:
		return reuseResetReason(e.Reason) == ""
	}
	return false
}
