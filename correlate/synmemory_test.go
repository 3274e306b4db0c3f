package correlate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestRetransmittedSYNCountsOnce: the RST refusing a SYN is lost, the
// client retransmits the SYN 1 s and 3 s later (same addresses and
// sequence number) and sees one ECONNREFUSED: one refusal. Another
// attempt from the same port (a new sequence number) is one more.
func TestRetransmittedSYNCountsOnce(t *testing.T) {
	grace := 30 * time.Second
	first := sock(collector.EventRefused, netA, ipA, 0, ms(100))
	again := func(e collector.Event, at time.Time) collector.Event { e.Time = at; return e }
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)), signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(5)),
		first, again(first, ms(1100)), again(first, ms(3100)),
		sock(collector.EventRefused, netA, ipA, 0, ms(3200)),
		exited(cgA, initPID, 0, 0, true, ms(3500)), gone(podA, ms(3600))}
	got := finish(t, New(Config{}), evs, ms(9000))
	if got.Counts.RefusedAfterSigterm != 2 {
		t.Errorf("refused after the stop signal = %d, want 2 (one attempt retransmitted twice, one more)", got.Counts.RefusedAfterSigterm)
	}
}

func TestSYNMemory(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	syn := func(ino uint32, remote string, lport uint16, seq uint32, at time.Duration) *collector.Event {
		return &collector.Event{Type: collector.EventRefused, Time: t0.Add(at), NetnsIno: ino, Seq: seq,
			Remote: netip.MustParseAddrPort(remote), Local: netip.AddrPortFrom(ipA, lport)}
	}
	var m synMemory
	steps := []struct {
		e      *collector.Event
		repeat bool
	}{
		{syn(1, "10.0.0.1:40000", 80, 7, 0), false},
		{syn(1, "10.0.0.1:40000", 80, 7, time.Second), true},   // first retransmission
		{syn(1, "10.0.0.1:40000", 80, 8, time.Second), false},  // a new attempt from the same port
		{syn(1, "10.0.0.1:40001", 80, 7, time.Second), false},  // another client port
		{syn(1, "10.0.0.2:40000", 80, 7, time.Second), false},  // another client
		{syn(1, "10.0.0.1:40000", 81, 7, time.Second), false},  // another closed port
		{syn(2, "10.0.0.1:40000", 80, 7, time.Second), false},  // another pod
		{syn(1, "[fd00::1]:40000", 80, 7, time.Second), false}, // IPv6
		{syn(1, "10.0.0.1:40000", 80, 7, 3*time.Second), true}, // second retransmission
		{syn(9, "10.0.0.9:1", 80, 1, 5*time.Second), false},    // starts a new generation
		{syn(1, "10.0.0.1:40000", 80, 7, 7*time.Second), true}, // still in the previous one
		{syn(9, "10.0.0.9:2", 80, 1, 9*time.Second), false},    // another: the first is forgotten
		{syn(1, "10.0.0.1:40000", 80, 7, 15*time.Second), false},
	}
	for i, s := range steps {
		if got := m.repeat(s.e); got != s.repeat {
			t.Errorf("step %d (%v %v seq %d at %v): repeat = %v, want %v", i, s.e.Remote, s.e.Local.Port(), s.e.Seq, s.e.Time.Sub(t0), got, s.repeat)
		}
	}
}

// TestSYNMemoryBounded: a flood of refusals in terminations keeps at most
// two generations of synGeneration keys.
func TestSYNMemoryBounded(t *testing.T) {
	var m synMemory
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 5 * synGeneration {
		e := &collector.Event{Type: collector.EventRefused, Time: t0, NetnsIno: 1, Seq: uint32(i),
			Remote: netip.MustParseAddrPort("10.0.0.1:40000"), Local: netip.AddrPortFrom(ipA, 80)}
		if m.repeat(e) {
			t.Fatalf("SYN %d: a repeat, want a new attempt", i)
		}
		if n := len(m.cur) + len(m.prev); n > 2*synGeneration {
			t.Fatalf("after %d SYNs: %d keys, want at most %d", i+1, n, 2*synGeneration)
		}
	}
}
