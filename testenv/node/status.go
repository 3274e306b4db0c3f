package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// containerStatus is the worker's view of one container: its current run
// (nil before the first start) and what the status reports about it.
type containerStatus struct {
	run         *container
	ready       bool
	started     bool   // startup probe passed (or none)
	waiting     string // waiting reason when there is no run
	waitingMsg  string
	terminated  *corev1.ContainerStateTerminated // the current run ended
	last        *corev1.ContainerStateTerminated // the previous run
	stopSignal  corev1.Signal
	restartable bool
}

func (cs *containerStatus) apiStatus(spec *corev1.Container) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: spec.Image, Ready: cs.ready}
	if cs.last != nil {
		s.LastTerminationState.Terminated = cs.last
	}
	if cs.stopSignal != "" {
		sig := cs.stopSignal
		s.StopSignal = &sig
	}
	switch {
	case cs.run == nil:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: cs.waiting, Message: cs.waitingMsg}
		return s
	case cs.terminated != nil:
		s.State.Terminated = cs.terminated
	default:
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.run.startedAt)}
		started := cs.started
		s.Started = &started
	}
	s.ContainerID, s.RestartCount = "containerd://"+cs.run.id, cs.run.restarts
	return s
}

// terminatedState is the API state of a finished run.
func terminatedState(c *container) *corev1.ContainerStateTerminated {
	reason := ExitReason(c.exitCode)
	if c.oomKilled {
		reason = ReasonOOMKilled // containerd's, from the cgroup's OOM event
	}
	return &corev1.ContainerStateTerminated{
		ExitCode: c.exitCode, Reason: reason, ContainerID: "containerd://" + c.id,
		StartedAt: metav1.NewTime(c.startedAt), FinishedAt: metav1.NewTime(c.finished),
	}
}

// buildStatus assembles the pod status from the worker state.
func (w *podWorker) buildStatus() corev1.PodStatus {
	pod := w.pod
	st := corev1.PodStatus{Phase: w.phase(), QOSClass: QOSClass(pod), StartTime: &w.startTime,
		HostIP: netlab.NodeIP(w.a.cfg.Index), HostIPs: []corev1.HostIP{{IP: netlab.NodeIP(w.a.cfg.Index)}}}
	if w.sb != nil {
		st.PodIP, st.PodIPs = w.sb.IP, []corev1.PodIP{{IP: w.sb.IP}, {IP: w.sb.IP6}}
	}
	allReady := len(pod.Spec.Containers) > 0
	for i := range pod.Spec.Containers {
		cs := w.containers[pod.Spec.Containers[i].Name]
		st.ContainerStatuses = append(st.ContainerStatuses, cs.apiStatus(&pod.Spec.Containers[i]))
		allReady = allReady && cs.ready
	}
	for _, sc := range nativeSidecars(pod) {
		cs := w.containers[sc.Name]
		if cs == nil { // a sidecar added by a later version of the pod: not run
			continue
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs.apiStatus(sc))
		allReady = allReady && cs.ready
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	st.Conditions = []corev1.PodCondition{
		w.condition(corev1.PodReadyToStartContainers, w.sb != nil && !terminal),
		w.condition(corev1.PodInitialized, true),
		w.condition(corev1.ContainersReady, allReady && !terminal),
		w.condition(corev1.PodReady, allReady && !terminal),
		w.condition(corev1.PodScheduled, true),
	}
	if w.verdict != nil {
		// After the conditions: Ready keeps following the containers and
		// their probes while they stop, so the EndpointSlice keeps the pod
		// ready meanwhile (kubernetes/kubernetes#116965).
		w.verdict.applyVerdict(w, &st)
	}
	return st
}

// condition returns a condition, keeping its transition time while the
// value does not change.
func (w *podWorker) condition(t corev1.PodConditionType, ok bool) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	prev, seen := w.conditions[t]
	if !seen || prev.Status != status {
		prev = corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.NewTime(time.Now())}
		w.conditions[t] = prev
	}
	return prev
}

// phase follows the kubelet's getPhase: Pending until every container has
// started, Running while any runs or restarts, and once all have exited
// for good, Succeeded when every exit code is 0, else Failed.
func (w *podWorker) phase() corev1.PodPhase {
	running, stopped, succeeded, restarting := 0, 0, 0, 0
	for _, cs := range w.containers {
		switch {
		case cs.run == nil:
			return corev1.PodPending
		case cs.terminated == nil:
			running++
		case cs.restartable && !w.terminating:
			restarting++
		default:
			stopped++
			if cs.terminated.ExitCode == 0 {
				succeeded++
			}
		}
	}
	switch {
	case running > 0 || restarting > 0:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

// pushStatus writes the status with a strategic merge patch of the status
// subresource, as the kubelet's status manager does: conditions merge by
// type, so conditions others own (DisruptionTarget, written by the API
// server's eviction, the scheduler's preemption, the taint manager) stay;
// containerStatuses is an atomic list, replaced whole, so a container's
// state never keeps a stale "running" next to "terminated".
func (w *podWorker) pushStatus(ctx context.Context) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": w.pod.UID}, // a recreated pod of the same name is not ours
		"status":   w.buildStatus(),
	})
	if err != nil {
		return fmt.Errorf("encoding pod status: %w", err)
	}
	_, err = w.a.cfg.Client.CoreV1().Pods(w.pod.Namespace).Patch(ctx, w.pod.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patching status of pod %s/%s: %w", w.pod.Namespace, w.pod.Name, err)
	}
	return nil
}
