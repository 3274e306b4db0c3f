package daemon

import (
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector/node"
)

// The tick slows down only when no termination is live and nothing came
// in for idleAfter.
func TestPaceTicksSlowerOnlyWhenIdle(t *testing.T) {
	t0, every := time.Unix(1000, 0), 250*time.Millisecond
	var p pace
	p.input(t0)
	cases := []struct {
		now  time.Time
		live int
		want time.Duration
	}{
		{t0.Add(time.Second), 0, every},
		{t0.Add(idleAfter), 0, idleTicks * every},
		{t0.Add(idleAfter), 1, every},
	}
	for _, c := range cases {
		if got := p.nextTick(c.now, every, c.live); got != c.want {
			t.Errorf("nextTick(%v after input, %d live) = %v, want %v", c.now.Sub(t0), c.live, got, c.want)
		}
	}
}

// A periodic checkpoint is skipped while nothing changed: no input, no
// finished termination, the same scopes (in any order), and less than
// checkpointIdleEvery since the last one.
func TestPaceSkipsUnchangedCheckpoints(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := node.ScopeRecord{PodUID: "a", Netns: 1, Cgroups: map[string]uint64{"c": 2, "d": 3}}
	b := node.ScopeRecord{PodUID: "b", Netns: 4}
	var p pace
	p.input(t0)
	if !p.checkpointDue(t0, nil) {
		t.Fatal("an input: a checkpoint is due")
	}
	p.checkpointed(t0, []node.ScopeRecord{a, b})
	if p.checkpointDue(t0.Add(2*time.Second), []node.ScopeRecord{b, a}) {
		t.Error("nothing changed: no checkpoint due")
	}
	rebound := node.ScopeRecord{PodUID: "b", Netns: 4, Cgroups: map[string]uint64{"c": 5}}
	if !p.checkpointDue(t0.Add(2*time.Second), []node.ScopeRecord{a, rebound}) {
		t.Error("a cgroup bound: a checkpoint is due")
	}
	if !p.checkpointDue(t0.Add(checkpointIdleEvery), []node.ScopeRecord{a, b}) {
		t.Error("checkpointIdleEvery elapsed: a checkpoint is due")
	}
	p.changed = true
	if !p.checkpointDue(t0.Add(2*time.Second), []node.ScopeRecord{a, b}) {
		t.Error("a finished termination: a checkpoint is due")
	}
}

// The store is pruned at the first checkpoint, then at most every
// pruneEvery, and always at an orderly shutdown's.
func TestPacePrunesOncePerInterval(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p pace
	for _, c := range []struct {
		after time.Duration
		clean bool
		want  bool
	}{
		{0, false, true},
		{2 * time.Second, false, false},
		{pruneEvery - time.Second, false, false},
		{pruneEvery, false, true},
		{pruneEvery + 2*time.Second, true, true},
		{pruneEvery + 4*time.Second, false, false},
	} {
		if got := p.pruneDue(t0.Add(c.after), c.clean); got != c.want {
			t.Errorf("pruneDue(+%v, clean=%v) = %v, want %v", c.after, c.clean, got, c.want)
		}
	}
}
