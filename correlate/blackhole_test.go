package correlate

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// drop is a blackholed SYN from client port cport (sequence seq) to ipA,
// dropped in netns ino (0: the node's).
func drop(cport uint16, seq uint32, ino uint32, at time.Time) collector.Event {
	return collector.Event{Type: collector.EventBlackholed, Time: at, NetnsIno: ino, Seq: seq, Reason: 58,
		Local: netip.AddrPortFrom(ipA, port), Remote: netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), cport)}
}

// TestBlackholedAttempts: a naive server exits at the stop signal, its
// network goes, and a router keeps dialing: each attempt counts once
// (retransmissions and flooded copies are one), not one the pod refused
// or accepted (a flooded copy of a SYN that reached it), not one dropped
// in the pod's own namespace, not the kubelet's, and not once the drops
// have stopped for a window after pod_gone.
// The termination completes when the window ends; its outcome is refused
// (a refusal outranks), blackholed only when nothing else was lost.
func TestBlackholedAttempts(t *testing.T) {
	grace := 30 * time.Second
	refusedCopy := sock(collector.EventRefused, netA, ipA, 0, ms(60))
	refusedCopy.Remote = netip.MustParseAddrPort("10.244.2.9:41000")
	acceptedCopy := accept(netA, 5, ms(40))
	acceptedCopy.Remote = netip.MustParseAddrPort("10.244.2.9:42000")
	probe := drop(43000, 1, 0, ms(900))
	probe.SenderPID, probe.SenderComm = 77, commsOf([]string{"kubelet"})[0]
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)),
		drop(42000, 1, netB, ms(30)), acceptedCopy, // flooded, then accepted by the pod
		drop(41000, 2, netB, ms(61)), // a copy of a SYN the pod refused just before
		signal(cgA, initPID, 15, true, "server", ms(0)), refusedCopy, closeListener(netA, ms(70)),
		exited(cgA, initPID, 143, 15, true, ms(80)), gone(podA, ms(200)),
		drop(40001, 10, netB, ms(300)), drop(40001, 10, 0, ms(301)), // one SYN, two copies
		drop(40001, 10, 0, ms(1300)), // its retransmission
		drop(40002, 11, 0, ms(500)), drop(40003, 12, 0, ms(1300)),
		drop(40004, 13, netA, ms(800)), // in the pod's own namespace
		probe,
		// 6 s after pod_gone: past a 5 s window from pod_gone, within one
		// from the last attempt's drop (1.3 s; a retransmission would not
		// move it).
		drop(40005, 14, 0, ms(6200)),
		drop(40006, 15, 0, ms(6200+5001)), // 5 s after the last drop: over
	}
	c := New(Config{Blackholes: true, BlackholeWindow: 5 * time.Second})
	feed(c, evs)
	if got := c.Tick(ms(6200 + 4900)); len(got) != 0 {
		t.Fatalf("completed before the blackhole window ended: %+v", got)
	}
	got := finish(t, c, nil, ms(6200+5100))
	if got.Counts.ConnectionsBlackholed != 4 || got.Outcome != OutcomeRefused {
		t.Errorf("blackholed %d, outcome %s; want 4 (ports 40001, 40002, 40003, 40005), refused", got.Counts.ConnectionsBlackholed, got.Outcome)
	}
	if d := diagnosis(got, DiagBlackholed); d.Fix != "add preStop sleep ≥ 7s: routing still sent 6.21s after the deletion" {
		t.Errorf("diagnosis %+v", d)
	}
	if got.Counts.RefusedAfterSigterm != 1 {
		t.Errorf("refused after the stop signal %d, want 1", got.Counts.RefusedAfterSigterm)
	}
	got.Counts.RefusedAfterSigterm = 0
	if o := outcomeOf(got); o != OutcomeBlackholed {
		t.Errorf("outcome without the refusal %s, want blackholed", o)
	}
	points := 0
	for _, p := range got.Connections {
		if p.Blackholed {
			points++
		}
	}
	if points != 4 {
		t.Errorf("%d blackholed points on the timeline, want 4 (not the taken-back copy)", points)
	}
	if want := ms(6200); !got.LastBlackholed.Equal(want) || got.LastConnAttempt.After(ms(100)) {
		t.Errorf("last blackholed %v, last attempt %v; want %v, and the attempts only the pod saw", got.LastBlackholed, got.LastConnAttempt, want)
	}
}

