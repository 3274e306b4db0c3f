package correlate

import (
	"slices"
	"testing"
	"time"
)

// A gap before the termination began leaves it whole; a probe unavailable
// from daemon start on (an open-ended gap) makes every termination partial.
func TestKernelGapsOverlap(t *testing.T) {
	before := New(Config{})
	feed(before, []any{gap{"events_lost", ms(-50000), ms(-40000)}})
	if got := finish(t, before, naive(), ms(7600)); got.Partial {
		t.Errorf("a gap before the deletion made it partial: %v", got.PartialReasons)
	}
	open := New(Config{})
	feed(open, []any{gap{"probe_unavailable", ms(-90000), ms(0).Add(100 * 24 * time.Hour)}})
	got := finish(t, open, protocol(true), ms(7600))
	if !slices.Equal(got.PartialReasons, []string{"probe_unavailable"}) || got.Outcome != OutcomePartial {
		t.Errorf("partial %v outcome %s, want probe_unavailable, partial", got.PartialReasons, got.Outcome)
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
	if got.Counts.AcceptedAfterEndpointsNotReady != ringSize || !slices.Equal(got.PartialReasons, []string{PartialAcceptHistory}) {
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
