//go:build vmguest

package kernel

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
)

// checkOutcome feeds the guest's events through the correlator as the
// termination of one pod, the guest's network namespace, whose container's
// init is the SIGTERMed sleeper (the guest has no PID namespace for it: its
// signal and exit are marked as the init's), and prints
// MATRIX feature=termination_outcome: clean, or partial with its reasons.
// The probes' partial reasons enter as the daemon enters them (an
// open-ended kernel gap each): the termination must be partial for exactly
// those, and for nothing the correlator found missing.
func checkOutcome(t *testing.T, probes []ProbeStatus, netns uint32, evs []collector.Event, w *workload) {
	var want []string
	for _, p := range probes {
		if r := p.PartialReason(); r != "" && !slices.Contains(want, r) {
			want = append(want, r)
		}
	}
	term, ok := guestTermination(probes, netns, evs, w)
	if !ok {
		t.Fatalf("the correlator completed no termination of the guest's pod from %d events", len(evs))
	}
	got := slices.Clone(term.PartialReasons)
	sort.Strings(got)
	sort.Strings(want)
	state := "clean"
	if term.Partial {
		state = "partial(" + strings.Join(got, ",") + ")"
	}
	fmt.Printf("MATRIX kernel=%s arch=%s feature=termination_outcome state=%s got=%d want=%d outcome=%s\n",
		kernelRelease(), runtime.GOARCH, state, len(got), len(want), term.Outcome)
	if !slices.Equal(got, want) || term.Partial != (len(want) > 0) {
		t.Errorf("termination partial %v for %v, want partial exactly for the probes' reasons %v; probes:\n%s",
			term.Partial, got, want, probeTable(probes))
	}
}

// guestTermination is the correlator's record of the guest pod's
// termination: born before the first event, deleted just before the
// sleeper's SIGTERM, gone after the last event.
func guestTermination(probes []ProbeStatus, netns uint32, evs []collector.Event, w *workload) (correlate.Termination, bool) {
	evs = slices.Clone(evs)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time.Before(evs[j].Time) })
	var stop time.Time
	for i := range evs {
		if (evs[i].Type == collector.EventSignal || evs[i].Type == collector.EventExit) && evs[i].PID == w.sleeper {
			evs[i].TargetInit = true
			if evs[i].Type == collector.EventSignal && stop.IsZero() {
				stop = evs[i].Time
			}
		}
	}
	if len(evs) == 0 || stop.IsZero() {
		return correlate.Termination{}, false
	}
	first, last := evs[0].Time, evs[len(evs)-1].Time
	c := correlate.New(correlate.DefaultConfig())
	for _, p := range probes {
		if r := p.PartialReason(); r != "" {
			c.KernelGap(r, first.Add(-time.Minute), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
		}
	}
	const uid, grace = "guest", 30 * time.Second
	pod := collector.Pod{UID: uid, Namespace: "matrix", Name: "guest", Node: "guest",
		GracePeriod: grace, Containers: []collector.Container{{Name: "app"}}}
	c.Pod(collector.PodUpdate{Seen: first.Add(-2 * time.Second), Pod: pod})
	c.BindNetns(uid, netns)
	pod.Containers[0].ID, pod.Ready = strings.Repeat("c", 64), true
	c.Pod(collector.PodUpdate{Seen: first.Add(-time.Second), Pod: pod})
	requested := stop.Add(-20 * time.Millisecond)
	pod.DeletionTimestamp, pod.DeletionGracePeriod, pod.Ready = requested.Add(grace), grace, false
	deleted := false
	for _, e := range evs {
		if !deleted && !e.Time.Before(requested) {
			c.Pod(collector.PodUpdate{Seen: requested.Add(time.Millisecond), Pod: pod})
			deleted = true
		}
		c.Kernel(e)
	}
	c.PodDeleted(collector.PodDeleted{Seen: last.Add(time.Millisecond), UID: uid})
	for _, term := range c.Tick(last.Add(time.Hour)) {
		if term.PodUID == uid {
			return term, true
		}
	}
	return correlate.Termination{}, false
}
