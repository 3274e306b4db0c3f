package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
)

// A fault scenario proves that drainwatch loses and double-counts nothing
// only if its fault window held traffic: refusals counted 0 = 0 while the
// daemon was down prove nothing. The scenarios make the window refuse for
// a known time and require at least a floor of the refusals the load rate
// gives over that time.
//
// A naive server closes its listener at the stop signal and exits once its
// requests are answered: a request the test holds open at the pod keeps
// it alive, refusing, until the request ends. Without one, the window is
// whatever /slow the router happened to send it last (0 to 400 ms, none at
// all as often as not).

// holdRequest sends one /slow?ms=d straight to addr (not through the
// router) and delivers its record once it has ended.
func holdRequest(ctx context.Context, c *cluster.Cluster, addr string, d time.Duration) <-chan client.Request {
	done := make(chan client.Request, 1)
	go func() {
		done <- client.Get(ctx, c.Dial, addr, fmt.Sprintf("/slow?ms=%d", d.Milliseconds()), d+10*time.Second, nil)
	}()
	return done
}

// checkHeld checks that a held request was answered: the server waited
// for it, so the window it was held for did happen.
func checkHeld(t *testing.T, name string, r client.Request) {
	t.Helper()
	if r.Outcome != client.OK {
		t.Errorf("%s: the request held open at it ended %s (%s), not answered: the server did not wait for it", name, r.Outcome, r.Err)
	}
}

// requireRefusedInWindow fails the test when the router's connections to
// addr refused within [from, to] are fewer than floor: the scenario's fault
// window did not hold the traffic it is meant to prove something about.
func requireRefusedInWindow(t *testing.T, r *router.Router, addr, window string, from, to time.Time, floor int) int {
	t.Helper()
	n := routerRefusedBetween(r, addr, from, to)
	t.Logf("%s: the router's connections refused %s: %d (floor %d)", addr, window, n, floor)
	if n < floor {
		t.Errorf("%s: %d connections refused %s, fewer than the floor %d: the fault window held too little traffic to prove anything",
			addr, n, window, floor)
	}
	return n
}
