package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
)

// seedsRun is the seeds' experiment run on one pod: what the clients saw
// (res, and want, the refusals they counted) and what drainwatch saw (got).
type seedsRun struct {
	victim *corev1.Pod
	addr   string
	res    client.SeedsResult
	got    correlate.Termination
	want   int
}

// runSeeds deploys dep (one replica), waits until drainwatch watches its
// pod, deletes it under the seeds' clients and waits for the termination
// drainwatch reports.
func runSeeds(ctx context.Context, t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, ns string, dep *appsv1.Deployment) seedsRun {
	return runSeedsFor(ctx, t, c, ds, ns, dep, 0)
}

// runSeedsFor is runSeeds with the clients sending for window after the
// deletion (the seeds' 1 s when zero).
func runSeedsFor(ctx context.Context, t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, ns string, dep *appsv1.Deployment, window time.Duration) seedsRun {
	t.Helper()
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	victim := &pods[0]
	addr := cluster.PodAddr(victim, cluster.ServerPort)
	res, err := client.Seeds{Dial: c.Dial, Target: addr, Pod: addr, Window: window,
		Stop: func(ctx context.Context) error { return c.DeletePod(ctx, victim.Namespace, victim.Name) }}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := waitComplete(ctx, t, daemonOf(t, ds, victim), string(victim.UID))
	want := lab.RefusedTo(addr, res.Work, res.Readiness, []client.Request{res.Slow})
	return seedsRun{victim: victim, addr: addr, res: res, got: got, want: want}
}

// assertSeedsRefusals checks drainwatch's counts against the clients' and
// the prober's: refusals after the stop signal exactly as the clients saw
// them (at least 10, or the seeds' failure was not reproduced), none
// before, and probe_refused exactly the prober's.
func assertSeedsRefusals(t *testing.T, got correlate.Termination, res client.SeedsResult, want, probes int) {
	t.Helper()
	if got.Counts.RefusedAfterSigterm != want || got.Counts.RefusedBeforeSigterm != 0 || want < 10 {
		dumpRefused(t, got, res.StopAt, res.Work, res.Readiness, []client.Request{res.Slow})
		t.Errorf("refused after/before the stop signal %d/%d, clients saw %d refused (want ≥ 10 to reproduce the seeds)",
			got.Counts.RefusedAfterSigterm, got.Counts.RefusedBeforeSigterm, want)
	}
	if got.Counts.ProbeRefused != probes {
		t.Errorf("probe_refused %d, the kubelet prober saw %d refused", got.Counts.ProbeRefused, probes)
	}
}

// proberRefused is how many of the kubelet prober's probes to the victim
// were refused from the stop signal on.
func (r seedsRun) proberRefused(t *testing.T, c *cluster.Cluster) int {
	t.Helper()
	probes, err := c.ProbeRefusals(r.victim, r.res.StopAt)
	if err != nil {
		t.Fatal(err)
	}
	return probes
}

// startSlow sends n requests of 20 s to addr and returns once the server
// handles each (not just queues it); wait returns when all have an outcome.
func startSlow(ctx context.Context, c *cluster.Cluster, addr string, n int) (slow []client.Request, wait func()) {
	var wg sync.WaitGroup
	slow = make([]client.Request, n)
	for i := range slow {
		sent := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			slow[i] = client.Get(ctx, c.Dial, addr, "/slow?ms=20000", 30*time.Second, sent)
		}()
		<-sent
	}
	time.Sleep(200 * time.Millisecond) // being handled, not just queued
	return slow, wg.Wait
}
