package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// createNode registers a Ready Node with room for pods. Nobody heartbeats it;
// the node-lifecycle controller does not run, so it stays Ready.
func createNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	n.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fakeKubelet marks every bound, not yet running pod of ns Running and Ready
// with a unique IP, until ctx ends. It stands in for the node agent only in
// this package's tests.
func fakeKubelet(ctx context.Context, c kubernetes.Interface, ns string) {
	next := 2
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			markRunning(p, fmt.Sprintf("10.99.0.%d", next))
			if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
				next++
			}
		}
		return false, nil
	})
}

func markRunning(p *corev1.Pod, ip string) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized,
		corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr.To(true),
		Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "naive",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
			},
		},
	}
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// waitReadyEndpoints waits until the Service's EndpointSlices list want ready
// endpoints, as the endpointslice controller computes them.
func waitReadyEndpoints(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, svc string, want int) {
	t.Helper()
	got := -1
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		slices, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, nil
		}
		got = 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got++
				}
			}
		}
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("service %s has %d ready endpoints, want %d: %v", svc, got, want, err)
	}
}
