package lab

import (
	"context"
	"fmt"
	"strings"
	"syscall"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/correlate"
	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// seedsCase is one server of the seeds' experiment; ipv6 sends the
// clients to the pod's IPv6 address.
type seedsCase struct {
	name, ns, mode string
	args           []string
	ipv6           bool
}

var (
	seedsNaive           = seedsCase{"seeds/naive", "lab-seeds-naive", workload.ModeNaive, nil, false}
	seedsProtocol        = seedsCase{"seeds/protocol-1.5s", "lab-seeds-protocol", workload.ModeProtocol, []string{"--drain-delay=1500ms"}, false}
	seedsProtocolNoDelay = seedsCase{"seeds/protocol-0s", "lab-seeds-protocol-0s", workload.ModeProtocol, []string{"--drain-delay=0s"}, false}
	// The naive server of a dual-stack pod, its clients at its IPv6 address
	// (the pod's second: status.podIP is its IPv4 one).
	seedsNaiveIPv6 = seedsCase{"ipv6/seeds-naive", "lab-ipv6-seeds-naive", workload.ModeNaive, nil, true}
)

// seedsScenario runs the seeds' experiment on one pod of the case's server.
func seedsScenario(c seedsCase) func(context.Context, *Lab) ([]Result, error) {
	return func(ctx context.Context, l *Lab) ([]Result, error) {
		dep := cluster.ServerDeployment(c.ns, "web", c.mode, 1, c.args...)
		r, err := l.seedsOnAt(ctx, c.name, dep, c.ipv6)
		if err != nil {
			return nil, err
		}
		return []Result{r}, nil
	}
}

// seedsOn deploys dep (one replica) and runs the seeds' experiment
// straight at its pod, as a load balancer that was not told: one /slow in
// flight, the pod deleted through the API, then /work every 20 ms and /ready
// every 50 ms for one second.
func (l *Lab) seedsOn(ctx context.Context, name string, dep *appsv1.Deployment) (Result, error) {
	return l.seedsOnAt(ctx, name, dep, false)
}

// seedsOnAt is seedsOn with the clients at the pod's IPv6 address when ipv6
// is set.
func (l *Lab) seedsOnAt(ctx context.Context, name string, dep *appsv1.Deployment, ipv6 bool) (Result, error) {
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return Result{}, errorf("deploying", err)
	}
	pod := &pods[0]
	addr, err := podAddr(pod, ipv6)
	if err != nil {
		return Result{}, err
	}
	l.progress.Step("%s: pod %s on %s at %s: /slow in flight, delete, then /work every 20 ms and /ready every 50 ms for 1 s",
		name, pod.Name, pod.Spec.NodeName, addr)
	res, err := l.Cluster.SeedsAt(ctx, pod, addr, addr)
	if err != nil {
		return Result{}, errorf("seeds' clients", err)
	}
	return l.seedsResult(ctx, name, dep.Namespace, pod, res, addr, addr, "")
}

// podAddr is the pod's server address: its IPv6 one when ipv6 is set.
func podAddr(pod *corev1.Pod, ipv6 bool) (string, error) {
	if !ipv6 {
		return cluster.PodAddr(pod, cluster.ServerPort), nil
	}
	if a := cluster.PodAddr6(pod, cluster.ServerPort); a != "" {
		return a, nil
	}
	return "", fmt.Errorf("pod %s lists no IPv6 address (status.podIPs %v)", pod.Name, pod.Status.PodIPs)
}

