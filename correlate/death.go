package correlate

import (
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// How a server ended (Death.Kind). The kernel cannot see whether a process
// has a handler for a signal: Go without signal.Notify dies of SIGTERM
// (143) when it is not PID 1, and exits with status 2 when it is (the
// kernel drops the runtime's re-raise to a PID namespace's init), which is
// also a Go panic's status. What it sees decides instead: the signal sent,
// how and when the process ended after it, whether its listener closed
// while it was still alive (a listener closed only by the exit comes after
// the exit's event: exit_files runs after the exit tracepoint), and its
// status. The first matching rule wins:
//
//   - sigkill: died of SIGKILL.
//   - stop_signal: died of the stop signal, at or after it: the signal's
//     default action, nothing handled it.
//   - crash: died of any other signal (SIGSEGV, SIGABRT, SIGBUS…), or
//     exited with a non-zero status before the stop signal (or with none
//     seen).
//   - exit: exited with status 0 before the stop signal (or with none
//     seen): it ended by itself.
//   - exit_after_shutdown: exited with a status after the stop signal, its
//     listener closed while it was alive: it ran a shutdown, which ended
//     (its timeout, its own exit) before the requests did.
//   - exit_without_drain: exited with a status after the stop signal, its
//     listener open until the exit, with status 0 or within PromptExit of
//     the signal: it stopped at the signal without draining (a runtime's
//     default exit, a handler that only exits).
//   - crash: the rest, a non-zero status later than PromptExit after the
//     stop signal with the listener open: it survived the signal, so
//     something handled it, and then died before any shutdown (a panic,
//     a fatal error).
const (
	DeathSigkill       = "sigkill"
	DeathStopSignal    = "stop_signal"
	DeathCrash         = "crash"
	DeathExit          = "exit"
	DeathAfterShutdown = "exit_after_shutdown"
	DeathNoDrain       = "exit_without_drain"
)

// Death is how the server ended: the process whose exit tore down
// requests in flight (the first such), else the container's init.
type Death struct {
	Kind string `json:"kind"`
	// Comm and PID name the process (the init's exit leaves them empty).
	Comm     string    `json:"comm,omitempty"`
	PID      uint32    `json:"pid,omitempty"`
	Time     time.Time `json:"time"`
	ExitCode int32     `json:"exit_code"`
	// Signal is the signal it died of, 0 for an exit with a status.
	Signal uint32 `json:"signal,omitempty"`
}

// procExit is one process exit seen during a termination.
type procExit struct {
	PID    uint32    `json:"pid"`
	Comm   string    `json:"comm,omitempty"`
	Time   time.Time `json:"t"`
	Code   int32     `json:"code"`
	Signal uint32    `json:"signal,omitempty"`
}

// maxRecentExits bounds termState.RecentExits. An exit's connections close
// microseconds after its event, so the exit is among the latest few even
// with exec probes exiting beside it.
const maxRecentExits = 8

// noteExit keeps the latest process exits of the termination.
func noteExit(t *termState, e *collector.Event) {
	x := procExit{PID: e.PID, Comm: e.Comm.String(), Time: e.Time, Code: e.ExitCode, Signal: e.ExitSignal}
	if len(t.RecentExits) == maxRecentExits {
		t.RecentExits = append(t.RecentExits[:0], t.RecentExits[1:]...)
	}
	t.RecentExits = append(t.RecentExits, x)
}

// noteServerExit records, once, the exit of the process pid whose exit
// tore down a request in flight.
func noteServerExit(t *termState, pid uint32) {
	if t.ServerExit != nil {
		return
	}
	for i := len(t.RecentExits) - 1; i >= 0; i-- {
		if x := t.RecentExits[i]; x.PID == pid {
			t.ServerExit = &x
			return
		}
	}
}

// deathOf classifies the server's end: the exit that killed requests, else
// the init's; the zero Death while no exit was seen.
func deathOf(ts *termState, cfg Config) Death {
	t := &ts.T
	x := procExit{Time: t.Marks.Exit, Code: t.ExitCode, Signal: t.ExitSignal}
	if ts.ServerExit != nil {
		x = *ts.ServerExit
	}
	if x.Time.IsZero() {
		return Death{}
	}
	return Death{Kind: deathKind(t, x, cfg), Comm: x.Comm, PID: x.PID, Time: x.Time, ExitCode: x.Code, Signal: x.Signal}
}

// deathKind applies the rules above.
func deathKind(t *Termination, x procExit, cfg Config) string {
	stop := t.Marks.StopSignal
	afterStop := !stop.IsZero() && !x.Time.Before(stop)
	switch {
	case x.Signal == sigkill:
		return DeathSigkill
	case x.Signal != 0 && afterStop && x.Signal == t.StopSignal:
		return DeathStopSignal
	case x.Signal != 0 || !afterStop && x.Code != 0:
		return DeathCrash
	case !afterStop:
		return DeathExit
	case shutdownRan(t, x):
		return DeathAfterShutdown
	case x.Code == 0 || x.Time.Sub(stop) <= cfg.PromptExit:
		return DeathNoDrain
	}
	return DeathCrash
}

// shutdownRan says whether the pod's listener closed while the process was
// still alive.
func shutdownRan(t *Termination, x procExit) bool {
	c := t.Marks.ListenerClosed
	return !c.IsZero() && c.Before(x.Time)
}

// DeathText says how the server ended, for the timeline: "node (pid 7)
// died of SIGTERM 0.002s after the stop signal (no handler: the signal's
// default action) with 4 requests in flight"; "" while no exit was seen.
func DeathText(t Termination) string {
	d := t.Death
	if d.Kind == "" {
		return ""
	}
	who := "the server"
	if d.Comm != "" {
		who = fmt.Sprintf("%s (pid %d)", d.Comm, d.PID)
	}
	text := who + " " + deathHow(t) + clause(" ", relative(t.Marks.StopSignal, d.Time, "the stop signal")) + deathWhy(t)
	if n := t.Counts.RequestsKilledAtExit; n > 0 {
		text += fmt.Sprintf(" with %d requests in flight", n)
	}
	return text
}

// deathHow is "died of SIGSEGV" or "exited with code 2".
func deathHow(t Termination) string {
	if t.Death.Signal != 0 {
		return "died of " + collector.SignalName(t.Death.Signal)
	}
	return fmt.Sprintf("exited with code %d", t.Death.ExitCode)
}

// deathWhy explains the kind in a parenthesis.
func deathWhy(t Termination) string {
	switch t.Death.Kind {
	case DeathStopSignal:
		return " (no handler: the signal's default action)"
	case DeathNoDrain:
		return " (its listener open until the exit: no drain)"
	case DeathAfterShutdown:
		return fmt.Sprintf(" (its listener closed %s: a shutdown ran)", relative(t.Death.Time, t.Marks.ListenerClosed, "the exit"))
	case DeathCrash:
		return " (a crash)"
	}
	return ""
}

// DeathNotable says whether the timeline should say how the server ended:
// when the exit killed requests, or when it ended without a shutdown (a
// signal's default action, an exit at the signal, a crash) even if nothing
// was in flight. A shutdown's exit and SIGKILL (the exit mark names it)
// add nothing.
func DeathNotable(t Termination) bool {
	switch t.Death.Kind {
	case DeathStopSignal, DeathNoDrain, DeathCrash:
		return true
	}
	return t.Death.Kind != "" && t.Counts.RequestsKilledAtExit > 0
}
