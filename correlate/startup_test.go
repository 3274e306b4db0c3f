package correlate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// newPod is a pod seen pending (not Ready), created at created.
func newPod(uid string, started, ready bool, seen time.Time) collector.PodUpdate {
	p := podOf(uid, ipA, 30*time.Second, started)
	p.Ready, p.Created = ready, ms(-1000)
	return collector.PodUpdate{Seen: seen, Pod: p}
}

// refusedOn is a client SYN refused on port p at.
func refusedOn(p uint16, at time.Time, client int) collector.Event {
	e := sock(collector.EventRefused, netA, ipA, 0, at)
	e.Local = netip.AddrPortFrom(ipA, p)
	e.Remote = netip.AddrPortFrom(netip.MustParseAddr("10.244.2.9"), uint16(40000+client))
	return e
}

func listenOn(p uint16, at time.Time) collector.Event {
	e := openListener(netA, at)
	e.Local = netip.AddrPortFrom(netip.IPv4Unspecified(), p)
	return e
}

func acceptAt(at time.Time, cookie uint64) collector.Event {
	return sock(collector.EventAccept, netA, ipA, cookie, at)
}

// client2 is a second client (sock's events come from 10.244.2.9:40000).
var client2 = netip.MustParseAddrPort("10.244.2.9:40001")

func remoteAt(e collector.Event, remote netip.AddrPort) collector.Event {
	e.Remote = remote
	return e
}

// started: a pod whose health port listens at once (0) and whose traffic
// port 8080 listens 3 s after Ready (Ready seen at 1 s).
func started(extra ...any) []any {
	evs := []any{
		newPod(podA, false, false, ms(-500)),
		bind{podA, netA, cgA},
		newPod(podA, true, false, ms(-100)),
		listenOn(8081, ms(0)),
		refusedOn(8080, ms(200), 1),
		refusedOn(8080, ms(700), 2),
		newPod(podA, true, true, ms(1000)),
		refusedOn(8080, ms(1300), 3),
		from(refusedOn(8080, ms(1400), 4), "kubelet"),
		refusedOn(8080, ms(2000), 5),
		refusedOn(8080, ms(2000), 5), // retransmitted: one attempt
		listenOn(8080, ms(4000)),
		acceptAt(ms(4100), 11),
	}
	return append(evs, extra...)
}

func TestStartupCounts(t *testing.T) {
	c := New(Config{})
	feed(c, started())
	if got := c.TakeStartups(ms(60000)); len(got) != 0 {
		t.Fatalf("complete before the window ended: %+v", got)
	}
	got := c.TakeStartups(ms(1000 + 60000 + 2000))
	if len(got) != 1 {
		t.Fatalf("startups %+v, want 1", got)
	}
	s := got[0]
	want := StartupCounts{RefusedBeforeReady: 2, RefusedAfterReady: 2, ProbeRefused: 1}
	if s.Counts != want {
		t.Errorf("counts %+v, want %+v", s.Counts, want)
	}
	m := s.Marks
	if !m.Ready.Equal(ms(1000)) || !m.FirstListener.Equal(ms(0)) || !m.FirstAccept.Equal(ms(4100)) ||
		!m.ContainerStarted.Equal(ms(-100)) || !m.Created.Equal(ms(-1000)) || !m.WindowEnd.Equal(ms(61000)) {
		t.Errorf("marks %+v", m)
	}
	if s.ReadyToFirstAccept != 3100*time.Millisecond || !s.Complete || s.Partial {
		t.Errorf("ready to first accept %v complete %v partial %v", s.ReadyToFirstAccept, s.Complete, s.PartialReasons)
	}
	if len(s.Diagnoses) != 1 || s.Diagnoses[0].Code != DiagReadyBeforeListening ||
		s.Diagnoses[0].Message != "2 connection attempts refused after the pod was Ready: port 8080 listened 3s after Ready" {
		t.Errorf("diagnoses %+v", s.Diagnoses)
	}
	if c.StartupStarting(podA) || len(c.TakeStartups(ms(70000))) != 0 {
		t.Error("a startup returned twice")
	}
}

// The kernel's refusal after the daemon saw Ready can be processed before
// that pod update: it waits, and counts on its side of Ready.
func TestStartupRaceWithReady(t *testing.T) {
	c := New(Config{})
	feed(c, []any{
		newPod(podA, true, false, ms(0)),
		bind{podA, netA, cgA},
		refusedOn(8080, ms(900), 1),
		refusedOn(8080, ms(1100), 2), // processed before the update seen at 1 s
		newPod(podA, true, true, ms(1000)),
	})
	got := c.TakeStartups(ms(63000))
	if len(got) != 1 || got[0].Counts.RefusedBeforeReady != 1 || got[0].Counts.RefusedAfterReady != 1 {
		t.Fatalf("startups %+v, want 1 before and 1 after Ready", got)
	}
}

