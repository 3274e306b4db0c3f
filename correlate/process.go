package correlate

import (
	"net/netip"

	"github.com/drainwatch/drainwatch/collector"
)

// signal handles a signal generated to a task of the pod. The stop signal
// is the first signal other than SIGKILL that a container's init (PID 1 of
// its PID namespace) receives from outside the container: whatever the
// runtime sends (the image's STOPSIGNAL, lifecycle.stopSignal, SIGTERM),
// whether or not the API names it. Signals a process of the container sends
// (a preStop `kill`, a server signalling itself) are not it, nor is a
// signal forwarded to workers. SIGKILL counts to any task of the pod when it
// kills a running one.
func (c *Correlator) signal(p *podState, container string, e *collector.Event) {
	if e.Signal == sigkill {
		if t := p.Term; t != nil && t.T.Marks.Sigkill.IsZero() && killsRunning(t, e) && !sandboxTeardown(p, container) {
			t.T.Marks.Sigkill = e.Time
		} else if t == nil {
			noteOutsideKill(p, e)
		}
		return
	}
	if !e.TargetInit || fromInside(p, e) {
		return
	}
	if newInit(p, container) {
		c.endContainer(p, e.Time) // an earlier restart's, kept while the pod watch was silent
	}
	if p.Term == nil {
		// The first sign of a stop, the kernel stream often ahead of the
		// API's deletion or Killing. Until one of those (or an exit)
		// confirms it, it is tentative: a signal that stops nothing is
		// dropped by Tick.
		c.begin(p, e.Time)
		p.Term.Tentative, p.Term.Container = true, container
	}
	t := p.Term
	if t.T.Marks.StopSignal.IsZero() {
		t.T.Marks.StopSignal = e.Time
		t.T.StopSignal = e.Signal
		t.T.StopSignalTarget = e.Comm.String()
		t.StopContainer = container
		t.T.StopSignalAPI = apiStopSignal(p.Pod, container)
		t.T.Counts.RefusedBeforeSigterm += t.Unclassified
		t.Unclassified = 0
	}
}

// fromInside says whether a process of the pod's own containers sent the
// signal: the target itself, or a sender in one of the pod's container
// cgroups. A sender whose cgroup is unknown (0) is taken as outside.
func fromInside(p *podState, e *collector.Event) bool {
	if e.SenderPID == e.PID {
		return true
	}
	if e.SenderCgroup == 0 {
		return false
	}
	for _, id := range p.Cgroups {
		if id == e.SenderCgroup {
			return true
		}
	}
	return false
}

// apiStopSignal is the stop signal the API names for the container (any
// container of the pod when the cgroup did not name one), 0 for none.
func apiStopSignal(pod collector.Pod, container string) uint32 {
	for _, ct := range pod.Containers {
		if (container == "" || ct.Name == container) && ct.StopSignal != 0 {
			return ct.StopSignal
		}
	}
	return 0
}

// killsRunning says whether a SIGKILL kills a process that was still
// running, as the runtime's does when the grace period runs out. The
// kernel also generates SIGKILLs of its own around an exit, which killed
// nothing: about 1 ms after an init exits, one to the exiting process
// itself (sender and target the same process) that the kernel drops
// (result "ignored": prepare_signal discards signals to a dying thread
// group), and those the exited init of a PID namespace sends to what is left
// in it (zap_pid_ns_processes). A SIGKILL to, or from, a process already
// seen exiting is one of those.
func killsRunning(t *termState, e *collector.Event) bool {
	return e.SenderPID != e.PID && e.SignalResult != collector.SignalIgnored &&
		!t.ExitedPIDs[e.PID] && !t.ExitedPIDs[e.SenderPID]
}

// sandboxTeardown says whether a process event of no container of the pod
// comes once every container's init has exited: the runtime stopping the
// pod's sandbox. On a real node (containerd) the pause process holds the
// pod's network namespace as PID 1 of a PID namespace of its own, in a
// cgroup no containerStatus names; when the kubelet stops the sandbox after
// the containers exited, containerd SIGKILLs it and it exits 137. That
// SIGKILL killed no workload and that exit is not the pod's.
func sandboxTeardown(p *podState, container string) bool {
	return container == "" && p.Term != nil && len(p.Cgroups) > 0 && allExited(p)
}

