package correlate

import "github.com/drainwatch/drainwatch/collector"

// signal handles a signal generated to a task of the pod. The stop signal
// is the first one matching the container's stop signal sent to the
// container's init (PID 1 of its PID namespace): the runtime sends it once,
// to init only. A signal forwarded to workers by a forking server is not
// it. SIGKILL counts to any task of the pod when it kills a running one.
func (c *Correlator) signal(p *podState, container string, e *collector.Event) {
	if e.Signal == sigkill {
		if t := p.Term; t != nil && t.T.Marks.Sigkill.IsZero() && killsRunning(t, e) {
			t.T.Marks.Sigkill = e.Time
		}
		return
	}
	if !e.TargetInit || !isStopSignal(p.Pod, container, e.Signal) {
		return
	}
	if p.Term == nil {
		// The kernel stream can run ahead of the API's deletion; a stop
		// signal with no deletion within SignalLead is a container restart
		// and Tick drops it.
		c.begin(p, e.Time)
		p.Term.Tentative = true
	}
	t := p.Term
	if t.T.Marks.StopSignal.IsZero() {
		t.T.Marks.StopSignal = e.Time
		t.T.StopSignal = e.Signal
		t.T.StopSignalTarget = e.Comm.String()
		t.T.Counts.RefusedBeforeSigterm += t.Unclassified
		t.Unclassified = 0
	}
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

// isStopSignal says whether sig stops the container (any container of the
// pod when the cgroup did not name one).
func isStopSignal(pod collector.Pod, container string, sig uint32) bool {
	if len(pod.Containers) == 0 {
		return sig == sigterm
	}
	for _, ct := range pod.Containers {
		if (container == "" || ct.Name == container) && stopSignalOf(ct) == sig {
			return true
		}
	}
	return false
}

// exit records a process exit: any exit makes the resets its closing
// sockets send "reset at exit"; a container init's exit is the exit mark.
func exit(t *termState, container string, e *collector.Event) {
	if t == nil {
		return
	}
	if len(t.ExitedPIDs) < maxTrackedCookies {
		if t.ExitedPIDs == nil {
			t.ExitedPIDs = make(map[uint32]bool)
		}
		t.ExitedPIDs[e.PID] = true
	}
	if !e.TargetInit {
		return
	}
	t.SawInitExit = true
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

// resetAtExit counts a RST sent by a process of the pod after its exit:
// the kernel resets the connections an exiting process leaves with unread
// data. The sending task is the exiting one (exit_files runs in do_exit
// after the exit tracepoint).
func resetAtExit(t *termState, e *collector.Event) {
	if t == nil || !t.ExitedPIDs[e.PID] || !settle(t, e.SockCookie) {
		return
	}
	t.T.Counts.ConnectionsResetAtExit++
}

// inflightClosed counts an accepted connection torn down with a request in
// flight: killed by SIGKILL, or reset by another exit. It also counts
// towards inflight_at_stop_signal when it was open at the stop signal
// (not accepted after it) and closed after it.
func inflightClosed(t *termState, e *collector.Event) {
	if t == nil || !settle(t, e.SockCookie) {
		return
	}
	switch {
	case e.Cause == collector.CauseSigkill:
		t.T.Counts.RequestsKilledBySigkill++
	case e.Cause == collector.CauseSignal || t.ExitedPIDs[e.PID]:
		t.T.Counts.ConnectionsResetAtExit++
	}
	stop := t.T.Marks.StopSignal
	if !stop.IsZero() && !e.Time.Before(stop) && !t.AcceptedAfterStop[e.SockCookie] {
		t.T.Counts.InflightAtStopSignal++
	}
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
