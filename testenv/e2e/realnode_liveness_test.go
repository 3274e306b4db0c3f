package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealNodeLivenessRestart is TestLivenessRestart on the real node: the
// real kubelet's liveness probe fails on /healthz 12 s after the naive
// server starts, the kubelet kills the container through containerd and
// starts it again in the same sandbox. drainwatch's termination of the
// container counts exactly the clients' refusals, as container_restart
// with liveness_restart and no deletion; its probe_refused equals the
// refused probes in the kubelet's own log since the load began (its
// readiness probes of the draining container and of the restarted one
// before it listens).
func TestRealNodeLivenessRestart(t *testing.T) {
	e := startRealNode(t, "e2rl")
	run := livenessRestart(t, e.c, e.ds, e.onRealNode)
	p, got := &run.pod, run.got
	probes, err := e.node.ProbeRefusals(p.Namespace+"/"+p.Name, run.loadStart)
	if err != nil {
		t.Fatal(err)
	}
	m := got.Marks
	t.Logf("kubelet: %s; probes refused %d; drainwatch probe_refused %d, exit %d, stop signal %d %.3f s after Killing, exit %.3f s after it, sigkill %v",
		e.kubeletSays(t, p.Namespace, p.Name), probes, got.Counts.ProbeRefused, got.ExitCode, got.StopSignal,
		m.StopSignal.Sub(m.Killing).Seconds(), m.Exit.Sub(m.StopSignal).Seconds(), sinceExit(m.Sigkill, m.Exit))
	for _, l := range e.kubeletLines(t, p.Namespace+"/"+p.Name, run.loadStart, "Liveness", "Killing container", "ContainerDied", "ContainerStarted") {
		t.Logf("kubelet.log: %s", l)
	}
	if got.Counts.ProbeRefused != probes {
		t.Errorf("probe_refused %d, the kubelet's log has %d", got.Counts.ProbeRefused, probes)
	}
	// The naive server finishes its /slow requests and exits 0 well
	// within the grace: no SIGKILL.
	if got.ExitCode != 0 || !m.Sigkill.IsZero() {
		t.Errorf("exit %d, sigkill %v: want exit 0, no SIGKILL", got.ExitCode, m.Sigkill)
	}
}

// kubeletSays is what the real kubelet reported of the pod: its Killing
// Events (count and message) and the container's restart count and last
// termination.
func (e *realNodeEnv) kubeletSays(t *testing.T, ns, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := e.c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var says strings.Builder
	for _, ev := range evs.Items {
		if ev.Reason == "Killing" || ev.Reason == "Unhealthy" || ev.Reason == "BackOff" {
			fmt.Fprintf(&says, "%s x%d %s %s: %q; ", ev.Reason, ev.Count, ev.Type, ev.Source.Component, ev.Message)
		}
	}
	pod, err := e.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pod.Status.ContainerStatuses {
		fmt.Fprintf(&says, "%s restartCount %d", s.Name, s.RestartCount)
		if l := s.LastTerminationState.Terminated; l != nil {
			fmt.Fprintf(&says, ", last terminated %s exit %d signal %d", l.Reason, l.ExitCode, l.Signal)
		}
	}
	return says.String()
}

// kubeletLines is the real kubelet's log lines about pod at or after since
// that contain any of words: its own times, to the microsecond, where the
// API's Events have seconds.
func (e *realNodeEnv) kubeletLines(t *testing.T, pod string, since time.Time, words ...string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.node.Dir, "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) < 21 || !strings.Contains(l, `pod="`+pod+`"`) || l[1:21] < since.Format("0102 15:04:05.000000") {
			continue
		}
		for _, w := range words {
			if strings.Contains(l, w) {
				lines = append(lines, l)
				break
			}
		}
	}
	return lines
}