// exit records a process exit: any exit makes the resets its closing
// sockets send "reset at exit"; a container init's exit is the exit mark.
func exit(t *termState, container string, e *collector.Event) {
	if t == nil {
		return
	}
	t.ExitedPIDs = addBounded(t.ExitedPIDs, e.PID)
	noteExit(t, e)
	if !e.TargetInit {
		return
	}
	t.SawInitExit, t.Tentative = true, false
	if container != "" {
		if t.InitExited == nil {
			t.InitExited = make(map[string]bool)
		}
		t.InitExited[container] = true
	}
	// The pod's drain ends with its last init; a failure code is kept over
	// a later clean exit of another container.
	if e.Time.After(t.T.Marks.Exit) {
		t.T.Marks.Exit = e.Time
	}
	if e.ExitCode != 0 || t.T.ExitCode == 0 {
		t.T.ExitCode, t.T.ExitSignal = e.ExitCode, e.ExitSignal
	}
}

// reset handles a RST the pod's kernel sent. A RST from a socket of the
// pod sent by a process that has exited is a connection reset at exit (the
// kernel resets what an exiting process leaves with unread data; the
// sending task is the exiting one, since exit_files runs after the exit
// tracepoint). A RST with no socket is handled by resetNoSocket.
func (c *Correlator) reset(t *termState, e *collector.Event) {
	if t == nil {
		return
	}
	if e.SockCookie == 0 {
		c.resetNoSocket(t, e)
		return
	}
	if !t.ExitedPIDs[e.PID] || !settle(t, e.SockCookie) {
		return
	}
	t.T.Counts.ConnectionsResetAtExit++
}

// resetNoSocket counts a RST answering a segment (not a SYN: those are
// refusals) for which no socket exists, sent after the pod's listener
// closed while its server is still alive: a handshake the closed listener
// left half-open, whose client's ACK or first request meets no socket. A
// client whose connection the shutdown already reset is counted once.
func (c *Correlator) resetNoSocket(t *termState, e *collector.Event) {
	closed := t.T.Marks.ListenerClosed
	if t.Tentative || t.SawInitExit || closed.IsZero() || e.Time.Before(closed) || c.sourceOf(e).probe || inPod(e) {
		return
	}
	if resetRemote(t, e.Remote) {
		t.T.Counts.ConnectionsResetAtShutdown++
	}
}

// connClosed counts an accepted connection torn down with a request or
// stream in flight, or reset in its listener's accept queue
// (Inflight none): killed by SIGKILL, killed by another exit (in flight)
// or reset by it (queued), or, while the process is alive, reset by the
// shutdown. In-flight ones open at the stop signal (not accepted after it)
// and closed after it also count towards inflight_at_stop_signal. The
// kubelet's probes are not client traffic.
func (c *Correlator) connClosed(t *termState, e *collector.Event) {
	if t == nil || c.sourceOf(e).probe || !settle(t, e.SockCookie) {
		return
	}
	inflight := e.Inflight != collector.InflightNone
	atExit := e.Cause == collector.CauseSignal || t.ExitedPIDs[e.PID]
	switch {
	case e.Cause == collector.CauseSigkill && inflight:
		t.T.Counts.RequestsKilledBySigkill++
		if e.Inflight == collector.InflightStream {
			t.T.Counts.StreamsKilledBySigkill++
		}
	case atExit && inflight:
		t.T.Counts.RequestsKilledAtExit++
		noteServerExit(t, e.PID)
	case e.Cause == collector.CauseSigkill || atExit:
		t.T.Counts.ConnectionsResetAtExit++
	case inPod(e):
		// Between the pod's own containers (a proxy and its backend over
		// loopback): no client sees this connection.
	default:
		if resetRemote(t, e.Remote) {
			t.T.Counts.ConnectionsResetAtShutdown++
		}
	}
	stop := t.T.Marks.StopSignal
	if inflight && !stop.IsZero() && !e.Time.Before(stop) && !t.AcceptedAfterStop[e.SockCookie] {
		t.T.Counts.InflightAtStopSignal++
	}
}

// inPod says whether a connection runs over the pod's loopback, between its
// own containers.
func inPod(e *collector.Event) bool {
	return e.Local.Addr().IsLoopback() || e.Remote.Addr().IsLoopback()
}

// resetRemote records a client address whose connection the shutdown reset
// and reports whether it was not recorded yet. Past the bound every reset
// counts (a client port reused within one termination is rare).
func resetRemote(t *termState, remote netip.AddrPort) bool {
	if t.ResetRemotes[remote] {
		return false
	}
	t.ResetRemotes = addBounded(t.ResetRemotes, remote)
	return true
}

// settle records that a connection has been counted and reports whether it
// had not been yet; a connection without a cookie cannot be deduplicated.
func settle(t *termState, cookie uint64) bool {
	if cookie == 0 {
		return true
	}
	if t.Settled[cookie] {
		return false
	}
	t.Settled = addCookie(t.Settled, cookie)
	return true
}