func TestStartupWindowAndDeletion(t *testing.T) {
	listening := []string{"ready_before_listening: 2 connection attempts refused after the pod was Ready: port 8080 listened 3s after Ready"}
	tests := []struct {
		name        string
		evs         []any
		after, tail int
		sigterm     int // the termination's refused_after_sigterm, if it has one
		diagnoses   []string
	}{
		{"after the window", []any{refusedOn(8080, ms(61000), 9)}, 2, 0, 0, listening},
		{"the window ends at the deletion", []any{
			deleting(podA, ipA, 30*time.Second, ms(5000), ms(5000)),
			refusedOn(8080, ms(5100), 9),
		}, 2, 0, 0, listening},
		// The kernel's stop signal and the refusals after it come before
		// the daemon sees the deletion: they are the termination's alone.
		{"the stop signal ends it before the deletion is seen", []any{
			signal(cgA, initPID, sigterm, true, "server", ms(5000)),
			refusedOn(8080, ms(5000), 8),
			refusedOn(8080, ms(5050), 9),
			deleting(podA, ipA, 30*time.Second, ms(5100), ms(5100)),
		}, 2, 0, 2, listening},
		// Client 2's connection is reset twice without a socket (its
		// segments after the socket was gone); client 1's socket reset
		// its connection, and the RST answering client 1's request, on
		// its way meanwhile, is that connection's too: 2 connections.
		{"client connections reset after Ready, each once; a probe's and an unknown one's not", []any{
			acceptAt(ms(4900), 21),
			remoteAt(acceptAt(ms(4910), 24), client2),
			from(acceptAt(ms(4950), 22), "kubelet"),
			sock(collector.EventReset, netA, ipA, 22, ms(4990)),
			sock(collector.EventReset, netA, ipA, 23, ms(4995)),
			sock(collector.EventReset, netA, ipA, 21, ms(5000)),
			sock(collector.EventReset, netA, ipA, 21, ms(5001)),
			sock(collector.EventReset, netA, ipA, 0, ms(5002)),
			remoteAt(sock(collector.EventReset, netA, ipA, 0, ms(5003)), client2),
			remoteAt(sock(collector.EventReset, netA, ipA, 0, ms(5004)), client2),
		}, 2, 2, 0, []string{
			"ready_before_listening: 2 connection attempts refused after the pod was Ready: port 8080 listened 3s after Ready",
			"ready_before_serving: 2 client connections reset by the pod after it was Ready: the first on port 8080, 4s after Ready",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Config{})
			feed(c, started(tt.evs...))
			got := c.TakeStartups(ms(70000))
			if len(got) != 1 || got[0].Counts.RefusedAfterReady != tt.after || got[0].Counts.ResetAfterReady != tt.tail {
				t.Fatalf("startups %+v, want %d refused and %d reset after Ready", got, tt.after, tt.tail)
			}
			if term, ok := c.Get(podA); ok && term.Counts.RefusedAfterSigterm != tt.sigterm {
				t.Errorf("termination refused %d after the stop signal, want %d", term.Counts.RefusedAfterSigterm, tt.sigterm)
			}
			var diags []string
			for _, d := range got[0].Diagnoses {
				diags = append(diags, d.Code+": "+d.Message)
			}
			if !slices.Equal(diags, tt.diagnoses) {
				t.Errorf("diagnoses %q, want %q", diags, tt.diagnoses)
			}
		})
	}
}

// A pod Ready when the daemon first saw it started unobserved: no record.
// A pod deleted before it was Ready has its refusals before Ready only.
func TestStartupBegins(t *testing.T) {
	c := New(Config{})
	feed(c, []any{born(podB, ipB, netB, cgB, 30*time.Second, ms(0))})
	if c.StartupStarting(podB) {
		t.Error("a pod seen Ready first has a startup")
	}
	c = New(Config{})
	feed(c, []any{
		newPod(podA, true, false, ms(0)),
		bind{podA, netA, cgA},
		refusedOn(8080, ms(100), 1),
		deleting(podA, ipA, 30*time.Second, ms(500), ms(500)),
		refusedOn(8080, ms(600), 2),
	})
	got := c.TakeStartups(ms(2500))
	if len(got) != 1 || got[0].Counts != (StartupCounts{RefusedBeforeReady: 1}) || !got[0].Marks.Ready.IsZero() {
		t.Fatalf("startups %+v, want 1 refused before Ready, never Ready", got)
	}
}

func TestStartupPartialOnGap(t *testing.T) {
	c := New(Config{})
	feed(c, started(gap{"events_lost", ms(2000), ms(2500)}))
	got := c.TakeStartups(ms(70000))
	if len(got) != 1 || !got[0].Partial || got[0].PartialReasons[0] != "events_lost" {
		t.Fatalf("startups %+v, want partial events_lost", got)
	}
}

// A startup in progress survives a snapshot and a restore; a restored one
// with a negative count is refused.
func TestStartupRestored(t *testing.T) {
	c := New(Config{})
	feed(c, started()[:8]) // Ready seen, one refusal after it
	st, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(ms(5000)); err != nil {
		t.Fatal(err)
	}
	r := New(Config{})
	if err := r.Restore(st); err != nil {
		t.Fatal(err)
	}
	feed(r, started()[8:])
	got := r.TakeStartups(ms(70000))
	if len(got) != 1 || got[0].Counts != (StartupCounts{RefusedBeforeReady: 2, RefusedAfterReady: 2, ProbeRefused: 1}) {
		t.Fatalf("restored startups %+v", got)
	}
	st.Pods[podA].Startup.S.Counts.RefusedAfterReady = -1
	if err := st.Check(ms(5000)); err == nil {
		t.Error("a negative startup count passed the check")
	}
}

// A startup whose network namespace was never bound saw nothing: partial.
func TestStartupNetnsNotBound(t *testing.T) {
	c := New(Config{})
	feed(c, []any{newPod(podA, true, false, ms(0)), newPod(podA, true, true, ms(1000))})
	got := c.TakeStartups(ms(70000))
	if len(got) != 1 || !got[0].Partial || got[0].PartialReasons[0] != PartialNetnsUnbound || got[0].NetnsBound {
		t.Fatalf("startups %+v, want partial %s", got, PartialNetnsUnbound)
	}
}
