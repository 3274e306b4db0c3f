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
// signal and exit are marked as the init's), and prints two MATRIX lines:
// feature=termination_counts, the termination's counts against what the
// workload did, and feature=termination_outcome, its outcome (and partial
// reasons). The probes' partial reasons enter as the daemon enters them
// (an open-ended kernel gap each): the termination must be partial for
// exactly those, and for nothing the correlator found missing.
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
	// What the workload did, by the count definitions (docs/design.md):
	// the suite's traffic runs over the loopback of the guest's namespace,
	// the pod's, so its nRefused SYNs (between the deletion and the stop
	// signal, the sleeper's SIGTERM) are refusals inside the pod (a
	// sidecar's forwards, as it were), never a client's; the nHeld requests
	// were in flight at the holder's SIGKILL (killed requests count over
	// loopback too); its nIdle answered connections were idle (not a
	// loss). The resets and late segments are between the pod's own
	// processes over loopback, which no count takes. The sleeper, the init,
	// died of its SIGTERM (a Go program without signal.Notify).
	wantCounts := correlate.Counts{RefusedInsidePod: nRefused, RequestsKilledBySigkill: nHeld}
	const wantOutcome, wantDeath = "refused_and_killed", correlate.DeathStopSignal
	counts := "exact"
	if term.Counts != wantCounts {
		counts = "differs"
		t.Errorf("termination counts %+v, want %+v", term.Counts, wantCounts)
	}
	fmt.Printf("MATRIX kernel=%s arch=%s feature=termination_counts state=%s got=%d want=%d\n",
		kernelRelease(), runtime.GOARCH, counts, lossTotal(term.Counts), lossTotal(wantCounts))
	got := slices.Clone(term.PartialReasons)
	sort.Strings(got)
	sort.Strings(want)
	state := string(term.Outcome)
	if term.Partial {
		state += ",partial(" + strings.Join(got, ",") + ")"
	}
	fmt.Printf("MATRIX kernel=%s arch=%s feature=termination_outcome state=%s got=%d want=%d\n",
		kernelRelease(), runtime.GOARCH, state, len(got), len(want))
	if !slices.Equal(got, want) || term.Partial != (len(want) > 0) {
		t.Errorf("termination partial %v for %v, want partial exactly for the probes' reasons %v; probes:\n%s",
			term.Partial, got, want, probeTable(probes))
	}
	if string(term.Outcome) != wantOutcome || term.Death.Kind != wantDeath || term.Death.Signal != 15 {
		t.Errorf("outcome %s, death %+v: want %s, the init dead of SIGTERM (%s)", term.Outcome, term.Death, wantOutcome, wantDeath)
	}
}

// lossTotal sums a termination's counts for the matrix line.
func lossTotal(n correlate.Counts) int {
	return n.RefusedAfterSigterm + n.RefusedBeforeSigterm + n.RefusedInsidePod + n.RequestsKilledBySigkill + n.RequestsKilledAtExit +
		n.ConnectionsResetAtExit + n.ConnectionsResetAtShutdown + n.RequestsResetOnReusedConnections +
		n.StreamsKilledBySigkill + n.ProbeRefused + n.InflightAtStopSignal + n.AcceptedAfterEndpointsNotReady
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
	// The deletion precedes the whole workload, so every event falls in
	// the termination on every kernel, however fast it runs: a deletion
	// just before the stop signal left the first refusals inside the
	// deletion request's one-second precision on a fast host and outside
	// it under TCG (refused_and_killed on the host, killed in the guests).
	requested := first.Add(-20 * time.Millisecond)
	pod.DeletionTimestamp, pod.DeletionGracePeriod, pod.Ready = requested.Add(grace), grace, false
	c.Pod(collector.PodUpdate{Seen: requested.Add(time.Millisecond), Pod: pod})
	for _, e := range evs {
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
