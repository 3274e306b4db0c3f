package cluster

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const pollEvery = 100 * time.Millisecond

// WaitRolledOut waits until the Deployment's current generation is fully
// rolled out: updated, ready and available replicas equal spec and no old
// replicas are left. It returns the Deployment as last seen.
func (c *Cluster) WaitRolledOut(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	var d *appsv1.Deployment
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		want, s := *d.Spec.Replicas, d.Status
		return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == want &&
			s.ReadyReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if err != nil {
		status := appsv1.DeploymentStatus{}
		if d != nil {
			status = d.Status
		}
		return d, fmt.Errorf("deployment %s/%s not rolled out (status %+v): %w", ns, name, status, err)
	}
	return d, nil
}

// ReadyPods lists the pods matching selector that are Ready, have an IP and
// are not being deleted.
func (c *Cluster) ReadyPods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing pods %s in %s: %w", selector, ns, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitPodGone waits until the pod no longer exists (the node agent deletes it
// with grace 0 once its containers have exited).
func (c *Cluster) WaitPodGone(ctx context.Context, ns, name string) error {
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s still exists: %w", ns, name, err)
	}
	return nil
}
