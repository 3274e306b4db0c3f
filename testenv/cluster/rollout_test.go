package cluster_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestDeploymentOnTwoNodesAndRolloutRestart: 3 pods become Ready on 2 nodes
// with distinct IPs from their node's pod CIDR, each answers /work from the
// fabric; kubectl rollout restart replaces all 3 through the real deployment
// controller and the old pods go away.
func TestDeploymentOnTwoNodesAndRolloutRestart(t *testing.T) {
	c := twoNodes(t, "ro-")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := uniqueNS("rollout")
	err := c.Apply(ctx, cluster.Namespace(ns), cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 3, "--drain-delay=0s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	first := checkPods(ctx, t, c, ns)
	if out, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	d, err := c.WaitRolledOut(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if rev := d.Annotations["deployment.kubernetes.io/revision"]; rev != "2" {
		t.Fatalf("revision %q after rollout restart, want 2", rev)
	}
	for _, p := range first {
		if err := c.WaitPodGone(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	second := checkPods(ctx, t, c, ns)
	for _, p := range second {
		for _, old := range first {
			if p.UID == old.UID {
				t.Errorf("pod %s survived the rollout", p.Name)
			}
		}
	}
}

// checkPods checks the 3 ready pods: 2 on one node and 1 on the other,
// distinct IPs inside their node's pod CIDR, each answering /work.
func checkPods(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) []corev1.Pod {
	t.Helper()
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d ready pods, want 3", len(pods))
	}
	perNode, ips := map[string]int{}, map[string]bool{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		ips[p.Status.PodIP] = true
		idx := map[string]int{c.NodeNames[0]: 1, c.NodeNames[1]: 2}[p.Spec.NodeName]
		if !netip.MustParsePrefix(netlab.PodCIDR(idx)).Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s on %s has IP %s outside %s", p.Name, p.Spec.NodeName, p.Status.PodIP, netlab.PodCIDR(idx))
		}
		r := client.Get(ctx, c.Dial, cluster.PodAddr(&p, cluster.ServerPort), "/work", 2*time.Second, nil)
		if r.Outcome != client.OK {
			t.Errorf("GET /work on %s from the fabric: %s (%s)", p.Status.PodIP, r.Outcome, r.Err)
		}
	}
	a, b := perNode[c.NodeNames[0]], perNode[c.NodeNames[1]]
	if len(ips) != 3 || a+b != 3 || a == 0 || b == 0 {
		t.Fatalf("pods per node %v, %d distinct IPs; want 2+1 on both nodes, 3 IPs", perNode, len(ips))
	}
	return pods
}
