package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPreStopExecAndHTTPGet: an exec hook runs inside the container's PID
// namespace (it sees the server as PID 1), an httpGet hook reaches the pod
// from the node; each takes a bit over 1 s, subtracted as 1.
func TestPreStopExecAndHTTPGet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-hooks")
	seen := filepath.Join(t.TempDir(), "exec-namespaces")
	for _, tc := range []struct {
		name string
		hook corev1.LifecycleHandler
	}{
		{"exec", corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c",
			"sleep 1.1; readlink /proc/self/ns/pid /proc/self/ns/net > " + seen + "; grep ^0:: /proc/self/cgroup >> " + seen}}}},
		{"httpget", corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/slow?ms=1100", Port: intstr.FromString("http")}}},
	} {
		hook := tc.hook
		d := l.runAndDelete(t, ctx, l.serverPod(tc.name, "naive", 5, &hook))
		got := fmt.Sprintf("%s: elapsed=%d stop_timeout=%d err=%q exit=%d", tc.name, d.term.PreStopElapsed, d.term.StopTimeout, d.term.PreStopErr, d.term.ExitCode)
		if want := tc.name + `: elapsed=1 stop_timeout=4 err="" exit=0`; got != want {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
		if tc.name == "exec" {
			checkExecNamespaces(t, seen, d)
		}
	}
}

// checkExecNamespaces: the exec hook ran in the init's PID and network
// namespaces and in the container's cgroup, like a CRI exec. (/proc is the
// host's: containers share the root mount namespace.)
func checkExecNamespaces(t *testing.T, seen string, d deleted) {
	t.Helper()
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	c := d.info.Containers[0]
	root, _ := node.Cgroup2Mount()
	want := fmt.Sprintf("%s\nnet:[%d]\n0::%s\n", d.initPIDNS, d.info.NetnsInode, strings.TrimPrefix(c.Cgroup, root))
	if string(b) != want {
		t.Fatalf("exec hook saw\n%s\nwant\n%s", b, want)
	}
}

// TestLivenessFailureRestartsContainer: a failing exec liveness probe kills
// the container (Killing with the probe's message) and the restart policy
// brings up a new run: restartCount 1, lastState terminated with exit 0.
func TestLivenessFailureRestartsContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-liveness")
	pod := l.serverPod("web", "naive", 2, nil)
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, InitialDelaySeconds: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/false"}}}}
	created, h := l.create(t, ctx, pod)
	first := h.until(t, ctx, "Running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}).Status.ContainerStatuses[0].ContainerID
	got := h.until(t, ctx, "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	cs := got.Status.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if last == nil || last.ExitCode != 0 || last.ContainerID != first || cs.ContainerID == first {
		t.Fatalf("after restart: id %s, last state %+v (first run %s)", cs.ContainerID, last, first)
	}
	var killing, unhealthy []string
	for _, e := range l.events(t, ctx, string(created.UID)) {
		switch e.Reason {
		case "Killing":
			killing = append(killing, e.Message)
		case "Unhealthy":
			if !strings.HasPrefix(e.Message, "Liveness") {
				continue // the readiness probe fails too while the server starts
			}
			unhealthy = append(unhealthy, fmt.Sprintf("%q count>=2:%t", e.Message, e.Count >= 2))
		}
	}
	// Every failure of the probe (two per run at least) is one Event whose
	// count grows, as the kubelet's event correlator makes it.
	if got := strings.Join(unhealthy, "|"); got != `"Liveness probe failed: " count>=2:true` {
		t.Errorf("Unhealthy events: %s", got)
	}
	if want := "Container srv failed liveness probe, will be restarted"; len(killing) == 0 || killing[0] != want {
		t.Fatalf("Killing events %q, want first %q", strings.Join(killing, "|"), want)
	}
	_ = l.client.CoreV1().Pods(l.ns).Delete(ctx, "web", metav1.DeleteOptions{})
	h.lastBeforeDelete(t, ctx)
}

// TestLifecycleStopSignal: lifecycle.stopSignal (KEP-4960) replaces
// SIGTERM. The field is alpha (ContainerStopSignals, off by default in
// v1.37); testenv's API server runs with the gate on.
func TestLifecycleStopSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-stopsignal")
	pod := l.serverPod("web", "naive", 5, nil)
	sigint := corev1.SIGINT
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.Containers[0].Lifecycle.StopSignal = &sigint
	probe := pod.DeepCopy()
	probe.Name = "probe"
	probe.Spec.NodeName = "nowhere" // never started
	created, err := l.client.CoreV1().Pods(l.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if lc := created.Spec.Containers[0].Lifecycle; lc == nil || lc.StopSignal == nil {
		t.Fatal("kube-apiserver dropped lifecycle.stopSignal: testenv/controlplane must run it with --feature-gates=ContainerStopSignals=true")
	}
	d := l.runAndDelete(t, ctx, pod)
	sig, _ := d.logEvent("signal")
	got := fmt.Sprintf("signal=%s exit=%d pid1_saw=%d", d.term.StopSignal, d.term.ExitCode, sig.PID)
	if want := "signal=interrupt exit=0 pid1_saw=1"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestStartupProbeHoldsReadinessBack: with a startup probe (tcpSocket, after
// 2 s) the container reports started=false and is not probed for readiness
// until it passes; then started=true, and Ready follows the readiness probe.
func TestStartupProbeHoldsReadinessBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-startup")
	pod := l.serverPod("web", "naive", 2, nil)
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{InitialDelaySeconds: 2, PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	_, h := l.create(t, ctx, pod)
	h.until(t, ctx, "Ready", podReady)
	h.mu.Lock()
	var seq []string
	for _, v := range h.versions {
		if len(v.Status.ContainerStatuses) == 0 || v.Status.ContainerStatuses[0].State.Running == nil {
			continue
		}
		cs := v.Status.ContainerStatuses[0]
		step := fmt.Sprintf("started=%t ready=%t", cs.Started != nil && *cs.Started, podReady(v))
		if len(seq) == 0 || seq[len(seq)-1] != step {
			seq = append(seq, step)
		}
	}
	h.mu.Unlock()
	if got, want := strings.Join(seq, " -> "), "started=false ready=false -> started=true ready=false -> started=true ready=true"; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}
