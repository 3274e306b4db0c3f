package correlate

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// held turns accept events into what the kernel would have held instead:
// the summary the daemon reads when the pod's records begin.
func held(uid string, evs []any) collector.AcceptSummary {
	s := collector.AcceptSummary{PodUID: uid, NetnsIno: netA}
	for _, e := range evs {
		ev := e.(collector.Event)
		s.Recent = append(s.Recent, collector.AcceptRecord{Time: ev.Time, Cookie: ev.SockCookie})
		s.LastAccept = later(s.LastAccept, ev.Time)
	}
	s.Accepts, s.Held = uint64(len(s.Recent)), uint64(len(s.Recent))
	return s
}

func feedSeed(c *Correlator, steps []any) {
	for _, st := range steps {
		if s, ok := st.(collector.AcceptSummary); ok {
			c.AcceptSummary(s)
			continue
		}
		feed(c, []any{st})
	}
}

// A pod's accepts held in the kernel until its termination begins count
// exactly as the same accepts sent one by one: the summary read before the
// deletion is processed, or after a stop signal that began the termination
// ahead of it, gives the same record, counts, last_accept, routing lag and
// timeline.
func TestHeldAcceptsCountAsRecords(t *testing.T) {
	grace := 30 * time.Second
	head := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000))}
	deletion := deleting(podA, ipA, grace, ms(-20), ms(-10))
	stop := signal(cgA, initPID, 15, true, "server", ms(0))
	tail := []any{closeListener(netA, ms(1500)), exited(cgA, initPID, 0, 0, true, ms(1600)), gone(podA, ms(1700))}
	before := accepts(netA, 40, -50, 1) // -50 … -11 ms: across the deletion request
	afterStop := accepts(netA, 5, 1, 1) // processed after a stop signal ahead of the deletion
	live := accepts(netA, 10, 100, 1)   // records, once the termination is open
	tests := []struct {
		name          string
		records, held []any
		wantAfter     int
	}{
		{"held before the deletion", []any{head, notReady(podA, ms(-15)), before, deletion, stop, live, tail},
			[]any{head, notReady(podA, ms(-15)), held(podA, before), deletion, stop, live, tail}, 10},
		{"not ready after the deletion", []any{head, before, deletion, stop, notReady(podA, ms(5)), live, tail},
			[]any{head, held(podA, before), deletion, stop, notReady(podA, ms(5)), live, tail}, 10},
		{"stop signal ahead of the deletion", []any{head, before, stop, afterStop, deletion, notReady(podA, ms(-15)), live, tail},
			[]any{head, stop, held(podA, append(slices.Clone(before), afterStop...)), deletion, notReady(podA, ms(-15)), live, tail}, 5 + 5 + 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := finish(t, New(Config{}), tc.records, ms(6700))
			c := New(Config{})
			feedSeed(c, tc.held)
			done := c.Tick(ms(6700))
			if len(done) != 1 {
				t.Fatalf("%d terminations completed, want 1", len(done))
			}
			got := done[0]
			if got.Counts.AcceptedAfterEndpointsNotReady != tc.wantAfter || want.Counts.AcceptedAfterEndpointsNotReady != tc.wantAfter {
				t.Fatalf("accepted after not ready: %d held, %d as records; want %d", got.Counts.AcceptedAfterEndpointsNotReady,
					want.Counts.AcceptedAfterEndpointsNotReady, tc.wantAfter)
			}
			// Held accepts carry no peer address: the routing sources
			// differ (the held ones are in the "unknown" row) and sum
			// to the same count.
			if sum(got.RoutingSources) != tc.wantAfter || sum(want.RoutingSources) != tc.wantAfter {
				t.Errorf("routing sources sum to %d held, %d as records; want %d", sum(got.RoutingSources), sum(want.RoutingSources), tc.wantAfter)
			}
			got.RoutingSources, want.RoutingSources = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("held accepts give\n%+v\nrecords give\n%+v", got, want)
			}
		})
	}
}

// A second reading of the same held history (a restarted daemon) is
// ignored; a history that wrapped before the mark, or a handover the kernel
// could not make exact, leaves the count partial.
func TestHeldAcceptsOnceAndHonest(t *testing.T) {
	grace := 30 * time.Second
	head := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000))}
	deletion := []any{deleting(podA, ipA, grace, ms(-20), ms(-10)), notReady(podA, ms(-15))}
	tail := []any{signal(cgA, initPID, 15, true, "server", ms(0)), closeListener(netA, ms(1500)),
		exited(cgA, initPID, 0, 0, true, ms(1600)), gone(podA, ms(1700))}
	before := held(podA, accepts(netA, 40, -50, 1))
	wrapped := before
	wrapped.CompleteFrom = ms(-13) // the kernel lost accepts before -13 ms: -15 and -14 may be missing
	inexact := before
	inexact.Inexact = true
	tests := []struct {
		name    string
		steps   []any
		after   int
		partial []string
	}{
		{"read twice", []any{head, before, deletion, before, tail}, 5, nil},
		{"wrapped after the mark", []any{head, wrapped, deletion, tail}, 5, []string{PartialAcceptHistory}},
		{"wrapped before the mark", []any{head, func() collector.AcceptSummary { s := before; s.CompleteFrom = ms(-30); return s }(), deletion, tail}, 5, nil},
		{"inexact handover", []any{head, inexact, deletion, tail}, 5, []string{PartialAcceptHistory}},
		{"wrapped, termination open", []any{head, deletion[0], wrapped, deletion[1], tail}, 5, []string{PartialAcceptHistory}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feedSeed(c, tc.steps)
			done := c.Tick(ms(6700))
			if len(done) != 1 {
				t.Fatalf("%d terminations completed, want 1", len(done))
			}
			got := done[0]
			if got.Counts.AcceptedAfterEndpointsNotReady != tc.after || !slices.Equal(got.PartialReasons, tc.partial) ||
				!got.Marks.LastAccept.Equal(ms(-11)) {
				t.Errorf("accepted after not ready %d, partial %v, last accept %v; want %d, %v, -11 ms",
					got.Counts.AcceptedAfterEndpointsNotReady, got.PartialReasons, got.Marks.LastAccept.Sub(t0), tc.after, tc.partial)
			}
		})
	}
}

// sum adds up the sources' accepts.
func sum(sources []RoutingSource) int {
	n := 0
	for _, s := range sources {
		n += s.Accepted
	}
	return n
}
