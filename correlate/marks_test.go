package correlate

import (
	"fmt"
	"testing"
	"time"
)

// TestMarks: every Marks field is listed once; Observed sorts by time with
// ties in MarkDefs order (docs/design.md); Start is the earliest mark that begins a
// termination, First and Last the extent of all marks.
func TestMarks(t *testing.T) {
	if len(MarkDefs) != 11 {
		t.Fatalf("%d marks listed, want the 11 fields of Marks", len(MarkDefs))
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := Marks{LastAccept: t0, DeleteRequested: t0.Add(time.Second), DeletionSeen: t0.Add(time.Second),
		StopSignal: t0.Add(2 * time.Second), PodGone: t0.Add(9 * time.Second)}
	var names []string
	for _, mk := range m.Observed() {
		names = append(names, mk.Name)
	}
	want := "[last_accept delete_requested deletion_seen stop_signal pod_gone]"
	if got := fmt.Sprint(names); got != want {
		t.Errorf("observed %s, want %s", got, want)
	}
	term := Termination{Marks: m}
	if !term.Start().Equal(t0.Add(time.Second)) || !m.First().Equal(t0) || !m.Last().Equal(t0.Add(9*time.Second)) {
		t.Errorf("start %v first %v last %v, want +1s, +0s, +9s", term.Start(), m.First(), m.Last())
	}
	if !(Marks{}).Last().IsZero() || !(Termination{}).Start().IsZero() {
		t.Error("no marks: want zero start and last")
	}
}

// TestMarkTimesInMarkDefsOrder: Marks.times lists every mark, in MarkDefs
// order, and Last, Start and Observed allocate nothing beyond their result.
func TestMarkTimesInMarkDefsOrder(t *testing.T) {
	var m Marks
	for i, d := range MarkDefs {
		*d.Of(&m) = ms(i + 1)
	}
	got := m.times()
	if len(got) != len(MarkDefs) {
		t.Fatalf("times lists %d marks, MarkDefs %d", len(got), len(MarkDefs))
	}
	for i, d := range MarkDefs {
		if !got[i].Equal(ms(i + 1)) {
			t.Errorf("times()[%d] = %v, want %s's %v", i, got[i], d.Name, ms(i+1))
		}
	}
	tm := Termination{Marks: m}
	if n := testing.AllocsPerRun(100, func() { _ = tm.Marks.Last(); _ = tm.Start(); _ = tm.Marks.First() }); n != 0 {
		t.Errorf("Last, Start and First allocate %v times per call, want 0", n)
	}
}
