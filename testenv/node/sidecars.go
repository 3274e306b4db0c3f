package node

import corev1 "k8s.io/api/core/v1"

// Native sidecars (KEP-753, GA in 1.33) are init containers with
// restartPolicy Always. The kubelet starts them in order before the main
// containers, keeps them running beside them (restarting them whatever the
// pod's restartPolicy), counts their readiness in the pod's, reports them in
// status.initContainerStatuses, and at termination stops them only after
// every main container has exited, with what is left of the grace period.
// Other init containers are not run by this node (start warns).

// nativeSidecars returns the pod's native sidecars, in order.
func nativeSidecars(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isNativeSidecar(c) {
			out = append(out, c)
		}
	}
	return out
}

func isNativeSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// specOf finds a container's spec among the main containers and the native
// sidecars; nil when the pod has none of that name.
func specOf(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for _, c := range nativeSidecars(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// sidecarNamed says whether name is one of the pod's native sidecars.
func sidecarNamed(pod *corev1.Pod, name string) bool {
	for _, c := range nativeSidecars(pod) {
		if c.Name == name {
			return true
		}
	}
	return false
}

// initContainersSkipped counts the init containers this node does not run
// (all but the native sidecars).
func initContainersSkipped(pod *corev1.Pod) int {
	return len(pod.Spec.InitContainers) - len(nativeSidecars(pod))
}

// pointers returns pointers to the elements of cs.
func pointers(cs []corev1.Container) []*corev1.Container {
	out := make([]*corev1.Container, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}
