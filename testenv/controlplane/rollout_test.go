package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// TestDeploymentRollout drives a Deployment through the real deployment,
// replicaset and endpointslice controllers and the real scheduler. The node
// agent is replaced by fakeKubelet, which only marks bound pods Running and
// Ready: everything else is the control plane's own work.
func TestDeploymentRollout(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cp.Client
	ns := createNamespace(ctx, t, c, "rollout")
	for _, n := range []string{"cp-node-a", "cp-node-b"} {
		createNode(ctx, t, c, n)
	}
	go fakeKubelet(ctx, c, ns)
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, service("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitDeployment(ctx, t, c, ns, "web", 1)
	first := podsByRevision(ctx, t, c, ns, "1")
	if len(first) != 3 {
		t.Fatalf("revision 1 has %d pods, want 3", len(first))
	}
	nodes := map[string]int{}
	for _, p := range first {
		nodes[p.Spec.NodeName]++
	}
	if nodes["cp-node-a"]+nodes["cp-node-b"] != 3 {
		t.Fatalf("pods bound to %v, want all 3 on cp-node-a/cp-node-b", nodes)
	}
	waitReadyEndpoints(ctx, t, c, ns, "web", 3)

	if _, err := cp.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	waitDeployment(ctx, t, c, ns, "web", 2)
	for _, p := range first {
		got, err := c.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.DeletionTimestamp == nil {
			t.Errorf("revision-1 pod %s not being deleted after the rollout", p.Name)
		}
	}
	if second := podsByRevision(ctx, t, c, ns, "2"); len(second) != 3 {
		t.Fatalf("revision 2 has %d pods, want 3", len(second))
	}
}

func createNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, prefix string) string {
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
		t.Fatalf("default ServiceAccount in %s: %v", ns.Name, err)
	}
	return ns.Name
}

// waitDeployment waits until the Deployment's revision rev is fully rolled
// out: observed, updated, ready and available replicas all equal spec.
func waitDeployment(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string, rev int) {
	t.Helper()
	var last appsv1.DeploymentStatus
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = d.Status
		want := *d.Spec.Replicas
		return d.Annotations["deployment.kubernetes.io/revision"] == fmt.Sprint(rev) &&
			d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.ReadyReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want, nil
	})
	if err != nil {
		t.Fatalf("deployment %s revision %d not rolled out (status %+v): %v", name, rev, last, err)
	}
}

// podsByRevision lists the pods whose ReplicaSet carries revision rev.
func podsByRevision(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, rev string) []corev1.Pod {
	t.Helper()
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, rs := range rss.Items {
		if rs.Annotations["deployment.kubernetes.io/revision"] != rev {
			continue
		}
		sel := labels.Set{"pod-template-hash": rs.Labels["pod-template-hash"]}.String()
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pods.Items...)
	}
	return out
}
