package node

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
)

// detailKernel is scopeKernel with accept detail: it counts SetDetail calls
// and holds one summary per netns; inexact makes SetDetail report a
// handover it could not make exact.
type detailKernel struct {
	scopeKernel
	detail  map[uint32]int
	held    collector.AcceptSummary
	inexact bool
}

func (k *detailKernel) SetDetail(ino uint32, on bool) error {
	if on {
		k.detail[ino]++
	}
	if k.inexact {
		return fmt.Errorf("membarrier: %w", collector.ErrHandoverInexact)
	}
	return nil
}

func (k *detailKernel) ScopeAccepts(ino uint32) (collector.AcceptSummary, error) { return k.held, nil }

// summaries records what the correlator is handed.
type summaries struct {
	nopBinder
	got []collector.AcceptSummary
}

func (b *summaries) AcceptSummary(s collector.AcceptSummary) { b.got = append(b.got, s) }

// TestTerminatingTurnsOnDetailOnce: a watched pod that starts terminating
// gets accept records once, and the correlator the held accepts once, for
// its netns; a pod deleted before its netns is watched gets them when it
// is; an inexact handover says so in the summary.
func TestTerminatingTurnsOnDetailOnce(t *testing.T) {
	for _, tc := range []struct {
		name           string
		terminateFirst bool
		inexact        bool
	}{{"watched, then terminating", false, false}, {"terminating, then watched", true, false}, {"inexact handover", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newScopeNode(t)
			k := &detailKernel{scopeKernel: scopeKernel{netns: map[uint32]bool{}, cgroups: map[uint64]bool{}},
				detail: map[uint32]int{}, held: collector.AcceptSummary{Accepts: 9, Held: 7}, inexact: tc.inexact}
			b := &summaries{}
			s := NewScopes(k, b, n.root, n.proc, zerolog.Nop())
			defer s.CloseFiles()
			id := strings.Repeat("cd", 32)
			pod := podWith(id)
			now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			if tc.terminateFirst {
				pod.DeletionTimestamp = now.Add(30 * time.Second)
				s.PodUpdate(pod, now) // no cgroup yet: not watched
				if len(k.detail) != 0 || len(b.got) != 0 {
					t.Fatalf("detail %v, summaries %d before the netns is watched; want none", k.detail, len(b.got))
				}
			}
			n.container(t, id)
			s.PodUpdate(pod, now.Add(rescanForced))
			s.Terminating(scopePod)
			s.Terminating(scopePod)
			ino := n.netns(t)
			want := collector.AcceptSummary{PodUID: scopePod, NetnsIno: ino, Accepts: 9, Held: 7, Inexact: tc.inexact}
			if k.detail[ino] != 1 || len(k.detail) != 1 || len(b.got) != 1 || !reflect.DeepEqual(b.got[0], want) {
				t.Fatalf("SetDetail calls %v, summaries %+v; want one for netns %d and %+v", k.detail, b.got, ino, want)
			}
		})
	}
}

// offKernel is detailKernel that also counts SetDetail(off) calls.
type offKernel struct {
	detailKernel
	off map[uint32]int
}

func (k *offKernel) SetDetail(ino uint32, on bool) error {
	if !on {
		k.off[ino]++
	}
	return k.detailKernel.SetDetail(ino, on)
}

// TestStartingDetail: a starting pod's accepts come as records without a
// handover; once started they are held again; its termination later turns
// them on again and hands the held accepts over once.
func TestStartingDetail(t *testing.T) {
	n := newScopeNode(t)
	k := &offKernel{detailKernel: detailKernel{scopeKernel: scopeKernel{netns: map[uint32]bool{}, cgroups: map[uint64]bool{}},
		detail: map[uint32]int{}, held: collector.AcceptSummary{Accepts: 2, Held: 2}}, off: map[uint32]int{}}
	b := &summaries{}
	s := NewScopes(k, b, n.root, n.proc, zerolog.Nop())
	defer s.CloseFiles()
	id := strings.Repeat("ce", 32)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s.PodUpdate(podWith(id), now)
	s.Starting(scopePod) // not watched yet: on once it is
	n.container(t, id)
	s.PodUpdate(podWith(id), now.Add(rescanForced))
	ino := n.netns(t)
	if k.detail[ino] != 1 || len(b.got) != 0 {
		t.Fatalf("starting: SetDetail(on) %v, summaries %d; want 1 and none", k.detail, len(b.got))
	}
	s.Started(scopePod)
	s.Started(scopePod)
	if k.off[ino] != 1 {
		t.Fatalf("started: SetDetail(off) %v, want 1", k.off)
	}
	s.Terminating(scopePod)
	s.Terminating(scopePod)
	if k.detail[ino] != 2 || len(b.got) != 1 {
		t.Fatalf("terminating: SetDetail(on) %v, summaries %d; want 2 and 1", k.detail, len(b.got))
	}
}
