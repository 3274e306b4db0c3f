package correlate

import (
	"fmt"
	"time"
)

// A graceful node shutdown kills each pod with the smaller of its own
// terminationGracePeriodSeconds and its priority group's share of the
// kubelet's shutdownGracePeriod (shutdownGracePeriod −
// shutdownGracePeriodCriticalPods for regular pods, or
// shutdownGracePeriodByPodPriority). When the share is the smaller, what
// the SIGKILL cut short is the node's configuration: raising the pod's
// grace period changes nothing.

// shutdownCut is how long a node shutdown let the pod run before SIGKILL
// (from the Killing, else the stop signal), and whether that was shorter
// than the pod's own grace period by more than the kubelet's floor: the
// SIGKILL can only come late, never early, so such a kill is the node's.
func shutdownCut(t Termination) (time.Duration, bool) {
	m := t.Marks
	start := m.Killing
	if start.IsZero() {
		start = m.StopSignal
	}
	if t.Cause != CauseNodeShutdown || m.Sigkill.IsZero() || start.IsZero() || t.GracePeriod <= 0 {
		return 0, false
	}
	cut := m.Sigkill.Sub(start)
	return cut, cut+minKubeletGrace <= t.GracePeriod
}

// nodeShutdownFix rewrites the pod-side fix of d (requests killed, grace
// exceeded) into the node's when the shutdown's share cut the pod short.
func nodeShutdownFix(t Termination, d *Diagnosis) *Diagnosis {
	cut, short := shutdownCut(t)
	if d == nil || !short {
		return d
	}
	grace := FormatSeconds(t.GracePeriod)
	d.Message += fmt.Sprintf(": the node's graceful shutdown gave the pod %s, less than its terminationGracePeriodSeconds of %s",
		FormatSeconds(cut), grace)
	d.Fix = fmt.Sprintf("raise the kubelet's shutdownGracePeriod so that its share for regular pods "+
		"(shutdownGracePeriod − shutdownGracePeriodCriticalPods, or the pod's priority group in shutdownGracePeriodByPodPriority) is ≥ %s; "+
		"raising terminationGracePeriodSeconds changes nothing: the node's share caps it", grace)
	return d
}
