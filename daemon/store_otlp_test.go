package daemon

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter/otlp"
)

// TestOTLPPendingInStore: a checkpoint with Export marks its records
// pending in store order; acknowledged ones are not read again, also after a
// reopen; one pruned before it was sent is forgotten and counted expired.
func TestOTLPPendingInStore(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	w := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "7c9"}
	term := func(uid string, ago time.Duration) correlate.Termination {
		return correlate.Termination{PodUID: uid, Pod: "web-" + uid, Workload: w, Node: "n1", Complete: true,
			Counts: correlate.Counts{RefusedAfterSigterm: 3}, Marks: correlate.Marks{StopSignal: at.Add(-ago), PodGone: at.Add(-ago + time.Second)}}
	}
	startup := correlate.Startup{PodUID: "new", Pod: "web-new", Workload: w,
		Marks: correlate.StartupMarks{Created: at, WindowEnd: at.Add(time.Minute)}}
	if err := s.SaveCheckpoint(Checkpoint{Alive: at}, []correlate.Termination{term("quiet", 0)}); err != nil {
		t.Fatal(err) // without Export: nothing pending
	}
	if err := s.SaveCheckpoint(Checkpoint{Alive: at, Export: true, Startups: []correlate.Startup{startup}},
		[]correlate.Termination{term("a", 48*time.Hour), term("b", 0)}); err != nil {
		t.Fatal(err)
	}
	src := otlpSource{s: s, node: "n1"}
	got, expired, err := src.Pending(10)
	if err != nil || expired != 0 {
		t.Fatal(err, expired)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	want := []string{otlp.TerminationID(term("a", 48*time.Hour)), otlp.TerminationID(term("b", 0)), otlp.StartupID(startup)}
	if len(ids) != 3 || ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] {
		t.Fatalf("pending %v, want %v", ids, want)
	}
	if got[2].EventName != otlp.EventStartup || got[0].EventName != otlp.EventTermination {
		t.Fatalf("event names %s, %s", got[0].EventName, got[2].EventName)
	}
	if err := src.Acknowledge(got[2:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src.s = s
	if _, err := s.Prune(at.Add(-24*time.Hour), correlate.Marks.Last); err != nil {
		t.Fatal(err)
	}
	got, expired, err = src.Pending(10)
	if err != nil || expired != 1 || len(got) != 1 || got[0].ID != want[1] {
		t.Fatalf("after the reopen and a prune: %d pending (%v), %d expired, want only %s and 1 expired", len(got), err, expired, want[1])
	}
	if _, expired, _ = src.Pending(10); expired != 0 {
		t.Fatalf("an expired record counted twice")
	}
}
