package correlate

import (
	"testing"
	"time"
)

// TestNodeShutdownDiagnosis: a node shutdown whose share of the kubelet's
// shutdownGracePeriod (10 s here) is shorter than the pod's grace period
// (30 s) and killed requests is a node configuration fix, and so is a
// node-pressure eviction's (1 s on a hard threshold); one that gave the pod
// its full grace, or a kill of another cause, stays the pod's.
func TestNodeShutdownDiagnosis(t *testing.T) {
	const (
		nodeFix = "raise the kubelet's shutdownGracePeriod so that its share for regular pods " +
			"(shutdownGracePeriod − shutdownGracePeriodCriticalPods, or the pod's priority group in shutdownGracePeriodByPodPriority) is ≥ 30s; " +
			"raising terminationGracePeriodSeconds changes nothing: the node's share caps it"
		podFix   = "raise terminationGracePeriodSeconds above preStop + the longest request, or bound requests below the remaining grace"
		cutMsg   = ": the node's graceful shutdown gave the pod 10s, less than its terminationGracePeriodSeconds of 30s"
		evictFix = "keep the node off its hard eviction thresholds (a hard threshold kills after 1s; " +
			"set soft thresholds below them) and raise the kubelet's evictionMaxPodGracePeriod to ≥ 30s, " +
			"which caps the grace of soft-threshold evictions; raising terminationGracePeriodSeconds changes nothing"
		evictMsg = ": the kubelet's node-pressure eviction gave the pod 1s, less than its terminationGracePeriodSeconds of 30s"
	)
	stopped := func(cause string, sigkill int) Termination {
		return Termination{Cause: cause, GracePeriod: 30 * time.Second,
			Marks:  Marks{Killing: ms(0), StopSignal: ms(2), ListenerClosed: ms(3), Sigkill: ms(sigkill), Exit: ms(sigkill + 1)},
			Counts: Counts{RequestsKilledBySigkill: 3, InflightAtStopSignal: 3}}
	}
	tests := []struct {
		name                  string
		t                     Termination
		killedMsg, killedFix  string
		exceededMsg, exceeded string
	}{
		{"node shutdown shorter than the pod's grace", stopped(CauseNodeShutdown, 10_000),
			"SIGKILL 10s after the stop signal killed 3 in-flight requests (3 were in flight at the stop signal)" + cutMsg, nodeFix,
			"still running when the grace period of 30s ran out: SIGKILL 10s after the stop signal" + cutMsg, nodeFix},
		{"node shutdown with the pod's full grace", stopped(CauseNodeShutdown, 30_000),
			"SIGKILL 30s after the stop signal killed 3 in-flight requests (3 were in flight at the stop signal)", podFix,
			"still running when the grace period of 30s ran out: SIGKILL 30s after the stop signal",
			"finish the drain within the grace period or raise terminationGracePeriodSeconds above 30s"},
		{"hard-threshold eviction", stopped(CauseNodePressure, 1_000),
			"SIGKILL 0.998s after the stop signal killed 3 in-flight requests (3 were in flight at the stop signal)" + evictMsg, evictFix,
			"still running when the grace period of 30s ran out: SIGKILL 0.998s after the stop signal" + evictMsg, evictFix},
		{"soft-threshold eviction with the pod's full grace", stopped(CauseNodePressure, 30_000),
			"SIGKILL 30s after the stop signal killed 3 in-flight requests (3 were in flight at the stop signal)", podFix,
			"still running when the grace period of 30s ran out: SIGKILL 30s after the stop signal",
			"finish the drain within the grace period or raise terminationGracePeriodSeconds above 30s"},
		{"deletion killed as early", stopped(CauseDelete, 10_000),
			"SIGKILL 10s after the stop signal killed 3 in-flight requests (3 were in flight at the stop signal)", podFix,
			"still running when the grace period of 30s ran out: SIGKILL 10s after the stop signal",
			"finish the drain within the grace period or raise terminationGracePeriodSeconds above 30s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Termination{Diagnoses: diagnose(tc.t, "", New(Config{}).cfg)}
			k, e := diagnosis(got, DiagRequestsKilled), diagnosis(got, DiagGraceExceeded)
			if k.Message != tc.killedMsg || k.Fix != tc.killedFix {
				t.Errorf("%s:\n got %q | %q\nwant %q | %q", DiagRequestsKilled, k.Message, k.Fix, tc.killedMsg, tc.killedFix)
			}
			if e.Message != tc.exceededMsg || e.Fix != tc.exceeded {
				t.Errorf("%s:\n got %q | %q\nwant %q | %q", DiagGraceExceeded, e.Message, e.Fix, tc.exceededMsg, tc.exceeded)
			}
		})
	}
}
