package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestScenarios runs the termination scenarios on a two-node
// cluster, one daemon per node, and finally checks that each daemon
// reported the pods of its own node only.
func TestScenarios(t *testing.T) {
	c, ds := startCluster(t, "e2x-", 2)
	t.Run("naive-prestop-behind-router", func(t *testing.T) { prestopBehindRouter(t, c, ds, anyNode) })
	// On the second node: each daemon then has terminations of its own.
	t.Run("ignore-term-inflight", func(t *testing.T) { ignoreTermInflight(t, c, ds, onStandIn(c.NodeNames[1])) })
	t.Run("prestop-missing-binary", func(t *testing.T) { prestopMissingBinary(t, c, ds, onStandIn(c.NodeNames[0])) })
	t.Run("each-node-its-own-pods", func(t *testing.T) { ownPodsOnly(t, c, ds) })
}

// placement puts a Deployment's pods on a node (or leaves them to the
// scheduler).
type placement func(*appsv1.Deployment)

func anyNode(*appsv1.Deployment) {}

// onStandIn pins the pods to a stand-in node.
func onStandIn(node string) placement {
	return func(dep *appsv1.Deployment) {
		dep.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
}

// deploy applies a Deployment (readiness probes on: the kubelet's probes
// are kept apart from client traffic) and its Service, waits for it and
// returns its ready pods.
func deploy(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, dep *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	if err := c.Apply(ctx, cluster.Namespace(ns), dep, cluster.ServiceFor(ns, dep.Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitRolledOut(ctx, ns, dep.Name); err != nil {
		t.Fatal(err)
	}
	pods, err := c.ReadyPods(ctx, ns, "app="+dep.Name)
	if err != nil || len(pods) != int(*dep.Spec.Replicas) {
		t.Fatalf("ready pods of %s: %d, %v", dep.Name, len(pods), err)
	}
	return pods
}

// prestopBehindRouter: naive server, preStop sleep 2 s, a router that
// follows EndpointSlices 1 s late. The router stops sending before the
// server closes its listener: nothing is refused, by either account.
func prestopBehindRouter(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, place placement) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-prestop-router")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 2)
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}}
	place(dep)
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	r, err := c.StartRouter(rctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 2 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	victim := &pods[0]
	res, err := c.Seeds(ctx, victim, cluster.ServerPort, r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	want := lab.RefusedTo(cluster.PodAddr(victim, cluster.ServerPort), res.Work, res.Readiness, []client.Request{res.Slow})
	t.Logf("clients %s (work via router) %s (ready); drainwatch %+v %v; marks %+v", client.Summarize(res.Work),
		client.Summarize(res.Readiness), got.Counts, codes(got), got.Marks)
	if got.Counts.RefusedAfterSigterm != 0 || want != 0 || client.Summarize(res.Work)[client.OK] != len(res.Work) {
		t.Errorf("refused_after_sigterm %d, clients refused %d, work %s: want 0, 0, all ok",
			got.Counts.RefusedAfterSigterm, want, client.Summarize(res.Work))
	}
}

// ignoreTermInflight: a shell as PID 1 ignores SIGTERM; three requests are
// in flight when the grace of 3 s runs out and SIGKILL tears them down.
func ignoreTermInflight(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, place placement) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-ignore-term")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeIgnoreTerm, 1)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	place(dep)
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	slow, waitSlow := startSlow(ctx, c, addr, 3)
	if err := c.DeletePod(ctx, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	waitSlow()
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	lost := 3 - client.Summarize(slow)[client.OK]
	t.Logf("clients %s; drainwatch %+v exit %d %v; marks %+v", client.Summarize(slow), got.Counts, got.ExitCode, codes(got), got.Marks)
	if got.Counts.RequestsKilledBySigkill != lost || lost != 3 || got.ExitCode != 137 {
		t.Errorf("requests_killed_by_sigkill %d, clients lost %d, exit %d: want 3, 3, 137", got.Counts.RequestsKilledBySigkill, lost, got.ExitCode)
	}
	for _, want := range []string{correlate.DiagStopSignalIgnored, correlate.DiagRequestsKilled} {
		if !slices.Contains(codes(got), want) {
			t.Errorf("diagnoses %v, want %s", codes(got), want)
		}
	}
}

// prestopMissingBinary: a preStop exec of a binary that does not exist
// fails; the kubelet's FailedPreStopHook Event becomes the diagnosis.
func prestopMissingBinary(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, place placement) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-prestop-fail")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeProtocol, 1, "--drain-delay=0s")
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"/nonexistent/drain"}}}}
	place(dep)
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	if err := c.DeletePod(ctx, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	t.Logf("drainwatch %+v %v; marks %+v", got.Counts, codes(got), got.Marks)
	if got.Marks.PrestopFailed.IsZero() || !slices.Contains(codes(got), correlate.DiagPrestopFailed) {
		t.Errorf("prestop_failed mark %v, diagnoses %v: want the mark and %s", got.Marks.PrestopFailed, codes(got), correlate.DiagPrestopFailed)
	}
}

// ownPodsOnly: every termination a daemon reports is of a pod of its node,
// and no pod is reported by two daemons.
func ownPodsOnly(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	seen := map[string]string{}
	for _, d := range ds {
		for _, term := range d.Terminations() {
			if term.Node != d.node {
				t.Errorf("daemon of %s reports %s of node %s", d.node, term.Pod, term.Node)
			}
			if other, dup := seen[term.PodUID]; dup {
				t.Errorf("%s reported by %s and %s", term.Pod, other, d.node)
			}
			seen[term.PodUID] = d.node
		}
		t.Logf("daemon of %s: %d terminations", d.node, len(d.Terminations()))
		if len(d.Terminations()) == 0 {
			t.Errorf("daemon of %s reports no termination: the scenarios place pods on both nodes", d.node)
		}
	}
	if len(seen) < 3 {
		t.Errorf("%d terminations in all, want at least the 3 of the scenarios", len(seen))
	}
}
