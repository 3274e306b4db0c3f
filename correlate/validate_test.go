package correlate

import (
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// TestStateCheck: a state the correlator made passes; each damage a
// planted file could carry is named.
func TestStateCheck(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := New(Config{})
	c.Pod(collector.PodUpdate{Pod: collector.Pod{UID: "u1", Name: "web-1", Namespace: "shop"}, Seen: now.Add(-time.Minute)})
	c.PodDeleted(collector.PodDeleted{UID: "u1", Seen: now.Add(-30 * time.Second)})
	good, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Check(now); err != nil || good.Pods["u1"] == nil || good.Pods["u1"].Term == nil {
		t.Fatalf("a state the correlator made, with a termination in progress: %v", err)
	}
	for name, tc := range map[string]struct {
		damage func(s *State)
		want   string
	}{
		"nil pod":        {func(s *State) { s.Pods["u2"] = nil }, "no record"},
		"uid mismatch":   {func(s *State) { s.Pods["u2"] = &podState{Pod: collector.Pod{UID: "u3"}} }, `record of pod uid "u3"`},
		"ring index":     {func(s *State) { s.Pods["u1"].Accepts = timeRing{T: []int64{1, 2}, Next: 7} }, "ring"},
		"ring length":    {func(s *State) { s.Pods["u1"].Early.E = make([]collector.Event, earlySize+1) }, "ring"},
		"future time":    {func(s *State) { s.Pods["u1"].Seen = now.Add(48 * time.Hour) }, "time"},
		"negative count": {func(s *State) { s.Pods["u1"].Term.T.Counts.RefusedAfterSigterm = -1 }, "RefusedAfterSigterm is negative"},
		"mark in future": {func(s *State) { s.Pods["u1"].Term.T.Marks.DeletionSeen = now.AddDate(1, 0, 0) }, "mark deletion_seen"},
		"gap backwards":  {func(s *State) { s.Gaps = []kernelGap{{Reason: "x", From: now, To: now.Add(-time.Hour)}} }, "gap x"},
		"watermark ties": {func(s *State) { s.KernelWatermark.Ties = -3 }, "kernel watermark"},
		"too many pods": {func(s *State) {
			for i := range maxRestoredPods {
				s.Pods[strings.Repeat("p", i%7)+string(rune(i))] = nil
			}
		}, "more than a node holds"},
	} {
		s, err := clone(good)
		if err != nil {
			t.Fatal(err)
		}
		tc.damage(&s)
		if err := s.Check(now); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

func TestCheckTermination(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ok := Termination{PodUID: "u", Marks: Marks{StopSignal: now.Add(-time.Minute)}, GracePeriod: 30 * time.Second}
	if err := CheckTermination(ok, now); err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func(*Termination){
		"no uid":         func(t *Termination) { t.PodUID = "" },
		"before 1970":    func(t *Termination) { t.Marks.Exit = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) },
		"negative grace": func(t *Termination) { t.GracePeriod = -time.Second },
		"negative count": func(t *Termination) { t.Counts.RequestsKilledAtExit = -5 },
		"connections":    func(t *Termination) { t.Connections = make([]ConnPoint, maxRestoredConnPts+1) },
	} {
		bad := ok
		damage(&bad)
		if CheckTermination(bad, now) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
