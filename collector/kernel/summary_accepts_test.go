package kernel

import (
	"testing"
	"time"
)

// TestSummarizeMergesCPUs: the CPUs' counters add up, their histories
// merge in time order, and a CPU whose ring wrapped sets the time from
// which the merged history is complete (its oldest kept accept).
func TestSummarizeMergesCPUs(t *testing.T) {
	var cpu0, cpu1 acceptStats
	// CPU 0: 3 accepts at 10, 30, 50 ns, one probe besides.
	for i, ts := range []uint64{10, 30, 50} {
		cpu0.Ring[i].TsNs, cpu0.Ring[i].Cookie = ts, 100+ts
	}
	cpu0.Accepts, cpu0.Probes, cpu0.Held, cpu0.LastNs = 4, 1, 3, 50
	// CPU 1: acceptRing+5 accepts at 1000, 1001, …: the first 5 overwritten.
	n := uint64(acceptRing + 5)
	for i := uint64(0); i < n; i++ {
		cpu1.Ring[i%uint64(acceptRing)].TsNs, cpu1.Ring[i%uint64(acceptRing)].Cookie = 1000+i, 5000+i
	}
	cpu1.Accepts, cpu1.Held, cpu1.LastNs = n, n, 1000+n-1
	s := summarize([]acceptStats{cpu0, cpu1}, wallClock{offsetNs: 7})
	if s.Accepts != 4+n || s.Probes != 1 || s.Held != 3+n || len(s.Recent) != 3+acceptRing {
		t.Fatalf("accepts %d probes %d held %d recent %d; want %d, 1, %d, %d", s.Accepts, s.Probes, s.Held, len(s.Recent), 4+n, 3+n, 3+acceptRing)
	}
	wall := func(ns uint64) time.Time { return time.Unix(0, int64(ns)+7) }
	for i, r := range s.Recent {
		want := []uint64{10, 30, 50}
		var ts uint64
		if i < 3 {
			ts = want[i]
		} else {
			ts = 1005 + uint64(i-3)
		}
		if !r.Time.Equal(wall(ts)) {
			t.Fatalf("recent %d at %v, want %v (oldest first)", i, r.Time, wall(ts))
		}
	}
	if !s.CompleteFrom.Equal(wall(1005)) || !s.LastAccept.Equal(wall(1000+n-1)) {
		t.Fatalf("complete from %v, last %v; want %v, %v", s.CompleteFrom, s.LastAccept, wall(1005), wall(1000+n-1))
	}
	if s := summarize([]acceptStats{cpu0}, wallClock{}); !s.CompleteFrom.IsZero() {
		t.Fatalf("a ring that never wrapped: complete from %v, want zero", s.CompleteFrom)
	}
}
