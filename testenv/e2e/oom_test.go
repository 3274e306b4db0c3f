package e2e_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestOOMKill: a server with a real memory limit of 64 MiB (enforced by the
// kernel: this host's cgroup v1 memory controller, see testenv/node's
// memlimit.go) is asked to allocate 256 MiB while three /slow requests are
// in flight. The kernel's OOM killer kills it (SIGKILL, no stop signal),
// the kubelet restarts the container; every request in flight dies with
// it, and drainwatch counts exactly those, in the container's termination,
// cause oom_kill.
func TestOOMKill(t *testing.T) {
	c, ds := startCluster(t, "e2o-", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := unique("e2e-oom")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	dep.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)

	var wg sync.WaitGroup
	reqs := make([]client.Request, 4)
	for i := range 3 {
		sent := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs[i] = client.Get(ctx, c.Dial, addr, "/slow?ms=20000", 30*time.Second, sent)
		}()
		<-sent
	}
	time.Sleep(300 * time.Millisecond) // the server has read them
	reqs[3] = client.Get(ctx, c.Dial, addr, "/alloc?mb=256", 10*time.Second, nil)
	wg.Wait()
	lost := 0
	for _, r := range reqs {
		if r.Outcome != client.OK {
			lost++
		}
	}

	got := waitContainerTermination(ctx, t, daemonOf(t, ds, pod), string(pod.UID))
	t.Logf("clients %s; drainwatch %+v exit %d cause %s (%s) %v marks %+v", client.Summarize(reqs), got.Counts,
		got.ExitCode, got.Cause, got.CauseEvidence, codes(got), got.Marks)
	if got.Counts.RequestsKilledBySigkill != lost || lost != 4 || got.ExitCode != 137 {
		t.Errorf("requests_killed_by_sigkill %d, clients lost %d, exit %d: want 4, 4, 137", got.Counts.RequestsKilledBySigkill, lost, got.ExitCode)
	}
	if got.Cause != correlate.CauseOOMKill || got.Container != "server" || !got.Marks.StopSignal.IsZero() || got.Partial ||
		!slices.Contains(codes(got), correlate.DiagOOMKilled) {
		t.Errorf("cause %q container %q stop signal %v partial %v diagnoses %v, want oom_kill of server, no stop signal, complete, %s",
			got.Cause, got.Container, got.Marks.StopSignal, got.PartialReasons, codes(got), correlate.DiagOOMKilled)
	}
}
