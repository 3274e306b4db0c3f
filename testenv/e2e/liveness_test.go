package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/lab"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// TestLivenessRestart: the new user. A naive server (it closes its
// listener at the stop signal, then finishes what is in flight) whose
// /healthz fails 12 s after it starts; the kubelet's liveness probe kills
// it ("Container server failed liveness probe, will be restarted"), /slow
// requests of 4 s keep it draining with its listener closed, and the pod
// stays, Ready until its readiness probe fails. Clients hit the pod
// straight: every refusal they see is one drainwatch must count, in the
// container's termination (never deleted), with its own cause and
// diagnosis, attributed to the pod's workload and revision.
func TestLivenessRestart(t *testing.T) {
	c, ds := startCluster(t, "e2l-", 1)
	run := livenessRestart(t, c, ds, anyNode)
	// The kubelet's refused probes, from the node agent's own log: a probe
	// whose node-local sender drainwatch missed would count as a client's
	// refusal (a CI run once counted 2 refusals more than the clients saw,
	// its sources 165 from the clients and 5 probes, 2 with no sender).
	probes, err := c.ProbeRefusals(&run.pod, run.got.Marks.StopSignal)
	must(t, err)
	if probes != run.got.Counts.ProbeRefused {
		t.Errorf("probe_refused %d, the prober's log %d; sources %+v", run.got.Counts.ProbeRefused, probes, run.got.Sources)
	}
	if t.Failed() {
		logProbes(t, c, &run.pod, run.got.Marks.StopSignal)
	}
}

// logProbes logs the prober's attempts at the pod since a time: what a
// count that differs from the clients' is compared with next.
func logProbes(t *testing.T, c *cluster.Cluster, pod *corev1.Pod, since time.Time) {
	t.Helper()
	for i, name := range c.NodeNames {
		if name != pod.Spec.NodeName {
			continue
		}
		attempts, _, err := c.Nodes[i].ProbeLog()
		if err != nil {
			t.Logf("prober's log: %v", err)
			return
		}
		for _, a := range attempts {
			if a.Pod == pod.Namespace+"/"+pod.Name && !a.End.Before(since) {
				t.Logf("probe %s %s %s %s → %s (%s) %s", a.Probe, a.Op, a.Target, a.Start.Format("15:04:05.000000"),
					a.End.Format("15:04:05.000000"), a.Outcome, a.Err)
			}
		}
	}
}

// livenessRun is what livenessRestart leaves to check further: the pod,
// drainwatch's termination of its container, and when the load began.
type livenessRun struct {
	pod       corev1.Pod
	got       correlate.Termination
	loadStart time.Time
}

// livenessRestart runs TestLivenessRestart's scenario on the node place
// puts the pod on and checks drainwatch's container termination against
// the clients.
func livenessRestart(t *testing.T, c *cluster.Cluster, ds []*nodeDaemon, place placement) livenessRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := unique("e2e-liveness")
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1, "--unhealthy-after=12s")
	// The kubelet probes from the container's start: without a delay the
	// first probe finds nothing listening yet and kills it.
	dep.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{InitialDelaySeconds: 3, PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	place(dep)
	pods := deploy(ctx, t, c, ns, dep)
	waitWatching(ctx, t, ds, pods)
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)

	// Load until the restarted container has served a second: 20 ms /work,
	// and a /slow of 4 s every second so the stop finds ~4 in flight.
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadStart := time.Now()
	work := runLoad(lctx, client.Load{Dial: c.Dial, Target: addr, Path: "/work", Interval: 20 * time.Millisecond, Count: 3000, Duration: time.Minute})
	slow := runLoad(lctx, client.Load{Dial: c.Dial, Target: addr, Path: "/slow?ms=4000", Interval: time.Second, Count: 60, Duration: time.Minute, Timeout: 10 * time.Second})
	waitRestarted(ctx, t, c, pod)
	time.Sleep(time.Second)
	stopLoad()
	works, slows := <-work, <-slow

	got := waitContainerTermination(ctx, t, daemonOf(t, ds, pod), string(pod.UID))
	refused := lab.RefusedTo(addr, works, slows)
	n := got.Counts
	t.Logf("clients: work %s, slow %s; drainwatch %+v cause %s (%s) %v marks %+v", client.Summarize(works),
		client.Summarize(slows), n, got.Cause, got.CauseEvidence, codes(got), got.Marks)
	if n.RefusedAfterSigterm != refused || n.RefusedBeforeSigterm != 0 || refused == 0 || n.RequestsKilledBySigkill != 0 {
		t.Errorf("refused after %d before %d killed %d, clients refused %d: want %d 0 0 (and some refused)",
			n.RefusedAfterSigterm, n.RefusedBeforeSigterm, n.RequestsKilledBySigkill, refused, refused)
	}
	if got.Cause != correlate.CauseContainerRestart || got.Container != "server" || !slices.Contains(codes(got), correlate.DiagLivenessRestart) {
		t.Errorf("cause %q container %q diagnoses %v, want container_restart of server with %s",
			got.Cause, got.Container, codes(got), correlate.DiagLivenessRestart)
	}
	if got.Workload.Kind != "Deployment" || got.Workload.Name != "web" || got.Workload.Revision != "1" || got.Partial {
		t.Errorf("workload %+v partial %v, want Deployment web revision 1, complete", got.Workload, got.PartialReasons)
	}
	if !got.Marks.DeletionSeen.IsZero() || got.Marks.Killing.IsZero() || got.Marks.StopSignal.IsZero() || got.Marks.Exit.IsZero() {
		t.Errorf("marks %+v: want Killing, a stop signal and an exit, no deletion", got.Marks)
	}
	return livenessRun{pod: *pod, got: got, loadStart: loadStart}
}

// runLoad runs l in the background; the channel gives its records.
func runLoad(ctx context.Context, l client.Load) <-chan []client.Request {
	out := make(chan []client.Request, 1)
	go func() {
		reqs, _ := l.Run(ctx)
		out <- reqs
	}()
	return out
}

// waitRestarted waits until the pod's container has been restarted once
// and is ready again.
func waitRestarted(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		s := p.Status.ContainerStatuses[0]
		return s.RestartCount >= 1 && s.Ready, nil
	})
	if err != nil {
		t.Fatalf("container of %s not restarted: %v", pod.Name, err)
	}
}

// waitContainerTermination waits for the daemon's complete termination of
// one of the pod's containers (the pod itself still runs).
func waitContainerTermination(ctx context.Context, t *testing.T, d *nodeDaemon, uid string) correlate.Termination {
	t.Helper()
	var got correlate.Termination
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, term := range d.Terminations() {
			if term.PodUID == uid && term.Container != "" && term.Complete {
				got = term
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no complete container termination of %s on %s: %v", uid, d.node, err)
	}
	return got
}
