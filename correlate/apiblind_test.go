package correlate

import (
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// After an API-server outage the watches deliver what changed meanwhile
// with the time they caught up: an endpoint that went not ready, a pod
// that went away somewhere in [BlindSince, Seen]. The mark stays unknown,
// the termination is partial with api_unreachable, and the counts derived
// from the mark are not given; the kernel's netns destruction still sets
// pod_gone exactly, and then the reason goes.
func TestAPIBlindMarksStayUnknown(t *testing.T) {
	const outage, back = 5, 20000 // ms: the watches failed from 5 ms, caught up at 20 s
	healthyNotReady := notReady(podA, ms(10))
	blindNotReady := notReady(podA, ms(back))
	blindNotReady.BlindSince = ms(outage)
	blindGone := gone(podA, ms(back+100))
	blindGone.BlindSince = ms(outage)
	cases := []struct {
		name         string
		endpoint     collector.EndpointUpdate
		deleted      collector.PodDeleted
		netnsGone    time.Time // zero: the kernel saw none
		notReady     time.Time
		podGone      time.Time
		acceptsAfter int
		partial      []string
	}{
		{name: "healthy watches", endpoint: healthyNotReady, deleted: gone(podA, ms(1700)),
			notReady: ms(10), podGone: ms(1700), acceptsAfter: 50},
		{name: "endpoint caught up", endpoint: blindNotReady, deleted: gone(podA, ms(1700)),
			podGone: ms(1700), partial: []string{PartialAPIBlind}},
		{name: "deletion caught up", endpoint: healthyNotReady, deleted: blindGone,
			notReady: ms(10), acceptsAfter: 50, partial: []string{PartialAPIBlind}},
		{name: "deletion caught up, netns gone after it", endpoint: healthyNotReady, deleted: blindGone, netnsGone: ms(back + 200),
			notReady: ms(10), podGone: ms(back + 200), acceptsAfter: 50},
		{name: "both caught up, netns gone", endpoint: blindNotReady, deleted: blindGone, netnsGone: ms(back + 200),
			podGone: ms(back + 200), partial: []string{PartialAPIBlind}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, []any{
				born(podA, ipA, netA, cgA, 30*time.Second, ms(-60000)),
				collector.EndpointUpdate{Seen: ms(-59500), PodUID: podA, Present: true, Ready: true, Serving: true},
				openListener(netA, ms(-59000)),
				deleting(podA, ipA, 30*time.Second, ms(-20), ms(-10)),
				signal(cgA, initPID, 15, true, "server", ms(0)),
				accepts(netA, 50, 20, 10), // 20 ms … 510 ms
				closeListener(netA, ms(1500)),
				exited(cgA, initPID, 0, 0, true, ms(1600)),
				tc.endpoint,
				tc.deleted,
			})
			if !tc.netnsGone.IsZero() {
				c.NetnsGone(netA, tc.netnsGone)
			}
			got := finish(t, c, nil, ms(back+10000))
			m := got.Marks
			if !m.EndpointsNotReady.Equal(tc.notReady) || !m.PodGone.Equal(tc.podGone) {
				t.Errorf("endpoints_not_ready %v pod_gone %v, want %v %v", m.EndpointsNotReady, m.PodGone, tc.notReady, tc.podGone)
			}
			if got.Counts.AcceptedAfterEndpointsNotReady != tc.acceptsAfter || !slices.Equal(got.PartialReasons, tc.partial) {
				t.Errorf("accepted after not ready %d partial %v, want %d %v",
					got.Counts.AcceptedAfterEndpointsNotReady, got.PartialReasons, tc.acceptsAfter, tc.partial)
			}
			if _, ok := got.RoutingLag(); ok != !tc.notReady.IsZero() {
				t.Errorf("routing lag given %v with endpoints_not_ready %v", ok, tc.notReady)
			}
		})
	}
}
