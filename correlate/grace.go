package correlate

import (
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// The grace period of a termination follows the kubelet's pod worker
// (pod_workers.go, calculateEffectiveGracePeriod, Kubernetes 1.37):
//
//   - the first deletion sets it: deletionGracePeriodSeconds, never below
//     the kubelet's 1 s floor (a force delete with grace 0 still gets 1 s);
//   - a later deletion may only shorten it (a second `kubectl delete
//     --grace-period=N`): the kubelet cancels its terminating sync and
//     kills again with the shorter grace;
//   - once every container has terminated, updates change nothing: the
//     kubelet's pod worker is finished and ignores them. Its status manager
//     then deletes the pod with grace 0 after reporting every container
//     terminated; that delete says nothing about the grace the termination
//     had, and taking it made a 30 s termination look like a 0 s one.
//
// Until a deletion is seen the grace is the pod's own
// terminationGracePeriodSeconds (identify).

// minKubeletGrace is the kubelet's floor for any grace period.
const minKubeletGrace = time.Second

// applyDeletionGrace updates t's grace period from a pod update carrying a
// deletion; first is set for the first such update of the termination.
func applyDeletionGrace(t *Termination, pod collector.Pod, first bool) {
	g := max(pod.DeletionGracePeriod, minKubeletGrace)
	running := anyRunning(pod)
	switch {
	case first && (running || pod.DeletionGracePeriod > 0):
		t.GracePeriod = g
	case first:
		// The first deletion seen is the kubelet's final one: the daemon
		// missed the graceful deletion, whose grace is most likely the
		// pod's own (set by identify).
	case running && g < t.GracePeriod:
		t.GracePeriod = g
	}
}
