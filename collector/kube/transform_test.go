package kube

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
)

// fullPod is a pod as the API returns it, with the fields the transform
// must drop.
func fullPod() *corev1.Pod {
	sigusr1 := corev1.Signal("SIGUSR1")
	del := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 30, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d9f-abcde", Namespace: "shop", UID: testUID, ResourceVersion: "42",
			Labels:            map[string]string{"app": "web", "pod-template-hash": "7d9f"},
			Annotations:       map[string]string{"big": "annotation"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9f", Controller: ptr.To(true)}},
			DeletionTimestamp: &del, DeletionGracePeriodSeconds: ptr.To[int64](30),
		},
		Spec: corev1.PodSpec{
			NodeName: "node-a", TerminationGracePeriodSeconds: ptr.To[int64](45),
			Volumes: []corev1.Volume{{Name: "data"}},
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "tools:1"}, // an ordinary init container: done before the pod runs
				{Name: "mesh", Image: "proxy:3", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Lifecycle: &corev1.Lifecycle{StopSignal: &sigusr1}},
			},
			Containers: []corev1.Container{
				{Name: "app", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
					Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
						Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}},
				{Name: "sidecar", Image: "proxy:2", Lifecycle: &corev1.Lifecycle{StopSignal: &sigusr1},
					Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: "grpc-api", ContainerPort: 8443}}},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.244.1.7", HostIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "ok"},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", ContainerID: "containerd://" + testCID, Image: "web:1",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: "x"}}},
				{Name: "sidecar", ContainerID: "containerd://" + testCID[:63] + "0"},
			},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "setup", ContainerID: "containerd://" + testCID[:63] + "1",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
				{Name: "mesh", ContainerID: "containerd://" + testCID[:63] + "2"},
			},
		},
	}
}

func TestShrinkPodDropsWhatIsNotNeeded(t *testing.T) {
	got := ShrinkPod(fullPod())
	if got.ManagedFields != nil || got.Annotations != nil || got.Spec.Volumes != nil || got.Status.HostIP != "" {
		t.Fatalf("shrunk pod keeps dropped fields: %+v", got)
	}
	if c := got.Spec.Containers[0]; c.Image != "" || c.Env != nil || c.Lifecycle.PreStop.Exec != nil {
		t.Fatalf("shrunk container keeps dropped fields: %+v", c)
	}
	if len(got.Spec.InitContainers) != 1 || got.Spec.InitContainers[0].Name != "mesh" || got.Spec.InitContainers[0].Image != "" ||
		len(got.Status.InitContainerStatuses) != 1 || got.Status.InitContainerStatuses[0].Name != "mesh" {
		t.Fatalf("init containers %+v, statuses %+v: want the native sidecar only", got.Spec.InitContainers, got.Status.InitContainerStatuses)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Message != "" {
		t.Fatalf("conditions = %+v, want only Ready without message", got.Status.Conditions)
	}
	if again := ShrinkPod(got); !cmp.Equal(again, got) {
		t.Fatalf("transform is not idempotent: %s", cmp.Diff(got, again))
	}
}

func TestConvertPodAfterShrink(t *testing.T) {
	w := collector.Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Revision: "3"}
	got := ConvertPod(ShrinkPod(fullPod()), w)
	want := collector.Pod{
		UID: testUID, Namespace: "shop", Name: "web-7d9f-abcde", Node: "node-a",
		IP: netip.MustParseAddr("10.244.1.7"), Workload: w, GracePeriod: 30 * time.Second,
		HasPreStop: true, Ready: true, HTTP2: true,
		DeletionTimestamp:   time.Date(2026, 11, 29, 12, 0, 30, 0, time.UTC),
		DeletionGracePeriod: 30 * time.Second,
		Containers: []collector.Container{
			{Name: "app", ID: testCID, Terminated: true, ExitCode: 137, Reason: "Error"},
			{Name: "sidecar", StopSignal: 10, ID: testCID[:63] + "0"},
			{Name: "mesh", StopSignal: 10, ID: testCID[:63] + "2", Sidecar: true},
		},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("ConvertPod (-want +got):\n%s", diff)
	}
}

func TestPodGraceDefaults(t *testing.T) {
	p := &corev1.Pod{}
	if g := podGrace(p); g != 30*time.Second {
		t.Fatalf("default grace = %v, want 30s", g)
	}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	if g := podGrace(p); g != 3*time.Second {
		t.Fatalf("spec grace = %v, want 3s", g)
	}
	p.DeletionGracePeriodSeconds = ptr.To[int64](0)
	if g := podGrace(p); g != 0 {
		t.Fatalf("deletion grace = %v, want 0 (force delete)", g)
	}
}

func TestShrinkLeavesTombstonesAlone(t *testing.T) {
	tomb := "not a pod"
	if got, _ := shrinkPodObject(tomb); got != tomb {
		t.Fatalf("transform changed a non-pod: %v", got)
	}
}
