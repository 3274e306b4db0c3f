package realnode

import corev1 "k8s.io/api/core/v1"

// Taint is the taint every real node registers with (the kubelet's
// --register-with-taints). A testenv cluster mixes two kinds of node: the
// stand-in node agents run a container's image as a host binary
// (`local:/usr/bin/python3`), which the real kubelet cannot parse
// (InvalidImageName), and a real node runs only the images imported into its
// containerd. A node kind advertises what it can run this way: the real node
// repels every pod that does not tolerate this taint, so a Deployment made
// for the stand-ins never lands a replica on it and waits forever for it to
// become Ready. Pods meant for the real node carry the toleration (Pin);
// DaemonSets that tolerate everything (the chart's default) run there too.
var Taint = corev1.Taint{Key: "testenv.drainwatch.dev/real-node", Value: "containerd", Effect: corev1.TaintEffectNoSchedule}

// taintFlag is Taint as --register-with-taints spells it.
func taintFlag() string { return Taint.Key + "=" + Taint.Value + ":" + string(Taint.Effect) }

// Pin puts a pod spec on the real node named node: a node selector on its
// hostname, the toleration of Taint, and imagePullPolicy Never (its images
// are imported; an untagged image would otherwise be pulled from a
// registry, which this machine cannot reach).
func Pin(spec *corev1.PodSpec, node string) {
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: Taint.Key, Operator: corev1.TolerationOpEqual,
		Value: Taint.Value, Effect: Taint.Effect})
	for i := range spec.InitContainers {
		spec.InitContainers[i].ImagePullPolicy = corev1.PullNever
	}
	for i := range spec.Containers {
		spec.Containers[i].ImagePullPolicy = corev1.PullNever
	}
}