// TestBlackholesWaitOnlyWhenSeen: without the kernel's blackhole probe a
// termination completes PodTail after pod_gone, as before.
func TestBlackholesWaitOnlyWhenSeen(t *testing.T) {
	grace := 30 * time.Second
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)), signal(cgA, initPID, 15, true, "server", ms(0)),
		closeListener(netA, ms(70)), exited(cgA, initPID, 0, 0, true, ms(80)), gone(podA, ms(200)),
		drop(40001, 10, 0, ms(300))}
	got := finish(t, New(Config{}), evs, ms(200+5100))
	if got.Counts.ConnectionsBlackholed != 0 || got.Outcome != OutcomeClean {
		t.Errorf("blackholed %d, outcome %s without the probe; want 0, clean", got.Counts.ConnectionsBlackholed, got.Outcome)
	}
}

func TestBlackholeKeyText(t *testing.T) {
	in := map[blackholeKey]time.Time{
		{Remote: netip.MustParseAddrPort("10.0.0.1:40000"), Port: 8080}: ms(1),
		{Remote: netip.MustParseAddrPort("[fd00::1]:40000"), Port: 80}:  ms(2),
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out map[blackholeKey]time.Time
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 2 {
		t.Fatalf("%s: %v %v", b, out, err)
	}
	for k, v := range in {
		if !out[k].Equal(v) {
			t.Errorf("%v: %v after a round trip through %s", k, out[k], b)
		}
	}
}

// TestTakenBackCopyLeavesNothing: a flooded copy of a SYN the pod then
// accepted leaves no count, no point and no last_blackholed.
func TestTakenBackCopyLeavesNothing(t *testing.T) {
	grace := 30 * time.Second
	acc := accept(netA, 5, ms(40))
	acc.Remote = netip.MustParseAddrPort("10.244.2.9:42000")
	evs := []any{born(podA, ipA, netA, cgA, grace, ms(-60000)), openListener(netA, ms(-59000)),
		deleting(podA, ipA, grace, ms(-20), ms(-10)), drop(42000, 1, netB, ms(30)), acc,
		signal(cgA, initPID, 15, true, "server", ms(0)), closeListener(netA, ms(70)),
		exited(cgA, initPID, 0, 0, true, ms(80)), gone(podA, ms(200))}
	got := finish(t, New(Config{Blackholes: true, BlackholeWindow: 5 * time.Second}), evs, ms(5300))
	if got.Counts.ConnectionsBlackholed != 0 || !got.LastBlackholed.IsZero() || slices.ContainsFunc(got.Connections, func(p ConnPoint) bool { return p.Blackholed }) {
		t.Errorf("blackholed %d, last %v, points %+v; want none", got.Counts.ConnectionsBlackholed, got.LastBlackholed, got.Connections)
	}
}

// TestRecentRefusedRing: the refusals a flooded copy may follow are the
// latest recentRefused, oldest overwritten first.
func TestRecentRefusedRing(t *testing.T) {
	ts := &termState{}
	for i := range recentRefused + 3 {
		e := collector.Event{Local: netip.AddrPortFrom(ipA, port), Remote: netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), uint16(1000+i))}
		reached(ts, &e, true)
	}
	if len(ts.Refused) != recentRefused {
		t.Fatalf("%d kept, want %d", len(ts.Refused), recentRefused)
	}
	has := func(p uint16) bool {
		return slices.Contains(ts.Refused, blackholeKey{Remote: netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), p), Port: port})
	}
	if has(1000) || has(1002) || !has(1003) || !has(uint16(1000+recentRefused+2)) {
		t.Errorf("kept %v: want the latest %d", ts.Refused, recentRefused)
	}
}
