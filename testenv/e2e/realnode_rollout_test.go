package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/router"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The real kubelet sends the stop signal 0.05 s to over 1 s after the
// delete call on this loaded machine (testenv/realnode's README), the
// stand-in within milliseconds: the router lags 2 s, not the lab's 1 s, so
// that a pod without preStop still refuses what the router sends it after
// its stop signal, and the preStop sleep is 4 s, so that the router has
// stopped sending before a pod with it gets its stop signal.
const (
	realRouterDelay = 2 * time.Second
	realPreStop     = 4
)

// TestRealNodeRollout: the lab's rolling update on the real node. A naive
// Deployment of 2 pods, one at a time, behind a router that follows
// EndpointSlices realRouterDelay late, under constant load. Revision 1 → 2
// adds preStop sleep to the template (the revision-1 pods replaced have
// none: they refuse); revision 2 → 3 restarts it (the revision-2 pods
// sleep first: nothing refused). Every replaced pod's refusals, counted by
// drainwatch, equal the router's.
func TestRealNodeRollout(t *testing.T) {
	e := startRealNode(t, "e2rr")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-rn-rollout")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 2)
	dep.Spec.Strategy = oneAtATime()
	e.onRealNode(dep)
	rev1 := deploy(ctx, t, e.c, ns, dep)
	waitWatching(ctx, t, e.ds, rev1)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	r, err := e.c.StartRouter(lctx, cluster.RouterConfig{Namespace: ns, Service: "web", Delay: realRouterDelay})
	if err != nil {
		t.Fatal(err)
	}
	for len(r.Backends()) != 2 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	loadDone := startLoadFor(lctx, e.c, r.Addr(), 2*time.Minute)
	time.Sleep(500 * time.Millisecond)
	step1 := time.Now() // the replaced pods were ready before: no start-up probe is counted
	rev2 := e.rollTo(ctx, t, dep, rev1, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Sleep: &corev1.SleepAction{Seconds: realPreStop}}}
	})
	step2 := time.Now()
	e.rollTo(ctx, t, dep, rev2, func(d *appsv1.Deployment) {
		d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": time.Now().Format(time.RFC3339)}
	})
	stopLoad()
	reqs := <-loadDone
	noPreStop := e.checkReplaced(ctx, t, r, rev1, step1)
	withPreStop := e.checkReplaced(ctx, t, r, rev2, step2)
	t.Logf("load %s; router refused: revision-1 pods (no preStop) %d, revision-2 pods (preStop sleep %d s) %d",
		client.Summarize(reqs), noPreStop, realPreStop, withPreStop)
	if noPreStop == 0 || withPreStop != 0 {
		t.Errorf("router refused %d from the pods without preStop and %d from those with it: want some, then none",
			noPreStop, withPreStop)
	}
}

// rollTo applies change to dep, waits for the rollout and for the replaced
// pods (old) to be gone, and returns the new ready pods once drainwatch
// watches them.
func (e *realNodeEnv) rollTo(ctx context.Context, t *testing.T, dep *appsv1.Deployment, old []corev1.Pod, change func(*appsv1.Deployment)) []corev1.Pod {
	t.Helper()
	change(dep)
	if err := e.c.Apply(ctx, dep.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.WaitRolledOut(ctx, dep.Namespace, dep.Name); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if err := e.c.WaitPodGone(ctx, p.Namespace, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := e.c.ReadyPods(ctx, dep.Namespace, "app="+dep.Name)
	if err != nil || len(pods) != int(*dep.Spec.Replicas) {
		t.Fatalf("ready pods of %s: %d, %v", dep.Name, len(pods), err)
	}
	waitWatching(ctx, t, e.ds, pods)
	return pods
}

// checkReplaced compares each replaced pod's termination with the router's
// records, and its probe_refused with the kubelet's log since the step
// began, and returns the router's refusals from them in all.
func (e *realNodeEnv) checkReplaced(ctx context.Context, t *testing.T, r *router.Router, old []corev1.Pod, since time.Time) int {
	t.Helper()
	byBackend := lossByBackend(r.Conns())
	total := 0
	for i := range old {
		p := &old[i]
		got := waitComplete(ctx, t, daemonOf(t, e.ds, p), string(p.UID))
		addr := cluster.PodAddr(p, cluster.ServerPort)
		want := byBackend[addr].refused
		total += want
		m := got.Marks
		probes, err := e.node.ProbeRefusals(p.Namespace+"/"+p.Name, since)
		if err != nil {
			t.Fatal(err)
		}
		// The bridge CNI plugin's node: the SYNs routing sends after the
		// sandbox's teardown are dropped by this node's kernel.
		if got.Counts.ConnectionsBlackholed != byBackend[addr].blackholed {
			dumpBlackholes(t, got, r, addr)
			t.Errorf("%s: drainwatch blackholed %d, the router's dials that failed without a refusal %d", p.Name, got.Counts.ConnectionsBlackholed, byBackend[addr].blackholed)
		}
		if got.Counts.ProbeRefused != probes {
			t.Errorf("%s: probe_refused %d, the kubelet's log has %d", p.Name, got.Counts.ProbeRefused, probes)
		}
		t.Logf("%s: router refused %d and failed otherwise %d, drainwatch after/before %d/%d and blackholed %d, probe_refused %d, stop signal %.3f s after deletion seen, exit %d %.3f s after it, sigkill %v, %v",
			p.Name, want, byBackend[addr].blackholed, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.Counts.ConnectionsBlackholed, got.Counts.ProbeRefused,
			m.StopSignal.Sub(m.DeletionSeen).Seconds(), got.ExitCode, m.Exit.Sub(m.StopSignal).Seconds(), sinceExit(m.Sigkill, m.Exit), codes(got))
		if got.Counts.RefusedAfterSigterm != want || got.Counts.RefusedBeforeSigterm != 0 || got.Partial {
			dumpRouter(t, got, r, addr)
			t.Logf("%s: marks %+v, netns watched %v", p.Name, m, daemonOf(t, e.ds, p).Watching(string(p.UID)))
			t.Errorf("%s: drainwatch refused after/before %d/%d (partial %v), the router saw %d",
				p.Name, got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, got.PartialReasons, want)
		}
		// The naive server exits 0 within the grace; the pause process's
		// SIGKILL and exit 137 when the sandbox stops are not the pod's.
		if got.ExitCode != 0 || !m.Sigkill.IsZero() || slices.Contains(codes(got), correlate.DiagGraceExceeded) {
			t.Errorf("%s: exit %d, sigkill %v, diagnoses %v: want exit 0, no SIGKILL", p.Name, got.ExitCode, m.Sigkill, codes(got))
		}
	}
	return total
}

// sinceExit is "-" or how long after the exit at came.
func sinceExit(at, exit time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%.3f s after the exit", at.Sub(exit).Seconds())
}
