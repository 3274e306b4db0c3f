package lab

import (
	"strings"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// The clients' side of the table, defined to match the counts of docs/design.md.
//
// Refused: a request whose connect to the pod got ECONNREFUSED (the pod's
// kernel answered the SYN with a RST: no socket listens). Through the
// router, the router is the pod's client: its Refused records count, not
// the resets it passes on to the clients.
//
// Killed: a request to the pod that was in flight when the container died
// of SIGKILL. Its connection was established (not refused); its request was
// written (the write returned: on testenv's veth links the bytes are then in
// the server's receive queue; a write that fails met a socket already torn
// down); it got no complete response; it started before the container was
// gone (the node agent's exit time: every process of the container dead, the
// runtime's ground truth); and its connection ended with a reset or an EOF at
// or after the SIGKILL. This is requests_killed_by_sigkill seen from the
// other end: a connection the server had accepted (or held in its accept
// queue) with request bytes it never answered. A request that reached the
// listener between the SIGKILL and the death of the last process counts: the
// kernel still accepted it. Not decidable from the client: a request written
// within microseconds of the death (its bytes may arrive just after); the
// scenarios keep their requests clear of that instant.

// RefusedTo counts the requests to target that were refused: the clients'
// refused_after_sigterm when target is a terminating pod.
func RefusedTo(target string, reqs ...[]client.Request) int {
	return countTo(target, reqs, func(r client.Request) bool { return r.Outcome == client.Refused })
}

// BlackholedTo counts the requests to target whose connect failed without
// a refusal (no route to host, or no answer within the timeout before the
// connection was made: Local is set once it is): the clients'
// connections_blackholed when target is a terminating pod whose network
// went.
func BlackholedTo(target string, reqs ...[]client.Request) int {
	return countTo(target, reqs, func(r client.Request) bool {
		return r.Local == "" && (r.Outcome == client.Unreachable || r.Outcome == client.Timeout)
	})
}

// Death is when a container got SIGKILL and when it was gone, from the
// node agent's termination record (zero SIGKILL: it exited in time).
// StopSignal is when the agent sent the stop signal. NoDrain says the
// scenario's server does not drain (it dies of the stop signal, or its own
// shutdown gives up on what it still serves): a property of the server the
// scenario runs, known without drainwatch.
type Death struct {
	SIGKILL, Exit time.Time
	StopSignal    time.Time
	NoDrain       bool
}

// KilledBy counts the requests to target killed by the container's SIGKILL.
func KilledBy(target string, d Death, reqs ...[]client.Request) int {
	return countTo(target, reqs, func(r client.Request) bool { return Killed(r, d) })
}

// Killed reports whether r was killed by the container's SIGKILL.
func Killed(r client.Request, d Death) bool {
	if d.SIGKILL.IsZero() {
		return false
	}
	cut := r.Outcome == client.Reset || r.Outcome == client.EOF
	return cut && written(r) && r.Start.Before(d.Exit) && !r.End.Before(d.SIGKILL)
}

// written reports whether the request's failure came after its request was
// written: client.Get records a failed write as a net.OpError "write ...".
func written(r client.Request) bool { return !strings.HasPrefix(r.Err, "write ") }

// Killed at exit: a request to a server that does not drain (Death.NoDrain)
// and exited without SIGKILL, that was written, got no complete response
// (a reset or an EOF), started before the container was gone and ended at
// or after the stop signal: the server's exit cut it. This is
// requests_killed_at_exit seen from the other end. The exit/ scenarios send
// nothing but requests in flight at the deletion, so no connection is
// made after the stop signal that a live shutdown could reset.

// KilledAtExitTo counts the requests to target cut by the exit of a server
// that does not drain.
func KilledAtExitTo(target string, d Death, reqs ...[]client.Request) int {
	return countTo(target, reqs, func(r client.Request) bool { return KilledAtExit(r, d) })
}

// KilledAtExit reports whether r was cut by the exit (not SIGKILL) of a
// server that does not drain.
func KilledAtExit(r client.Request, d Death) bool {
	cut := r.Outcome == client.Reset || r.Outcome == client.EOF
	return d.NoDrain && d.SIGKILL.IsZero() && cut && written(r) && r.Start.Before(d.Exit) && !r.End.Before(d.StopSignal)
}

// Reset at shutdown: a request to the pod whose connection was established
// and then reset (ECONNRESET, a failed write included: an accept-queue
// connection reset at the listener's close, or a handshake the closed
// listener left half-open) or closed without a complete response (EOF: read
// but not answered), while the server was alive: not killed by the SIGKILL
// and ended before it. This is connections_reset_at_shutdown seen from the
// other end. The lab's servers drain what they accepted before they exit
// (Go's Shutdown, nginx's graceful SIGQUIT), so no connection is reset by
// an exit other than SIGKILL's, which this definition would count; the
// exit/ scenarios' servers, which do not drain, have that count of their own
// (KilledAtExit), never counted here.

// ResetAtShutdownTo counts the requests to target reset or closed unanswered
// by the shutdown of a live server.
func ResetAtShutdownTo(target string, d Death, reqs ...[]client.Request) int {
	return countTo(target, reqs, func(r client.Request) bool { return ResetAtShutdown(r, d) })
}

// ResetAtShutdown reports whether r was reset or closed unanswered by the
// server's shutdown while it was alive.
func ResetAtShutdown(r client.Request, d Death) bool {
	cut := r.Outcome == client.Reset || r.Outcome == client.EOF
	alive := d.SIGKILL.IsZero() || r.End.Before(d.SIGKILL)
	return cut && alive && !Killed(r, d) && !KilledAtExit(r, d)
}

// countTo counts the requests to target that match.
func countTo(target string, reqs [][]client.Request, match func(client.Request) bool) int {
	n := 0
	for _, rs := range reqs {
		for _, r := range rs {
			if r.Target == target && match(r) {
				n++
			}
		}
	}
	return n
}
