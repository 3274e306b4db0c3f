package correlate

import (
	"slices"
	"testing"
	"time"
)

// Kernel gaps make the terminations they overlap partial. A zero `to` is
// open until a later gap of the same reason or EndGap closes it (EndGap
// with no open gap of its reason changes nothing), like the daemon's
// far-future `to` for a probe that never attached; an open gap is never
// evicted by closed ones. protocol(true) runs from −20 ms to its deadline
// at +7.6 s.
func TestKernelGaps(t *testing.T) {
	forever := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	var manyLost []any
	for i := range maxGaps {
		manyLost = append(manyLost, gap{"events_lost", ms(-80000 + i*100), ms(-80000 + i*100 + 50)})
	}
	tests := []struct {
		name    string
		gaps    []any
		partial []string
	}{
		{"closed before the deletion", []any{gap{"events_lost", ms(-50000), ms(-40000)}}, nil},
		{"open until the year 9999", []any{gap{"probe_unavailable", ms(-90000), forever}}, []string{"probe_unavailable"}},
		{"open: zero to", []any{gap{"probe_unavailable", ms(-90000), time.Time{}}}, []string{"probe_unavailable"}},
		{"open, closed before the deletion", []any{gap{"probe_unavailable", ms(-90000), time.Time{}},
			gap{"probe_unavailable", ms(-60000), ms(-30000)}}, nil},
		{"open, closed during the drain", []any{gap{"probe_unavailable", ms(-90000), time.Time{}},
			gap{"probe_unavailable", ms(1000), ms(1000)}}, []string{"probe_unavailable"}},
		{"open from after the termination", []any{gap{"probe_unavailable", ms(8000), time.Time{}}}, nil},
		{"open, ended before the deletion", []any{gap{"loss_counters_unreadable", ms(-90000), time.Time{}},
			gapEnd{"loss_counters_unreadable", ms(-30000)}}, nil},
		{"open, ended during the drain", []any{gap{"loss_counters_unreadable", ms(-90000), time.Time{}},
			gapEnd{"loss_counters_unreadable", ms(1000)}}, []string{"loss_counters_unreadable"}},
		{"ended, none open", []any{gapEnd{"loss_counters_unreadable", ms(1000)}}, nil},
		{"ended, only a closed one", []any{gap{"loss_counters_unreadable", ms(-50000), ms(-40000)},
			gapEnd{"loss_counters_unreadable", ms(1000)}}, nil},
		{"another reason's open gap ended", []any{gap{"probe_unavailable", ms(-90000), time.Time{}},
			gapEnd{"loss_counters_unreadable", ms(-30000)}}, []string{"probe_unavailable"}},
		{"open, then more closed gaps than are kept", []any{gap{"probe_unavailable", ms(-90000), time.Time{}}, manyLost},
			[]string{"probe_unavailable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, tc.gaps)
			got := finish(t, c, protocol(true), ms(7600))
			want := OutcomeClean
			if len(tc.partial) > 0 {
				want = OutcomePartial
			}
			if !slices.Equal(got.PartialReasons, tc.partial) || got.Outcome != want {
				t.Errorf("partial %v outcome %s, want %v %s", got.PartialReasons, got.Outcome, tc.partial, want)
			}
		})
	}
}

// endpoints_not_ready processed after 100 accepts it precedes: exact. The
// deletion itself processed after more accepts than the pod's ring keeps:
// the count may be short, and the record says so.
func TestLateEndpointCountsEveryAccept(t *testing.T) {
	grace := 30 * time.Second
	head := []any{
		born(podA, ipA, netA, cgA, grace, ms(-60000)),
		openListener(netA, ms(-59000)),
	}
	deletion := deleting(podA, ipA, grace, ms(-20), ms(-10))
	stop := signal(cgA, initPID, 15, true, "server", ms(0))
	tail := []any{
		notReady(podA, ms(10)),
		closeListener(netA, ms(1500)),
		exited(cgA, initPID, 0, 0, true, ms(1600)),
		gone(podA, ms(1700)),
	}
	got := finish(t, New(Config{}), []any{head, deletion, stop, accepts(netA, 100, 1, 1), tail}, ms(6700))
	if got.Counts.AcceptedAfterEndpointsNotReady != 91 || got.Partial {
		t.Errorf("accepted after not ready %d partial %v, want exactly 91", got.Counts.AcceptedAfterEndpointsNotReady, got.PartialReasons)
	}
	got = finish(t, New(Config{}), []any{head, accepts(netA, 100, 1, 1), deletion, tail}, ms(6700))
	// No stop signal in this feed: the record says so.
	if got.Counts.AcceptedAfterEndpointsNotReady != ringSize || !slices.Equal(got.PartialReasons, []string{PartialAcceptHistory, PartialNoStopSignal}) {
		t.Errorf("accepted after not ready %d, partial %v; want %d (a lower bound), %s",
			got.Counts.AcceptedAfterEndpointsNotReady, got.PartialReasons, ringSize, PartialAcceptHistory)
	}
}

// Phases drop what a histogram cannot take: a listener closed before the
// stop signal is a negative delay in Durations, absent from Phases.
func TestPhasesAreNonNegative(t *testing.T) {
	tr := Termination{Marks: Marks{DeleteRequested: ms(-20), Killing: ms(-5), StopSignal: ms(0),
		ListenerClosed: ms(-200), Exit: ms(100), EndpointsNotReady: ms(10)}, LastConnAttempt: ms(50)}
	d := tr.Durations()
	if d[DurListenerCloseDelay] != -200*time.Millisecond || d[DurRoutingLag] != 40*time.Millisecond {
		t.Errorf("durations = %v", d)
	}
	want := map[string]time.Duration{PhasePrestop: 5 * time.Millisecond, PhaseDrain: 100 * time.Millisecond,
		PhaseGraceUsed: 120 * time.Millisecond}
	if p := tr.Phases(); !mapsEqual(p, want) {
		t.Errorf("phases = %v, want %v", p, want)
	}
}
