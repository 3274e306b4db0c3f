package daemon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func newNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("default service account of %s: %v", ns.Name, err)
	}
	return ns.Name
}

// newNode registers a Ready Node (the endpointslice controller skips pods
// of unknown nodes). Nobody heartbeats it: no node-lifecycle controller runs.
func newNode(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	n.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podSpec(node string, grace int64) corev1.PodSpec {
	return corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(grace),
		Containers: []corev1.Container{{Name: "app", Image: "naive", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}
}

func barePod(name, node string, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}, Spec: podSpec(node, 30)}
}

func deploymentOn(name, node string, replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	spec := podSpec("", 1)
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}},
	}
}

func serviceFor(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

// markRunning makes a pod Running and Ready with ip and a container id.
func markRunning(p *corev1.Pod, ip, containerID string) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr.To(true),
		Image: "naive", ContainerID: containerID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
}

// fakeKubelet stands in for node's kubelet in API-only tests: it marks the
// node's pods Running and Ready, and removes its terminating pods with a
// Killing Event. It stops with ctx.
func fakeKubelet(ctx context.Context, c kubernetes.Interface, ns, node string, ipBase int) {
	next := ipBase
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.DeletionTimestamp != nil:
				killing(ctx, c, p, node)
				_ = c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			case p.Status.Phase != corev1.PodRunning:
				markRunning(p, fmt.Sprintf("10.98.%d.%d", next/250, next%250+2), "")
				if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err == nil {
					next++
				}
			}
		}
		return false, nil
	})
}

// killing records the kubelet's Killing Event for a pod.
func killing(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, node string) {
	now := metav1.NewTime(time.Now())
	_, _ = c.CoreV1().Events(p.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			APIVersion: "v1", FieldPath: "spec.containers{app}"},
		Reason: "Killing", Message: "Stopping container app", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "kubelet", Host: node}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
}
