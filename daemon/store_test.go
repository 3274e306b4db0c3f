package daemon_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/drainwatch/drainwatch/collector/node"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/daemon"
)

func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := daemon.OpenStore(dir)
	must(t, err)
	if _, ok, err := s.LoadCheckpoint(); ok || err != nil {
		t.Fatalf("fresh store: ok=%v err=%v, want nothing", ok, err)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	old := correlate.Termination{PodUID: "old", Pod: "ns/old", Complete: true, Marks: correlate.Marks{PodGone: at.Add(-48 * time.Hour)}}
	recent := correlate.Termination{PodUID: "recent", Pod: "ns/recent", Complete: true, Outcome: "refused",
		Counts: correlate.Counts{RefusedAfterSigterm: 44}, Marks: correlate.Marks{StopSignal: at, PodGone: at.Add(time.Second)}}
	cp := daemon.Checkpoint{
		Correlator: correlate.State{KernelWatermark: correlate.Watermark{At: at, Ties: 2}},
		Scopes:     []node.ScopeRecord{{PodUID: "recent", Netns: 4026532000, Cgroups: map[string]uint64{"app": 77}}},
		Alive:      at,
	}
	must(t, s.SaveCheckpoint(cp, []correlate.Termination{old, recent}), s.Close())

	s, err = daemon.OpenStore(dir)
	must(t, err)
	defer s.Close()
	got, ok, err := s.LoadCheckpoint()
	must(t, err)
	if !ok || !got.Alive.Equal(at) || got.Correlator.KernelWatermark != cp.Correlator.KernelWatermark ||
		!cmp.Equal(got.Scopes, cp.Scopes) {
		t.Fatalf("checkpoint after reopen = %+v, want %+v", got, cp)
	}
	n, err := s.Prune(at.Add(-24*time.Hour), func(m correlate.Marks) time.Time { return m.PodGone })
	must(t, err)
	ts, err := s.Completed()
	must(t, err)
	if n != 1 || len(ts) != 1 || !cmp.Equal(ts[0], recent, cmpopts.EquateComparable(netip.Addr{})) {
		t.Fatalf("after pruning %d: %+v, want only %+v", n, ts, recent)
	}
}
