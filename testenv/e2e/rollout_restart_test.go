package e2e_test

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestRolloutWithDaemonRestart rolls out a naive Deployment of 4 pods
// behind a router that follows EndpointSlices 1 s late (each old pod
// refuses what the router still sends it), and restarts the daemon while
// the first old pod terminates. Every old pod gets exactly one complete
// termination; the totals equal the router's records (it is the client of
// the pods) for every termination the daemon did not mark partial, and a
// termination that overlaps the restart is marked partial (daemon_down):
// without pinned BPF objects the kernel view has a hole there.
func TestRolloutWithDaemonRestart(t *testing.T) {
	c, ds := startCluster(t, "e2r-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-rollout-restart")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 4)
	// One pod at a time, 2 s apart: the restart overlaps one termination.
	dep.Spec.MinReadySeconds = 2
	dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	old := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, old)
	r, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 4 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	load := client.Load{Dial: c.Dial, Target: r.Addr(), Path: "/work", Interval: 10 * time.Millisecond,
		Count: 3000, Duration: 30 * time.Second}
	loadDone := make(chan []client.Request, 1)
	go func() { reqs, _ := load.Run(ctx); loadDone <- reqs }()
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Kubectl(ctx, "-n", ns, "rollout", "restart", "deployment/web"); err != nil {
		t.Fatal(err)
	}
	waitAnyDeleting(ctx, t, c, ns, old)
	time.Sleep(300 * time.Millisecond) // mid-termination: the router still sends to the pod
	ds[0].stop()
	ds[0] = startDaemon(t, c.RestConfig, ds[0].node, ds[0].stateDir)
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	reqs := <-loadDone
	checkRollout(ctx, t, ds[0], r, old, reqs)
}

// waitAnyDeleting waits until one of pods has a deletionTimestamp.
func waitAnyDeleting(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, pods []corev1Pod) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no old pod deleted by the rollout: %v", err)
	}
}

func checkRollout(ctx context.Context, t *testing.T, d *nodeDaemon, r *router.Router, old []corev1Pod, reqs []client.Request) {
	t.Helper()
	refusedBy := map[string]int{}
	for _, cn := range r.Conns() {
		if cn.Outcome == router.Refused {
			refusedBy[cn.Backend]++
		}
	}
	total, exact, daemonTotal := 0, 0, 0
	for i := range old {
		p := &old[i]
		got := waitComplete(ctx, t, d, string(p.UID))
		want := refusedBy[cluster.PodAddr(p, cluster.ServerPort)]
		n := got.Counts.RefusedAfterSigterm + got.Counts.RefusedBeforeSigterm
		total += want
		daemonTotal += n
		t.Logf("%s: router refused %d, drainwatch %d (after %d, before %d), partial %v, diagnoses %v",
			p.Name, want, n, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.PartialReasons, codes(got))
		switch {
		case !got.Partial && n != want:
			dumpRouter(t, got, r, cluster.PodAddr(p, cluster.ServerPort))
			t.Errorf("%s: drainwatch counted %d refused, the router saw %d", p.Name, n, want)
		case !got.Partial:
			exact++
		case n > want:
			dumpRouter(t, got, r, cluster.PodAddr(p, cluster.ServerPort))
			t.Errorf("%s: partial, yet counted %d > %d the router saw: counted twice", p.Name, n, want)
		}
	}
	t.Logf("rollout of 4 pods with a daemon restart: router refused %d in all (client saw %s), drainwatch %d; %d of 4 terminations exact, the rest partial",
		total, client.Summarize(reqs), daemonTotal, exact)
	if n := len(d.Terminations()); n != len(old) {
		t.Errorf("daemon lists %d terminations, want %d (one per old pod)", n, len(old))
	}
	if got := terminationsTotal(d); got != float64(len(old)) {
		t.Errorf("drainwatch_terminations_total = %v after the restart, want %d", got, len(old))
	}
}
