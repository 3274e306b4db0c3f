package kube

import (
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/collector"
)

// shrinkPodObject is the pod informer's transform: it keeps what attribution,
// rollout identity, the endpoint strategy and the termination timeline need
// and drops the rest (managedFields, annotations, volumes, env, most of the
// spec and status) before the object is cached. It is idempotent, as
// client-go requires, and leaves tombstones and other types alone.
func shrinkPodObject(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return ShrinkPod(pod), nil
}

// ShrinkPod returns the part of a pod drainwatch keeps.
func ShrinkPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Labels: pod.Labels,
			CreationTimestamp:          pod.CreationTimestamp,
			OwnerReferences:            pod.OwnerReferences,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
		},
		Spec: corev1.PodSpec{
			NodeName:                      pod.Spec.NodeName,
			TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: podIPs(pod.Status.PodIPs),
			Reason: pod.Status.Reason, Message: truncate(pod.Status.Message, maxStopMessage)},
	}
	for _, c := range pod.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, shrinkContainer(c))
	}
	// Native sidecars (init containers that restart, Kubernetes ≥ 1.29)
	// run beside the main containers and stop after them; other init
	// containers have exited before the pod runs.
	for _, c := range pod.Spec.InitContainers {
		if nativeSidecar(c) {
			sc := shrinkContainer(c)
			sc.RestartPolicy = c.RestartPolicy
			out.Spec.InitContainers = append(out.Spec.InitContainers, sc)
		}
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if slices.ContainsFunc(out.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == s.Name }) {
			out.Status.InitContainerStatuses = append(out.Status.InitContainerStatuses, shrinkStatus(s))
		}
	}
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case corev1.DisruptionTarget:
			// Who decided the pod must go (the termination's cause).
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, shrinkStatus(s))
	}
	return out
}

// maxStopMessage bounds the status message kept per pod: the kubelet's
// eviction and node-shutdown messages are a line; anything longer is not
// needed to name the cause.
const maxStopMessage = 256

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never split a character
	}
	return s[:n]
}

// shrinkContainer keeps a container's name, the lifecycle fields that
// shape its termination (whether a preStop exists, the stop signal) and
// one port named for HTTP/2, if any (collector.HTTP2PortName).
func shrinkContainer(c corev1.Container) corev1.Container {
	out := corev1.Container{Name: c.Name}
	for _, p := range c.Ports {
		if collector.HTTP2PortName(p.Name) {
			out.Ports = []corev1.ContainerPort{{Name: p.Name}} // one says it all
			break
		}
	}
	if l := c.Lifecycle; l != nil && (l.PreStop != nil || l.StopSignal != nil) {
		out.Lifecycle = &corev1.Lifecycle{StopSignal: l.StopSignal}
		if l.PreStop != nil {
			// Only its presence matters; the handler itself is dropped.
			out.Lifecycle.PreStop = &corev1.LifecycleHandler{}
		}
	}
	return out
}

func shrinkStatus(s corev1.ContainerStatus) corev1.ContainerStatus {
	out := corev1.ContainerStatus{Name: s.Name, ContainerID: s.ContainerID, StopSignal: s.StopSignal}
	if t := s.State.Terminated; t != nil {
		out.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
	}
	if t := s.LastTerminationState.Terminated; t != nil {
		out.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: t.Reason}
	}
	return out
}

// podIPs keeps a dual-stack pod's addresses; a single-stack pod's one is
// status.podIP already.
func podIPs(ips []corev1.PodIP) []corev1.PodIP {
	if len(ips) < 2 {
		return nil
	}
	return ips
}

// nativeSidecar says whether an init container is a native sidecar: one
// with restartPolicy Always.
func nativeSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
