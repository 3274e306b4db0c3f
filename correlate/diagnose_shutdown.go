package correlate

import (
	"fmt"
	"time"
)

// Two kinds of termination are killed on the node's schedule, not the
// pod's, and a SIGKILL that cut them short is fixed in the kubelet's
// configuration: raising the pod's grace period changes nothing.
//
//   - A graceful node shutdown kills each pod with the smaller of its own
//     terminationGracePeriodSeconds and its priority group's share of the
//     kubelet's shutdownGracePeriod (shutdownGracePeriod −
//     shutdownGracePeriodCriticalPods for regular pods, or
//     shutdownGracePeriodByPodPriority).
//   - A node-pressure eviction kills after 1 s on a hard threshold, and on
//     a soft one after the smaller of evictionMaxPodGracePeriod and the
//     pod's own grace (pkg/kubelet/eviction, eviction_manager.go).

// nodeCut is how long a node-imposed stop let the pod run before SIGKILL
// (from the Killing, else the stop signal), and whether that was shorter
// than the pod's own grace period by more than the kubelet's floor: the
// SIGKILL can only come late, never early, so such a kill is the node's.
func nodeCut(t Termination) (time.Duration, bool) {
	m := t.Marks
	start := m.Killing
	if start.IsZero() {
		start = m.StopSignal
	}
	if (t.Cause != CauseNodeShutdown && t.Cause != CauseNodePressure) ||
		m.Sigkill.IsZero() || start.IsZero() || t.GracePeriod <= 0 {
		return 0, false
	}
	cut := m.Sigkill.Sub(start)
	return cut, cut+minKubeletGrace <= t.GracePeriod
}

// nodeFix rewrites the pod-side fix of d (requests killed, grace
// exceeded) into the node's when a node shutdown's share or a node-pressure
// eviction cut the pod short.
func nodeFix(t Termination, d *Diagnosis) *Diagnosis {
	cut, short := nodeCut(t)
	if d == nil || !short {
		return d
	}
	grace := FormatSeconds(t.GracePeriod)
	by := "the node's graceful shutdown"
	fix := fmt.Sprintf("raise the kubelet's shutdownGracePeriod so that its share for regular pods "+
		"(shutdownGracePeriod − shutdownGracePeriodCriticalPods, or the pod's priority group in shutdownGracePeriodByPodPriority) is ≥ %s; "+
		"raising terminationGracePeriodSeconds changes nothing: the node's share caps it", grace)
	if t.Cause == CauseNodePressure {
		by = "the kubelet's node-pressure eviction"
		fix = fmt.Sprintf("keep the node off its hard eviction thresholds (a hard threshold kills after 1s; "+
			"set soft thresholds below them) and raise the kubelet's evictionMaxPodGracePeriod to ≥ %s, "+
			"which caps the grace of soft-threshold evictions; raising terminationGracePeriodSeconds changes nothing", grace)
	}
	d.Message += fmt.Sprintf(": %s gave the pod %s, less than its terminationGracePeriodSeconds of %s", by, FormatSeconds(cut), grace)
	d.Fix = fix
	return d
}
