package e2e_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestKubeletStops: the kubelet stops pods with no deletion. A naive
// server evicted under node pressure (status Failed/Evicted, the
// DisruptionTarget condition, its containers stopped, the sandbox gone)
// refuses connections while its endpoint is still ready; a graceful node
// shutdown stops three pods at once. Clients hit each pod straight; the
// counts are theirs exactly, the cause is the scenario's, and the deletion
// that comes later (the pod GC's, a person's) joins nothing: one
// termination per pod.
func TestKubeletStops(t *testing.T) {
	c, ds := startCluster(t, "e2p-", 1)
	t.Run("node-pressure-eviction", func(t *testing.T) { nodePressureEviction(t, c, ds) })
	t.Run("node-shutdown-three-pods", func(t *testing.T) { nodeShutdown(t, c, ds) })
}

func nodePressureEviction(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-evict")
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1))
	waitWatching(ctx, t, ds, pods)
	pod := &pods[0]
	loads := startLoads(ctx, c, pods)
	time.Sleep(time.Second)
	msg := node.EvictionMessage("100Mi", "42Mi", "server", "180Mi")
	if err := c.Nodes[0].Evict(ctx, pod.UID, msg, 5); err != nil {
		t.Fatal(err)
	}
	reqs := loads.stop()
	d := daemonOf(t, ds, pod)
	got := waitComplete(ctx, t, d, string(pod.UID))
	checkKubeletStop(t, got, pod, reqs[0], correlate.CauseNodePressure)
	m := got.Marks
	if m.EndpointsNotReady.IsZero() || !m.ListenerClosed.Before(m.EndpointsNotReady) {
		t.Errorf("listener closed %v, endpoint not ready %v: want the refusals while the endpoint was still ready", m.ListenerClosed, m.EndpointsNotReady)
	}
	deletedLaterCountsOnce(ctx, t, c, d, pod)
}

func nodeShutdown(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-shutdown")
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", workload.ModeNaive, 3))
	waitWatching(ctx, t, ds, pods)
	loads := startLoads(ctx, c, pods)
	time.Sleep(time.Second)
	if err := c.Nodes[0].ShutdownNode(ctx, 10); err != nil {
		t.Fatal(err)
	}
	reqs := loads.stop()
	for i := range pods {
		got := waitComplete(ctx, t, daemonOf(t, ds, &pods[i]), string(pods[i].UID))
		checkKubeletStop(t, got, &pods[i], reqs[i], correlate.CauseNodeShutdown)
	}
}

// podLoads are bounded /work loads, one straight at each pod.
type podLoads struct {
	stopAll context.CancelFunc
	out     []<-chan []client.Request
}

func startLoads(ctx context.Context, c *cluster.Cluster, pods []corev1.Pod) *podLoads {
	lctx, stop := context.WithCancel(ctx)
	l := &podLoads{stopAll: stop}
	for i := range pods {
		addr := cluster.PodAddr(&pods[i], cluster.ServerPort)
		l.out = append(l.out, runLoad(lctx, client.Load{Dial: c.Dial, Target: addr, Path: "/work",
			Interval: 20 * time.Millisecond, Count: 3000, Duration: time.Minute}))
	}
	return l
}

// stop ends the loads (before a replacement pod can get a stopped one's
// address) and returns each pod's requests.
func (l *podLoads) stop() [][]client.Request {
	l.stopAll()
	var out [][]client.Request
	for _, ch := range l.out {
		out = append(out, <-ch)
	}
	return out
}

// checkKubeletStop compares a termination of a pod the kubelet stopped with
// what its clients saw.
func checkKubeletStop(t *testing.T, got correlate.Termination, pod *corev1.Pod, reqs []client.Request, cause string) {
	t.Helper()
	refused := lab.RefusedTo(cluster.PodAddr(pod, cluster.ServerPort), reqs)
	n := got.Counts
	t.Logf("%s: clients %s; drainwatch %+v cause %s (%s) %v", pod.Name, client.Summarize(reqs), n, got.Cause, got.CauseEvidence, codes(got))
	if n.RefusedAfterSigterm != refused || n.RefusedBeforeSigterm != 0 || refused == 0 {
		t.Errorf("%s: refused after %d before %d, clients refused %d: want %d 0 (and some refused)",
			pod.Name, n.RefusedAfterSigterm, n.RefusedBeforeSigterm, refused, refused)
	}
	if got.Cause != cause || got.Container != "" || got.Partial || !got.Marks.DeletionSeen.IsZero() {
		t.Errorf("%s: cause %q container %q partial %v deletion seen %v, want %s of the pod, complete, before any deletion",
			pod.Name, got.Cause, got.Container, got.PartialReasons, got.Marks.DeletionSeen, cause)
	}
}

// deletedLaterCountsOnce deletes the stopped pod (as the pod GC or a
// person would) and checks that the daemon still has one termination of
// it, counted once.
func deletedLaterCountsOnce(ctx context.Context, t *testing.T, c *cluster.Cluster, d *nodeDaemon, pod *corev1.Pod) {
	t.Helper()
	before := terminationsTotal(d)
	if err := c.DeletePod(ctx, pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodGone(ctx, pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // two KernelTails: a second termination would have completed
	n := 0
	for _, term := range d.Terminations() {
		if term.PodUID == string(pod.UID) {
			n++
		}
	}
	if n != 1 || terminationsTotal(d) != before {
		t.Errorf("after the later deletion: %d terminations of %s, terminations_total %v → %v; want 1, unchanged",
			n, pod.Name, before, terminationsTotal(d))
	}
}
