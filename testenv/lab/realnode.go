package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/testenv/client"
	"github.com/drainwatch/drainwatch/testenv/cluster"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/realnode"
	"github.com/drainwatch/drainwatch/testenv/workload"
)

// realWindow is how long the seeds' clients send after the delete call on
// the real node: its kubelet sends the stop signal 0.01–1.7 s after it on
// this machine (the stand-in within milliseconds), so the seeds' 1 s could
// end before it.
const realWindow = 3 * time.Second

// startRealNode starts the real node after the stand-ins, on their fabric,
// with the workload server's image.
func (l *Lab) startRealNode(ctx context.Context) error {
	img, err := realnode.WorkloadImage(ctx)
	if err != nil {
		return err
	}
	index := len(l.Cluster.NodeNames) + 1
	if index >= netlab.MaxNodes {
		return fmt.Errorf("real node index %d out of range", index)
	}
	l.progress.Step("starting the real node (kubelet, containerd, runc, CNI)")
	l.RealNode, err = realnode.Start(ctx, realnode.Config{Name: l.cfg.NodePrefix + "real", Index: index,
		Fabric: l.Cluster.Fabric, Kubeconfig: l.Cluster.Kubeconfig, Images: []realnode.Image{img}, Log: l.cfg.Log})
	if err != nil {
		return fmt.Errorf("starting the real node: %w", err)
	}
	l.progress.Step("real node %s Ready in %v (%s)", l.RealNode.Name, l.RealNode.StartupTime.Round(time.Millisecond), l.RealNode.Dir)
	return nil
}

// stopRealNode closes the real node and removes its Node.
func (l *Lab) stopRealNode() error {
	if l.RealNode == nil {
		return nil
	}
	name := l.RealNode.Name
	err := l.RealNode.Close()
	l.RealNode = nil
	if l.Cluster == nil {
		return err
	}
	derr := l.Cluster.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(derr) {
		derr = nil
	}
	return errors.Join(err, derr)
}

// nodeNames are the nodes the lab runs a daemon for: the stand-ins and the
// real node.
func (l *Lab) nodeNames() []string {
	names := append([]string(nil), l.Cluster.NodeNames...)
	if l.RealNode != nil {
		names = append(names, l.RealNode.Name)
	}
	return names
}

// onRealNode pins dep's pods to the real node (realnode.Pin): the only
// pods the real node's taint admits.
func (l *Lab) onRealNode(dep *appsv1.Deployment) {
	realnode.Pin(&dep.Spec.Template.Spec, l.RealNode.Name)
}

// realSeedsScenario: the seeds' experiment with the naive server on the
// real node, the clients straight at the pod for realWindow. The probe
// pair's ground truth is the real kubelet's own log of its refused probes.
// The container's stop comes from the real kubelet's log (its kill with
// the grace left, and PLEG's exit code): the naive server exits within its
// grace, so the killed pair is 0 = 0 unless the grace ran out.
func realSeedsScenario(ctx context.Context, l *Lab) ([]Result, error) {
	const name, ns = "real/seeds-naive", "lab-real-seeds"
	dep := cluster.ServerDeployment(ns, "web", workload.ModeNaive, 1)
	l.onRealNode(dep)
	pods, err := l.deploy(ctx, dep)
	if err != nil {
		return nil, errorf("deploying", err)
	}
	pod := &pods[0]
	addr := cluster.PodAddr(pod, cluster.ServerPort)
	l.progress.Step("%s: pod %s on %s at %s: /slow in flight, delete, then /work every 20 ms and /ready every 50 ms for %v",
		name, pod.Name, pod.Spec.NodeName, addr, realWindow)
	res, err := client.Seeds{Dial: l.Cluster.Dial, Target: addr, Pod: addr, Window: realWindow,
		Stop: func(ctx context.Context) error { return l.Cluster.DeletePod(ctx, ns, pod.Name) }}.Run(ctx)
	if err != nil {
		return nil, errorf("seeds' clients", err)
	}
	vs, err := l.WaitComplete(ctx, ns, string(pod.UID))
	if err != nil {
		return nil, err
	}
	probes, err := l.RealNode.ProbeRefusals(ns+"/"+pod.Name, res.StopAt)
	if err != nil {
		return nil, errorf("kubelet log", err)
	}
	all := [][]client.Request{res.Work, res.Readiness, {res.Slow}}
	text := l.timelineCLI(ctx, ns, vs)
	l.progress.Block(sideBySide("clients (0 = the delete)", res.Timeline(), "drainwatch timeline (0 = the stop signal)", text, 50))
	l.record(name, ns, vs, text, res)
	stop, err := l.RealNode.ContainerStop(ns+"/"+pod.Name, string(pod.UID), "server", res.StopAt)
	if err == nil && stop.Finished.IsZero() {
		err = fmt.Errorf("the kubelet's log has no exit of %s's container after its kill at %v", pod.Name, stop.Killing)
	}
	if err != nil {
		return nil, errorf("kubelet log", err)
	}
	// The real kubelet's own record of the stop: a SIGKILL (exit 137 at
	// the end of the grace it logged) counts what it cut.
	v, death := vs[0], Death{SIGKILL: stop.SIGKILLAt(), Exit: stop.Finished, StopSignal: stop.Killing}
	return []Result{{
		Name: name, Namespace: ns, Source: "api", Diagnoses: diagnosisCodes(vs...),
		ClientRefused: RefusedTo(addr, all...), DrainwatchRefused: v.Counts.RefusedAfterSigterm,
		ClientKilled: KilledBy(addr, death, all...), DrainwatchKilled: v.Counts.RequestsKilledBySigkill,
		ProberProbeRefused: probes, DrainwatchProbeRefused: v.Counts.ProbeRefused,
		ClientResetAtShutdown: ResetAtShutdownTo(addr, death, all...), DrainwatchResetAtShutdown: v.Counts.ConnectionsResetAtShutdown,
		ClientBlackholed: BlackholedTo(addr, all...), DrainwatchBlackholed: v.Counts.ConnectionsBlackholed,
		Note: fmt.Sprintf("/work %s; /ready %s; /slow %s; exit code %d (drainwatch); stop signal %.3f s after the delete call; drainwatch refused before the stop signal %d",
			client.Summarize(res.Work), client.Summarize(res.Readiness), res.Slow.Outcome, v.ExitCode,
			v.Marks.StopSignal.Sub(res.StopAt).Seconds(), v.Counts.RefusedBeforeSigterm),
	}}, nil
}
