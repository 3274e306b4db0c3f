package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// inflightSlow is how many /slow requests are in flight when SIGKILL comes.
const inflightSlow = 3

// ignoreTermScenario: a shell as PID 1 ignores SIGTERM (grace 3 s); three
// /slow requests (20 s) are in flight, /work arrives every 100 ms for 2.5 s
// from 60 ms after the delete, and again for 1 s once the container is
// gone, so SIGKILL (3 s after the stop signal) cuts the slow ones and the
// last /work meet a dead pod. No /work is in flight between the SIGKILL and
// the container's death: a request the kernel accepts then counts as killed
// (groundtruth.go), and under load that window has lasted 75 ms (a /work
// every 100 ms around it made the killed count 3 or 4 from run to run).
func ignoreTermScenario(ctx context.Context, l *Lab) ([]Result, error) {
	return ignoreTerm(ctx, l, "ignore-term", "lab-ignore-term", false)
}

// ignoreTermIPv6Scenario is ignoreTermScenario with the clients at the
// dual-stack pod's IPv6 address: its blackholed SYNs are to that address.
func ignoreTermIPv6Scenario(ctx context.Context, l *Lab) ([]Result, error) {
	return ignoreTerm(ctx, l, "ipv6/ignore-term", "lab-ipv6-ignore-term", true)
}

func ignoreTerm(ctx context.Context, l *Lab, name, ns string, ipv6 bool) ([]Result, error) {
	dep := cluster.ServerDeployment(ns, "web", workload.ModeIgnoreTerm, 1)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return nil, errorf("deploying", err)
	}
	pod := &pods[0]
	addr, err := podAddr(pod, ipv6)
	if err != nil {
		return nil, err
	}
	l.progress.Step("%s: pod %s on %s at %s: %d × /slow?ms=20000 in flight, delete (grace 3 s), /work every 100 ms for 2.5 s from 60 ms after the delete and for 1 s once the container is gone",
		name, pod.Name, pod.Spec.NodeName, addr, inflightSlow)
	deleted := time.Now()
	slow, work, err := slowThenDelete(ctx, l, pod, addr)
	if err != nil {
		return nil, err
	}
	agent, err := l.Cluster.WaitTerminated(ctx, pod.UID)
	if err != nil {
		return nil, errorf("node agent", err)
	}
	vs, err := l.WaitComplete(ctx, ns, string(pod.UID))
	if err != nil {
		return nil, err
	}
	probes, err := l.Cluster.ProbeRefusals(pod, deleted)
	if err != nil {
		return nil, errorf("kubelet prober", err)
	}
	text := l.timelineCLI(ctx, ns, vs)
	l.progress.Block(sideBySide("clients", fmt.Sprintf("/slow: %s\n/work: %s\nSIGKILL %.3fs after the stop signal\nexit code %d",
		client.Summarize(slow), client.Summarize(work), agent.SIGKILLAt.Sub(agent.StopSignalAt).Seconds(), agent.ExitCode),
		"drainwatch timeline", text, 50))
	l.record(name, ns, vs, text, map[string][]client.Request{"slow": slow, "work": work})
	c, death := vs[0].Counts, Death{SIGKILL: agent.SIGKILLAt, Exit: agent.ExitAt}
	// The server never shuts down (its PID 1 ignores SIGTERM until the
	// SIGKILL): whatever the clients saw reset before the SIGKILL would be
	// a shutdown's reset, and there is none to see.
	return []Result{{Name: name, Namespace: ns, Source: "api", Diagnoses: diagnosisCodes(vs...),
		ClientRefused: RefusedTo(addr, slow, work), DrainwatchRefused: c.RefusedAfterSigterm,
		ClientKilled: KilledBy(addr, death, slow, work), DrainwatchKilled: c.RequestsKilledBySigkill,
		ProberProbeRefused: probes, DrainwatchProbeRefused: c.ProbeRefused,
		ClientResetAtShutdown: ResetAtShutdownTo(addr, death, slow, work), DrainwatchResetAtShutdown: c.ConnectionsResetAtShutdown,
		ClientBlackholed: BlackholedTo(addr, slow, work), DrainwatchBlackholed: c.ConnectionsBlackholed,
		Note: fmt.Sprintf("/slow %s; /work %s; exit code %d", client.Summarize(slow), client.Summarize(work), agent.ExitCode)}}, nil
}

// slowThenDelete starts the /slow requests, lets the server take them,
// deletes the pod and sends /work meanwhile, then after the container is
// gone.
func slowThenDelete(ctx context.Context, l *Lab, pod *corev1.Pod, addr string) (slow, work []client.Request, err error) {
	slow, wait := startSlow(ctx, l, addr, inflightSlow)
	defer wait()
	time.Sleep(200 * time.Millisecond) // being handled, not just queued
	if err := l.Cluster.DeletePod(ctx, pod.Namespace, pod.Name); err != nil {
		return nil, nil, err
	}
	time.Sleep(workPhase)
	if work, err = workLoad(ctx, l, addr, 25, 2500*time.Millisecond); err != nil {
		return nil, nil, err
	}
	if _, err := l.Cluster.WaitTerminated(ctx, pod.UID); err != nil {
		return nil, nil, errorf("node agent", err)
	}
	after, err := workLoad(ctx, l, addr, 10, time.Second)
	return slow, append(work, after...), err
}

// workLoad sends n /work to addr, one every 100 ms.
func workLoad(ctx context.Context, l *Lab, addr string, n int, d time.Duration) ([]client.Request, error) {
	load := client.Load{Dial: l.Cluster.Dial, Target: addr, Path: "/work", Interval: 100 * time.Millisecond,
		Count: n, Duration: d, Timeout: 2 * time.Second}
	return load.Run(ctx)
}

// workPhase is when the ignore-term /work load starts after the delete:
// the stop signal follows the delete by 5-35 ms here (no preStop), so the
// first /work meets a server that has its stop signal. (The node agent
// publishes its stop-signal time only once the container is gone, too late
// to phase on it.) The first load's last /work starts 2.46 s after the
// delete, half a second before the SIGKILL.
const workPhase = 60 * time.Millisecond

// prestopFailsScenario: a preStop exec of a binary that does not exist
// fails (FailedPreStopHook); the stop signal follows at once and the server
// (protocol, no drain delay) closes its listener under the seeds' load.
func prestopFailsScenario(ctx context.Context, l *Lab) ([]Result, error) {
	dep := cluster.ServerDeployment("lab-prestop-fails", "web", workload.ModeProtocol, 1, "--drain-delay=0s")
	dep.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"/nonexistent/drain"}}}}
	r, err := l.seedsOn(ctx, "prestop-fails", dep)
	if err != nil {
		return nil, err
	}
	return []Result{r}, nil
}

// startSlow sends n /slow?ms=20000 to addr, each once the previous one is
// written; reqs holds their records once wait has returned.
func startSlow(ctx context.Context, l *Lab, addr string, n int) (reqs []client.Request, wait func()) {
	reqs = make([]client.Request, n)
	var wg sync.WaitGroup
	for i := range reqs {
		sent := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs[i] = client.Get(ctx, l.Cluster.Dial, addr, "/slow?ms=20000", 30*time.Second, sent)
		}()
		<-sent
	}
	return reqs, wg.Wait
}