// seedsResult waits for the seeds' victim to be terminated and for
// drainwatch's record, and compares them: /work went to work (the pod, or
// a Service), /ready and /slow to the pod at addr.
func (l *Lab) seedsResult(ctx context.Context, name, ns string, pod *corev1.Pod, res client.SeedsResult, addr, work, note string) (Result, error) {
	agent, err := l.Cluster.WaitTerminated(ctx, pod.UID)
	if err != nil {
		return Result{}, errorf("node agent", err)
	}
	l.progress.Step("%s: clients done, container exited %d; waiting for drainwatch's termination to be complete", name, agent.ExitCode)
	vs, err := l.WaitComplete(ctx, ns, string(pod.UID))
	if err != nil {
		return Result{}, err
	}
	probes, err := l.Cluster.ProbeRefusals(pod, res.StopAt)
	if err != nil {
		return Result{}, errorf("kubelet prober", err)
	}
	atPod := [][]client.Request{res.Readiness, {res.Slow}}
	text := l.timelineCLI(ctx, ns, vs)
	l.progress.Block(sideBySide("clients (0 = the delete)", res.Timeline(), "drainwatch timeline (0 = the stop signal)", text, 50))
	l.record(name, ns, vs, text, res)
	v, death := vs[0], Death{SIGKILL: agent.SIGKILLAt, Exit: agent.ExitAt}
	return Result{
		Name: name, Namespace: ns, Source: "api", Diagnoses: diagnosisCodes(vs...),
		ClientRefused:      RefusedTo(work, res.Work) + RefusedTo(addr, atPod...),
		DrainwatchRefused:  v.Counts.RefusedAfterSigterm,
		ClientKilled:       KilledBy(work, death, res.Work) + KilledBy(addr, death, atPod...),
		DrainwatchKilled:   v.Counts.RequestsKilledBySigkill,
		ProberProbeRefused: probes, DrainwatchProbeRefused: v.Counts.ProbeRefused,
		ClientResetAtShutdown:     ResetAtShutdownTo(work, death, res.Work) + ResetAtShutdownTo(addr, death, atPod...),
		DrainwatchResetAtShutdown: v.Counts.ConnectionsResetAtShutdown,
		ClientBlackholed:          BlackholedTo(work, res.Work) + BlackholedTo(addr, atPod...),
		DrainwatchBlackholed:      v.Counts.ConnectionsBlackholed,
		Note: fmt.Sprintf("%s/work %s; /ready %s; /slow %s; exit code %d; %s; %s; drainwatch refused before the stop signal %d%s",
			note, client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, agent.ExitCode,
			stopSignalNote(v, agent.StopSignal), listenerNote(v), v.Counts.RefusedBeforeSigterm, sourcesNote(v.RoutingSources)),
	}, nil
}

// listenerNote says when drainwatch saw the pod's last listener close,
// relative to the stop signal and the server's exit (the process whose
// exit drainwatch names, else the container's init: under tini, node's,
// not tini's): every server of the lab closes its listener, the scenario
// says when (at the stop signal, at its exit).
func listenerNote(v exporter.TerminationView) string {
	m := v.Marks
	if m.ListenerClosed.IsZero() {
		return "no listener_closed mark"
	}
	exit := m.Exit
	if !v.Death.Time.IsZero() {
		exit = v.Death.Time
	}
	where := "before the exit"
	if !m.ListenerClosed.Before(exit) {
		where = "at the exit"
	}
	return fmt.Sprintf("listener closed %.3fs after the stop signal, %s", m.ListenerClosed.Sub(m.StopSignal).Seconds(), where)
}

// stopSignalNote names the stop signal drainwatch saw, where it came from
// (the API's status.stopSignal, or none there: the image's or the default)
// and what the node agent sent.
func stopSignalNote(v exporter.TerminationView, sent syscall.Signal) string {
	api := "none in the API"
	if v.StopSignalAPI != 0 {
		api = "API " + collector.SignalName(v.StopSignalAPI)
	}
	return fmt.Sprintf("stop signal %s (%s; node agent sent %s)", exporter.StopSignalName(v.Termination), api,
		collector.SignalName(uint32(sent)))
}

// sourcesNote lists the routing sources drainwatch found after
// endpoints_not_ready: "; routing sources: node lab-1 0.812s (12 accepted,
// 3 refused)".
func sourcesNote(ss []correlate.RoutingSource) string {
	if len(ss) == 0 {
		return ""
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s %s (%d accepted, %d refused, %d reset on reuse)",
			s.Source, correlate.FormatSecondsMs(s.Lag), s.Accepted, s.Refused, s.ResetOnReuse)
	}
	return "; routing sources: " + strings.Join(parts, ", ")
}
