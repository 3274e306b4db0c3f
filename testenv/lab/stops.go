package lab

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/node"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// The stop/ scenarios (issue 12): pods and containers stopped by the
// kubelet or the kernel, with no deletion. Clients hit the pod straight,
// as a load balancer that was not told; each row's note carries the cause
// drainwatch found next to the scenario's.

// background runs a bounded load in the background; the channel gives its
// records once ctx ends or the load is done.
func background(ctx context.Context, ld client.Load) <-chan []client.Request {
	out := make(chan []client.Request, 1)
	go func() {
		reqs, _ := ld.Run(ctx) // ctx's end is how the scenario stops it
		out <- reqs
	}()
	return out
}

// agentOf returns the node agent running pod.
func (l *Lab) agentOf(pod *corev1.Pod) (*node.Agent, error) {
	for i, name := range l.Cluster.NodeNames {
		if name == pod.Spec.NodeName {
			return l.Cluster.Nodes[i], nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s: node %q is not one of the lab's", pod.Namespace, pod.Name, pod.Spec.NodeName)
}

// waitRestarted waits until the pod's first container has been restarted
// once and is ready again, and returns its last terminated state.
func (l *Lab) waitRestarted(ctx context.Context, pod *corev1.Pod) (*corev1.ContainerStateTerminated, error) {
	for {
		p, err := l.Cluster.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && len(p.Status.ContainerStatuses) > 0 {
			s := p.Status.ContainerStatuses[0]
			if s.RestartCount >= 1 && s.Ready && s.LastTerminationState.Terminated != nil {
				return s.LastTerminationState.Terminated, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("container of %s not restarted: %w", pod.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitContainerComplete waits for drainwatch's first complete termination
// of one of the pod's containers (the pod itself keeps running; a later
// restart is another termination).
func (l *Lab) WaitContainerComplete(ctx context.Context, ns string, uid types.UID) (exporter.TerminationView, error) {
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	for {
		vs, err := l.Terminations(ctx, ns)
		for _, v := range vs { // by start: the first restart first
			if err == nil && v.PodUID == string(uid) && v.Container != "" && v.Complete {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return exporter.TerminationView{}, fmt.Errorf("no complete container termination of %s in %s (last error %v): %w", uid, ns, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scaleToZero removes a scenario's pods once it is measured, so a container
// that would fail again (the liveness scenario's) adds nothing to the
// namespace's counters before Prometheus is compared with the rows.
func (l *Lab) scaleToZero(ctx context.Context, ns, name string) error {
	patch := []byte(`{"spec":{"replicas":0}}`)
	_, err := l.Cluster.Client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("scaling %s/%s to 0: %w", ns, name, err)
	}
	return nil
}

// causeNote is the cause drainwatch gave next to the scenario's.
func causeNote(v exporter.TerminationView, want string) string {
	container := "the pod"
	if v.Container != "" {
		container = "container " + v.Container
	}
	return fmt.Sprintf("cause %s (%s) of %s, scenario's %s", v.Cause, v.CauseEvidence, container, want)
}

// livenessUnhealthyAfter is when the liveness scenario's /healthz starts
// failing after each start of its server: long enough for the lab to
// deploy it and start the clients, and for the measurement to end before
// the restarted container fails again (the pods are then scaled away).
const livenessUnhealthyAfter = "10s"

// livenessScenario: the new user. A naive server (it closes its
// listener at the stop signal, then finishes what is in flight) whose
// /healthz fails 10 s after it starts; the kubelet's liveness probe kills
// it, /slow requests of 4 s keep it draining with its listener closed, and
// the pod stays, in its Service, until its readiness probe fails. /work
// every 20 ms and a /slow every second go straight at the pod until the
// restarted container has served a second. No deletion: drainwatch must
// count the refusals in the container's termination.
func livenessScenario(ctx context.Context, l *Lab) ([]Result, error) {
	const name, ns = "stop/liveness-restart", "lab-stop-liveness"
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1, "--unhealthy-after="+livenessUnhealthyAfter)
	// Without a delay the first probe finds nothing listening yet.
	dep.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{InitialDelaySeconds: 3, PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return nil, errorf("deploying", err)
	}
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	l.progress.Step("%s: pod %s on %s at %s: /healthz fails %s after the start; /work every 20 ms and /slow?ms=4000 every second until the restarted container has served 1 s",
		name, pod.Name, pod.Spec.NodeName, addr, livenessUnhealthyAfter)
	// Every probe before the liveness kill passes (the server listens and
	// is ready): the prober's refusals from the load's start are the stop's.
	since := time.Now()
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	workCh := background(lctx, client.Load{Dial: l.Cluster.Dial, Target: addr, Path: "/work", Interval: 20 * time.Millisecond, Count: 2000, Duration: 40 * time.Second})
	slowCh := background(lctx, client.Load{Dial: l.Cluster.Dial, Target: addr, Path: "/slow?ms=4000", Interval: time.Second, Count: 40, Duration: 40 * time.Second, Timeout: 10 * time.Second})
	last, err := l.waitRestarted(ctx, pod)
	if err == nil {
		time.Sleep(time.Second)
	}
	stopLoad()
	work, slow := <-workCh, <-slowCh
	if err != nil {
		return nil, err
	}
	v, err := l.WaitContainerComplete(ctx, ns, pod.UID)
	if err != nil {
		return nil, err
	}
	// The node agent's own record of the kill: the server should drain its
	// /slow within the grace, and a SIGKILL would count what it cut.
	kill, err := l.Cluster.WaitRestarted(ctx, pod.UID)
	if err != nil {
		return nil, errorf("node agent", err)
	}
	rs, err := l.stopResult(ctx, name, pod, v, since, Death{SIGKILL: kill.SIGKILLAt, Exit: kill.ExitAt, StopSignal: kill.StopSignalAt},
		map[string][]client.Request{"work": work, "slow": slow},
		fmt.Sprintf("exit code %d (%s); %s", last.ExitCode, last.Reason, causeNote(v, correlate.CauseContainerRestart)))
	if err != nil {
		return nil, err
	}
	return rs, l.scaleToZero(ctx, ns, dep.Name)
}

// stopResult compares the clients' records of a container's (or pod's)
// stop with drainwatch's termination v and records the scenario.
func (l *Lab) stopResult(ctx context.Context, name string, pod *corev1.Pod, v exporter.TerminationView, since time.Time,
	death Death, reqs map[string][]client.Request, note string) ([]Result, error) {
	r, err := l.stopRow(name, pod, v, since, death, reqs, note)
	if err != nil {
		return nil, err
	}
	vs := []exporter.TerminationView{v}
	text := l.timelineCLI(ctx, pod.Namespace, vs)
	l.progress.Block(sideBySide("clients", strings.ReplaceAll(r.Note, "; ", "\n"), "drainwatch timeline", text, 50))
	l.record(name, pod.Namespace, vs, text, reqs)
	return []Result{r}, nil
}

// stopRow is the row of one pod's (or container's) stop: the clients'
// requests to the pod and its prober's refusals since `since` next to
// drainwatch's termination v.
func (l *Lab) stopRow(name string, pod *corev1.Pod, v exporter.TerminationView, since time.Time,
	death Death, reqs map[string][]client.Request, note string) (Result, error) {
	probes, err := l.Cluster.ProbeRefusals(pod, since)
	if err != nil {
		return Result{}, errorf("kubelet prober", err)
	}
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	var all [][]client.Request
	var summary string
	for _, path := range slices.Sorted(maps.Keys(reqs)) {
		all = append(all, reqs[path])
		summary += fmt.Sprintf("/%s %s; ", path, client.Summarize(reqs[path]))
	}
	c := v.Counts
	return Result{Name: name, Namespace: pod.Namespace, Source: "api", Diagnoses: diagnosisCodes(v),
		ClientRefused: RefusedTo(addr, all...), DrainwatchRefused: c.RefusedAfterSigterm,
		ClientKilled: KilledBy(addr, death, all...), DrainwatchKilled: c.RequestsKilledBySigkill,
		ClientKilledAtExit: KilledAtExitTo(addr, death, all...), DrainwatchKilledAtExit: c.RequestsKilledAtExit,
		ProberProbeRefused: probes, DrainwatchProbeRefused: c.ProbeRefused,
		ClientResetAtShutdown: ResetAtShutdownTo(addr, death, all...), DrainwatchResetAtShutdown: c.ConnectionsResetAtShutdown,
		ClientBlackholed: BlackholedTo(addr, all...), DrainwatchBlackholed: c.ConnectionsBlackholed,
		Note: fmt.Sprintf("%s%s; drainwatch refused before the stop signal %d", summary, note, c.RefusedBeforeSigterm)}, nil
}

// oomScenario: a server with a real memory limit of 64 MiB (the kernel
// enforces it: testenv/node's memlimit.go) is asked to allocate 256 MiB
// while three /slow requests are in flight. The kernel's OOM killer kills
// it (SIGKILL, no stop signal) and the kubelet restarts the container:
// the four requests in flight die with it.
func oomScenario(ctx context.Context, l *Lab) ([]Result, error) {
	const name, ns = "stop/oom-kill", "lab-stop-oom"
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	dep.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return nil, errorf("deploying", err)
	}
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	l.progress.Step("%s: pod %s on %s at %s (memory limit 64Mi): %d × /slow?ms=20000 in flight, then /alloc?mb=256",
		name, pod.Name, pod.Spec.NodeName, addr, inflightSlow)
	reqs, wait := startSlow(ctx, l, addr, inflightSlow)
	time.Sleep(300 * time.Millisecond) // being handled, not just queued
	allocAt := time.Now()
	alloc := client.Get(ctx, l.Cluster.Dial, addr, "/alloc?mb=256", 10*time.Second, nil)
	wait()
	last, err := l.waitRestarted(ctx, pod)
	if err != nil {
		return nil, err
	}
	v, err := l.WaitContainerComplete(ctx, ns, pod.UID)
	if err != nil {
		return nil, err
	}
	// The kernel's kill leaves no node agent record: it came after the
	// /alloc was sent (it caused it), and the container was dead by the
	// first connection the clients saw cut (its sockets die with it).
	death := Death{SIGKILL: allocAt, Exit: firstEnd(append([]client.Request{alloc}, reqs...))}
	return l.stopResult(ctx, name, pod, v, allocAt, death, map[string][]client.Request{"slow": reqs, "alloc": {alloc}},
		fmt.Sprintf("exit code %d (%s); %s", last.ExitCode, last.Reason, causeNote(v, correlate.CauseOOMKill)))
}

// firstEnd is when the first of reqs ended.
func firstEnd(reqs []client.Request) time.Time {
	var first time.Time
	for _, r := range reqs {
		if first.IsZero() || r.End.Before(first) {
			first = r.End
		}
	}
	return first
}

// evictionScenario: the kubelet's eviction manager evicts a naive server
// under memory pressure (the Evicted event, status Failed/Evicted with the
// DisruptionTarget condition, its container stopped with a grace of 5 s,
// the sandbox gone, no deletion). /work every 20 ms straight at the pod
// until the container is stopped: the refusals come while its endpoint
// is still ready.
func evictionScenario(ctx context.Context, l *Lab) ([]Result, error) {
	const name, ns = "stop/node-pressure-eviction", "lab-stop-evict"
	pods, err := l.deploy(ctx, cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1))
	if err != nil {
		return nil, errorf("deploying", err)
	}
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	agent, err := l.agentOf(pod)
	if err != nil {
		return nil, err
	}
	l.progress.Step("%s: pod %s on %s at %s: /work every 20 ms, the kubelet evicts it (memory pressure, grace 5 s) after 1 s",
		name, pod.Name, pod.Spec.NodeName, addr)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	workCh := background(lctx, client.Load{Dial: l.Cluster.Dial, Target: addr, Path: "/work", Interval: 20 * time.Millisecond, Count: 1000, Duration: 20 * time.Second})
	time.Sleep(time.Second)
	since := time.Now()
	err = agent.Evict(ctx, pod.UID, node.EvictionMessage("100Mi", "42Mi", "server", "180Mi"), 5)
	// Stopped before the ReplicaSet's replacement can get the address.
	stopLoad()
	work := <-workCh
	if err != nil {
		return nil, errorf("evicting", err)
	}
	stopped, v, err := l.stopped(ctx, pod)
	if err != nil {
		return nil, err
	}
	m := v.Marks
	ready := "yes"
	if m.EndpointsNotReady.IsZero() || !m.ListenerClosed.Before(m.EndpointsNotReady) {
		ready = "no"
	}
	return l.stopResult(ctx, name, pod, v, since, Death{SIGKILL: stopped.SIGKILLAt, Exit: stopped.ExitAt}, map[string][]client.Request{"work": work},
		fmt.Sprintf("exit code %d; %s; endpoint still ready at the listener's close: %s", stopped.ExitCode, causeNote(v, correlate.CauseNodePressure), ready))
}

// shutdownPods is how many pods the node-shutdown scenario stops.
const shutdownPods = 3

// nodeShutdownScenario: graceful node shutdown (a spot node's reclaim)
// stops three naive servers of one node at once, each with the shutdown's
// grace of 10 s, statuses saying the node is shutting down, no deletion.
// /work every 20 ms straight at each pod until they are stopped. The lab's
// nodes also carry the earlier scenarios' pods, which keep running: the
// node agent stops these three as its whole-node shutdown stops every pod
// (e2e's TestKubeletStops shuts a whole node down).
func nodeShutdownScenario(ctx context.Context, l *Lab) ([]Result, error) {
	const name, ns = "stop/node-shutdown", "lab-stop-shutdown"
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, shutdownPods)
	nodeName := l.Cluster.NodeNames[0]
	dep.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodeName}
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return nil, errorf("deploying", err)
	}
	agent, err := l.agentOf(&pods[0])
	if err != nil {
		return nil, err
	}
	l.progress.Step("%s: %d pods on %s: /work every 20 ms at each, graceful node shutdown (grace 10 s) after 1 s", name, len(pods), nodeName)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loads := make([]<-chan []client.Request, len(pods))
	uids := make([]types.UID, len(pods))
	for i := range pods {
		uids[i] = pods[i].UID
		loads[i] = background(lctx, client.Load{Dial: l.Cluster.Dial, Target: cluster.PodAddr(&pods[i], cluster.ServerPort),
			Path: "/work", Interval: 20 * time.Millisecond, Count: 1000, Duration: 20 * time.Second})
	}
	time.Sleep(time.Second)
	since := time.Now()
	err = agent.ShutdownPods(ctx, uids, 10)
	stopLoad() // before a replacement can get a stopped pod's address
	work := make([][]client.Request, len(pods))
	for i := range loads {
		work[i] = <-loads[i]
	}
	if err != nil {
		return nil, errorf("node shutdown", err)
	}
	return l.shutdownResult(ctx, name, pods, since, work)
}

// shutdownResult is the node-shutdown scenario's one row: the pods' sums
// (Prometheus is compared by namespace), each pod's pairs and cause in the
// note.
func (l *Lab) shutdownResult(ctx context.Context, name string, pods []corev1.Pod, since time.Time, work [][]client.Request) ([]Result, error) {
	sum := Result{Name: name, Namespace: pods[0].Namespace, Source: "api"}
	var vs []exporter.TerminationView
	var notes []string
	clients := map[string][]client.Request{}
	for i := range pods {
		pod := &pods[i]
		stopped, v, err := l.stopped(ctx, pod)
		if err != nil {
			return nil, err
		}
		r, err := l.stopRow(pod.Name, pod, v, since, Death{SIGKILL: stopped.SIGKILLAt, Exit: stopped.ExitAt}, map[string][]client.Request{"work": work[i]},
			fmt.Sprintf("exit code %d; %s", stopped.ExitCode, causeNote(v, correlate.CauseNodeShutdown)))
		if err != nil {
			return nil, err
		}
		addRow(&sum, r)
		if !r.Agree() && sum.Error == "" {
			// The sums could agree where the pods do not: each pod's pairs
			// must be equal too.
			sum.Error = fmt.Sprintf("%s: refused %d/%d, killed %d/%d, probe refused %d/%d, reset at shutdown %d/%d",
				pod.Name, r.ClientRefused, r.DrainwatchRefused, r.ClientKilled, r.DrainwatchKilled, r.ProberProbeRefused,
				r.DrainwatchProbeRefused, r.ClientResetAtShutdown, r.DrainwatchResetAtShutdown)
		}
		vs, clients[pod.Name] = append(vs, v), work[i]
		notes = append(notes, fmt.Sprintf("%s: refused %d/%d, %s", pod.Name, r.ClientRefused, r.DrainwatchRefused, r.Note))
	}
	sum.Diagnoses, sum.Note = diagnosisCodes(vs...), strings.Join(notes, " | ")
	text := l.timelineCLI(ctx, sum.Namespace, vs)
	l.progress.Block(sideBySide("clients", strings.Join(notes, "\n"), "drainwatch timeline", text, 50))
	l.record(name, sum.Namespace, vs, text, clients)
	return []Result{sum}, nil
}

// addRow adds r's pairs to sum.
func addRow(sum *Result, r Result) {
	sum.ClientRefused += r.ClientRefused
	sum.DrainwatchRefused += r.DrainwatchRefused
	sum.ClientKilled += r.ClientKilled
	sum.DrainwatchKilled += r.DrainwatchKilled
	sum.ClientKilledAtExit += r.ClientKilledAtExit
	sum.DrainwatchKilledAtExit += r.DrainwatchKilledAtExit
	sum.ProberProbeRefused += r.ProberProbeRefused
	sum.DrainwatchProbeRefused += r.DrainwatchProbeRefused
	sum.ClientResetAtShutdown += r.ClientResetAtShutdown
	sum.DrainwatchResetAtShutdown += r.DrainwatchResetAtShutdown
	sum.ClientBlackholed += r.ClientBlackholed
	sum.DrainwatchBlackholed += r.DrainwatchBlackholed
}

// stopped waits for the node agent's record of pod's stop and for
// drainwatch's completed termination of it.
func (l *Lab) stopped(ctx context.Context, pod *corev1.Pod) (node.Termination, exporter.TerminationView, error) {
	rec, err := l.Cluster.WaitTerminated(ctx, pod.UID)
	if err != nil {
		return rec, exporter.TerminationView{}, errorf("node agent", err)
	}
	vs, err := l.WaitComplete(ctx, pod.Namespace, string(pod.UID))
	if err != nil {
		return rec, exporter.TerminationView{}, err
	}
	return rec, vs[0], nil
}
