package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestTerminationCauses stops pods in each way the real control plane
// offers and checks the cause drainwatch names for each termination: a
// scale-down (the Deployment controller removes a pod of its current
// revision), an eviction through the Eviction API with a real
// PodDisruptionBudget (kubectl drain's path: the API server sets the
// DisruptionTarget condition), a rollout (`kubectl rollout restart`: the
// old revision's pods), and the deletion of a pod without a controller.
// Kubelet-initiated stops (node pressure, node shutdown) and container
// restarts need the node agent to play the kubelet's part (issue 12).
func TestTerminationCauses(t *testing.T) {
	c, ds := startCluster(t, "e2c-", 1)
	d := ds[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := unique("e2e-cause")
	// Naive servers exit at once: each termination completes in seconds.
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", workload.ModeNaive, 3))
	waitWatching(ctx, t, ds, pods)
	apps := c.Client.AppsV1().Deployments(ns)
	type row struct{ pod, want, got, evidence string }
	var table []row
	check := func(p *corev1.Pod, want string) {
		t.Helper()
		got := waitComplete(ctx, t, d, string(p.UID))
		table = append(table, row{p.Name, want, got.Cause, got.CauseEvidence})
		if got.Cause != want {
			t.Errorf("%s: cause %q (%s), want %q", p.Name, got.Cause, got.CauseEvidence, want)
		}
	}

	// Scale-down: 3 → 2.
	scale, err := apps.GetScale(ctx, "web", metav1.GetOptions{})
	must(t, err)
	scale.Spec.Replicas = 2
	_, err = apps.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
	must(t, err)
	check(waitAnyDeleting(ctx, t, c, ns, pods), correlate.CauseScaleDown)

	// Eviction through a PodDisruptionBudget that allows one.
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	_, err = c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{})
	must(t, err)
	ready := readyPods(ctx, t, c, ns, 2)
	victim := &ready[0]
	err = evictWhenAllowed(ctx, c, victim)
	must(t, err)
	check(victim, correlate.CauseEviction)

	// Rollout: every pod of the old revision.
	old := readyPods(ctx, t, c, ns, 2)
	waitWatching(ctx, t, ds, old)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	for i := range old {
		check(&old[i], correlate.CauseRollout)
	}

	// A pod without a controller, deleted.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare", Labels: map[string]string{"app": "bare"}},
		Spec: cluster.ServerDeployment(ns, "bare", workload.ModeNaive, 1).Spec.Template.Spec}
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{})
	must(t, err)
	barePods := readyPodsOf(ctx, t, c, ns, "app=bare", 1)
	waitWatching(ctx, t, ds, barePods)
	must(t, c.DeletePod(ctx, ns, "bare"))
	check(&barePods[0], correlate.CauseDelete)

	for _, r := range table {
		t.Logf("%-28s want %-11s got %-11s %s", r.pod, r.want, r.got, r.evidence)
	}
}

func readyPods(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, n int) []corev1.Pod {
	t.Helper()
	return readyPodsOf(ctx, t, c, ns, "app=web", n)
}

// readyPodsOf waits until exactly n pods matching selector are ready and
// none of them is being deleted, and returns them.
func readyPodsOf(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	for ctx.Err() == nil {
		pods, err := c.ReadyPods(ctx, ns, selector)
		if err == nil {
			var live []corev1.Pod
			for _, p := range pods {
				if p.DeletionTimestamp == nil {
					live = append(live, p)
				}
			}
			if len(live) == n {
				return live
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d ready pods %s in %s: %v", n, selector, ns, ctx.Err())
	return nil
}

// evictWhenAllowed evicts p through the Eviction API, retrying while the
// disruption controller has not yet computed the budget (429).
func evictWhenAllowed(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	for {
		err := c.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("evicting %s: %w", p.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
