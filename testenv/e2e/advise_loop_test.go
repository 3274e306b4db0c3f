package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestAdviseClosedLoop: a naive Deployment of 3 (no preStop) behind a
// router 1.5 s late, under constant load. A rollout restart loses
// connections: a naive server exits at once, so a few dials are refused
// between its exit and its network's teardown, and the rest until the
// router converges find no pod at all. drainwatch's refusals equal the
// router's refused dials to the replaced pods, and its blackholed
// connections the router's dials that failed otherwise (a timeout, no
// route to host). `drainwatch advise -o patch`, applied with the real
// kubectl, changes the template: a rollout of pods made before it. The
// rollout after that replaces pods that sleep what advise said: refused
// and blackholed 0 by drainwatch's account and the router's.
func TestAdviseClosedLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, ds, adviser := servingCluster(ctx, t, "e2loop-")
	ns := unique("e2e-advise-loop")
	pods := deploy(ctx, t, c, ns, cluster.ServerDeployment(ns, "web", workload.ModeNaive, 3))
	waitWatching(ctx, t, ds, pods)
	r, err := c.StartRouter(ctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: adviseLag})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 3 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	lctx, stopLoad := context.WithCancel(ctx)
	load := client.Load{Dial: c.Dial, Target: r.Addr(), Path: "/work", Interval: 20 * time.Millisecond, Count: 6000, Duration: 2 * time.Minute, Timeout: time.Second}
	done := make(chan struct{})
	go func() { load.Run(lctx); close(done) }()
	defer func() { stopLoad(); <-done }()
	time.Sleep(time.Second)

	before := rollOnce(ctx, t, c, ns, pods, restart(ctx, t, c, ns))
	dwBefore, bhBefore := lostBy(t, ds[0], before)
	lb := lossTo(r.Conns(), before)
	routerBefore, unreachedBefore := lb.refused, lb.blackholed
	t.Logf("rollout without preStop: drainwatch refused %d and blackholed %d; the router's dials refused %d, failed otherwise %d", dwBefore, bhBefore, routerBefore, unreachedBefore)
	// The floor is the blackholes: the stand-in node tears the sandbox
	// down within ms of the exit, the router sends for 1.5 s more (51 and
	// 68 in two runs); the refusals before the teardown can be 0.
	if dwBefore != routerBefore || bhBefore != unreachedBefore || unreachedBefore == 0 {
		t.Fatalf("before advise: drainwatch refused %d and blackholed %d, the router %d and %d (want equal, and the rollout to lose traffic)", dwBefore, bhBefore, routerBefore, unreachedBefore)
	}
	t.Logf("drainwatch advise:\n%s", adviser(ns))
	patch := strings.TrimSpace(adviser(ns, "-o", "patch"))
	// The patch is a rollout itself, but of pods made before it: the
	// pods with the advised sleep are replaced by the rollout after.
	patched := rollOnce(ctx, t, c, ns, webPods(ctx, t, c, ds, ns), func() {
		out, err := c.Kubectl(ctx, "patch", "-n", ns, "deployment/web", "-p", patch)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl patch -p %s: %s", patch, out)
	})
	lostBy(t, ds[0], patched)
	withSleep := webPods(ctx, t, c, ds, ns)
	for _, p := range withSleep {
		if l := p.Spec.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil {
			t.Fatalf("pod %s of the patched template has no preStop sleep: %+v", p.Name, l)
		}
	}
	after := rollOnce(ctx, t, c, ns, withSleep, restart(ctx, t, c, ns))
	dwAfter, bhAfter := lostBy(t, ds[0], after)
	la := lossTo(r.Conns(), after)
	routerAfter, unreachedAfter := la.refused, la.blackholed
	t.Logf("rollout of the pods with the advised sleep: drainwatch refused %d and blackholed %d; the router's dials refused %d, failed otherwise %d", dwAfter, bhAfter, routerAfter, unreachedAfter)
	if dwAfter != 0 || routerAfter != 0 || unreachedAfter != 0 || bhAfter != 0 {
		t.Errorf("after advise: drainwatch refused %d and blackholed %d, the router %d and %d; want 0 = 0, 0 = 0", dwAfter, bhAfter, routerAfter, unreachedAfter)
	}
	t.Logf("drainwatch advise after both rollouts:\n%s", adviser(ns))
}

// restart is `kubectl rollout restart deploy/web`.
func restart(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) func() {
	return func() {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": time.Now().Format(time.RFC3339Nano)}
		if _, err := c.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// webPods are the Deployment's 3 ready pods, once their daemon watches
// them.
func webPods(ctx context.Context, t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, ns string) []corev1.Pod {
	t.Helper()
	pods, err := c.ReadyPods(ctx, ns, "app=web")
	if err != nil || len(pods) != 3 {
		t.Fatalf("ready pods %d, %v", len(pods), err)
	}
	waitWatching(ctx, t, ds, pods)
	return pods
}

// rollOnce makes a rollout with change and returns the replaced pods once
// they are gone.
func rollOnce(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string, old []corev1.Pod, change func()) []corev1.Pod {
	t.Helper()
	change()
	if _, err := c.WaitRolledOut(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if err := c.WaitPodGone(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	return old
}

// lostBy sums the refusals and the blackholed connections of the pods'
// complete terminations.
func lostBy(t *testing.T, d *nodeDaemon, pods []corev1.Pod) (refused, blackholed int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range pods {
		got := waitComplete(ctx, t, d, string(p.UID))
		refused += got.Counts.RefusedAfterSigterm + got.Counts.RefusedBeforeSigterm
		blackholed += got.Counts.ConnectionsBlackholed
		m, at := got.Marks, func(x time.Time) time.Duration { return x.Sub(got.Marks.DeleteRequested) }
		t.Logf("%s: refused %d after, %d before the stop signal, blackholed %d; from delete_requested: killing %v, endpoints_not_ready %v, stop_signal %v, last attempt %v, last blackholed %v, exit %v, pod_gone %v; sources %+v",
			p.Name, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.Counts.ConnectionsBlackholed, at(m.Killing), at(m.EndpointsNotReady), at(m.StopSignal),
			at(got.LastConnAttempt), at(got.LastBlackholed), at(m.Exit), at(m.PodGone), got.RoutingSources)
	}
	return refused, blackholed
}
