package lab

import (
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
)

// The clients' side of the table, defined to match DESIGN.md's counts.
//
// Refused: a request whose connect to the pod got ECONNREFUSED (the pod's
// kernel answered the SYN with a RST: no socket listens). Through the
// router, the router is the pod's client: its Refused records count, not
// the resets it passes on to the clients.
//
// Killed: a request to the pod that was in flight when the container got
// SIGKILL and died with it: it started before the SIGKILL (the node agent's
// record, the runtime's ground truth), its connection was established (not
// refused), it got no complete response, and its connection ended with a
// reset or an EOF at or after the SIGKILL. This is requests_killed_by_sigkill
// seen from the other end: a connection the server had accepted (or held in
// its accept queue) with request bytes it never answered.

// refusedTo counts the requests to target that were refused.
func refusedTo(target string, reqs ...[]client.Request) int {
	n := 0
	for _, rs := range reqs {
		for _, r := range rs {
			if r.Target == target && r.Outcome == client.Refused {
				n++
			}
		}
	}
	return n
}

// killedBy counts the requests to target killed by a SIGKILL at sigkill
// (zero: no SIGKILL, nothing killed).
func killedBy(target string, sigkill time.Time, reqs ...[]client.Request) int {
	if sigkill.IsZero() {
		return 0
	}
	n := 0
	for _, rs := range reqs {
		for _, r := range rs {
			if r.Target == target && killed(r, sigkill) {
				n++
			}
		}
	}
	return n
}

func killed(r client.Request, sigkill time.Time) bool {
	cut := r.Outcome == client.Reset || r.Outcome == client.EOF
	return cut && r.Start.Before(sigkill) && !r.End.Before(sigkill)
}
