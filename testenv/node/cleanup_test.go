package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestStopLeavesNothingBehind: stopping the agent with pods running (one of
// them ignores SIGTERM, grace 30 s) kills them at once and removes every
// process, namespace and cgroup it made.
func TestStopLeavesNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-stop")
	var infos []node.PodInfo
	for _, mode := range []string{"naive", "ignore-term"} {
		pod, h := l.create(t, ctx, l.serverPod(mode, mode, 30, nil))
		h.until(t, ctx, "Ready", podReady)
		info, _ := l.agent.Pod(pod.UID)
		infos = append(infos, info)
	}
	nodeNS := l.agent.NodeNS().Path()
	start := time.Now()
	l.agent.Stop()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Stop took %s: it waited for a grace period", took)
	}
	paths := []string{nodeNS}
	for _, info := range infos {
		paths = append(paths, info.Netns, info.PodCgroup, filepath.Join(info.PodCgroup, "cri-containerd-"+info.SandboxID+".scope"))
		for _, c := range info.Containers {
			paths = append(paths, c.Cgroup)
			if err := syscall.Kill(c.InitPID, 0); err != syscall.ESRCH {
				t.Errorf("container %s init %d still exists: %v", c.Name, c.InitPID, err)
			}
		}
	}
	mustNotExist(t, paths...)
}

// TestContainersStopInParallel: a protocol container (1.5 s drain, exit 0)
// and an ignore-term one (SIGKILL after 3 s, 137) get their stop signals
// together; the pod ends Failed.
func TestContainersStopInParallel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-parallel")
	pod := l.serverPod("two", "protocol", 3, nil)
	second := pod.Spec.Containers[0]
	second.Name, second.Args = "stubborn", []string{"--mode=ignore-term", "--port=8081"}
	second.Ports = []corev1.ContainerPort{{Name: "http2", ContainerPort: 8081}}
	second.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8081)}}}
	pod.Spec.Containers = append(pod.Spec.Containers, second)
	created, h := l.create(t, ctx, pod)
	h.until(t, ctx, "Ready", podReady)
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	last := h.lastBeforeDelete(t, ctx)
	byName := map[string]node.Termination{}
	for _, tm := range l.agent.Terminations(created.UID) {
		byName[tm.Container] = tm
	}
	if all := l.agent.AllTerminations(); len(all) != 2 || all[0].PodUID != created.UID || all[0].Container != "srv" {
		t.Fatalf("AllTerminations = %+v, want srv then stubborn of pod %s", all, created.UID)
	}
	srv, stub := byName["srv"], byName["stubborn"]
	got := fmt.Sprintf("srv exit=%d sigkill=%t | stubborn exit=%d sigkill=%t | phase=%s",
		srv.ExitCode, !srv.SIGKILLAt.IsZero(), stub.ExitCode, !stub.SIGKILLAt.IsZero(), last.Status.Phase)
	if want := "srv exit=0 sigkill=false | stubborn exit=137 sigkill=true | phase=Failed"; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if d := srv.StopSignalAt.Sub(stub.StopSignalAt).Abs(); d > 500*time.Millisecond {
		t.Fatalf("stop signals %s apart: containers were stopped one after the other", d)
	}
}

// TestDeletionGracePeriodOverridesSpec: `kubectl delete --grace-period=2`
// of a pod whose spec says 30 s: SIGKILL after 2 s.
func TestDeletionGracePeriodOverridesSpec(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-override")
	created, h := l.create(t, ctx, l.serverPod("web", "ignore-term", 30, nil))
	h.until(t, ctx, "Ready", podReady)
	two := int64(2)
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &two}); err != nil {
		t.Fatal(err)
	}
	h.lastBeforeDelete(t, ctx)
	tm := l.agent.Terminations(created.UID)[0]
	got := fmt.Sprintf("grace=%d stop_timeout=%d exit=%d", tm.Grace, tm.StopTimeout, tm.ExitCode)
	if want := "grace=2 stop_timeout=2 exit=137"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestSweepRemovesWhatADeadAgentLeft: namespaces named for a node are
// swept, nothing else.
func TestSweepRemovesWhatADeadAgentLeft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-sweep")
	nodeNS := l.agent.NodeNS().Path()
	removed, err := node.Sweep(l.agent.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || "/run/netns/"+removed[0] != nodeNS {
		t.Fatalf("swept %v, want only %s", removed, nodeNS)
	}
	if _, err := os.Stat(l.fabric.Path()); err != nil {
		t.Fatalf("the fabric was swept too: %v", err)
	}
}

// TestForceDeleteShortensTheGrace: a pod ignoring SIGTERM is deleted with
// its 30 s grace, then force-deleted (grace 0) a second later. Like the
// kubelet, the agent abandons the first kill and kills again with grace 1,
// floored to 2 s: SIGKILL about 3 s after the first delete, not 30.
func TestForceDeleteShortensTheGrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-force")
	created, h := l.create(t, ctx, l.serverPod("web", "ignore-term", 30, nil))
	h.until(t, ctx, "Ready", podReady)
	info, _ := l.agent.Pod(created.UID)
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	zero := int64(0)
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	h.lastBeforeDelete(t, ctx)
	var terms []node.Termination
	for i := 0; i < 100 && len(terms) < 2; i++ {
		time.Sleep(100 * time.Millisecond)
		terms = l.agent.Terminations(created.UID)
	}
	if len(terms) != 2 {
		t.Fatalf("%d terminations after 10 s, want the abandoned one and the forced one", len(terms))
	}
	first, second := terms[0], terms[1]
	got := fmt.Sprintf("first grace=%d superseded=%t sigkill=%t | second grace=%d stop_timeout=%d sigkill=%t exit=%d",
		first.Grace, first.Superseded, !first.SIGKILLAt.IsZero(), second.Grace, second.StopTimeout, !second.SIGKILLAt.IsZero(), second.ExitCode)
	if want := "first grace=30 superseded=true sigkill=false | second grace=1 stop_timeout=2 sigkill=true exit=137"; got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if d := second.SIGKILLAt.Sub(second.StopSignalAt); d < 2*time.Second || d >= 2500*time.Millisecond {
		t.Fatalf("SIGKILL %s after the second stop signal, want the 2 s floor", d)
	}
	waitGone(t, 5*time.Second, info.Netns, info.PodCgroup)
}

// TestCompletedPodIsTornDownThenDeleted: a restartPolicy Never container
// (local:/bin/sh) that exits 3 on its own leaves the pod Failed with its
// exit code, its namespace and cgroups removed while the Pod object stays;
// deleting it then needs no kill (no Killing event).
func TestCompletedPodIsTornDownThenDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-complete")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: l.ns}, Spec: corev1.PodSpec{
		NodeName: l.agent.Name(), RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "sh", Image: "local:/bin/sh", Args: []string{"-c", "sleep 0.5; exit 3"}}},
	}}
	created, h := l.create(t, ctx, pod)
	done := h.until(t, ctx, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	info, _ := l.agent.Pod(created.UID)
	tt := done.Status.ContainerStatuses[0].State.Terminated
	if tt == nil || tt.ExitCode != 3 || tt.Reason != "Error" {
		t.Fatalf("terminated state %+v, want exit 3 Error", tt)
	}
	waitGone(t, 5*time.Second, info.Netns, info.PodCgroup)
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, "job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.lastBeforeDelete(t, ctx)
	if terms := l.agent.Terminations(created.UID); len(terms) != 0 {
		t.Fatalf("a finished pod was killed: %+v", terms)
	}
}

// TestHeldNamespaceLeavesTheBridge: a process that holds a pod's network
// namespace open past its deletion (drainwatch does, through a
// termination's tail) keeps the namespace alive, but not its network: the
// agent deletes eth0 like a CNI DEL, so the address the next pod gets is
// answered only by that pod.
func TestHeldNamespaceLeavesTheBridge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-held")
	pod, h := l.create(t, ctx, l.serverPod("web", "naive", 5, nil))
	h.until(t, ctx, "Ready", podReady)
	info, _ := l.agent.Pod(pod.UID)
	held, err := os.Open(info.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.lastBeforeDelete(t, ctx)
	mustNotExist(t, info.Netns)
	list := exec.Command("nsenter", "--net=/proc/self/fd/3", "ip", "-o", "link", "show")
	list.ExtraFiles = []*os.File{held} // fd 3 in nsenter
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("listing links of the held namespace: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "\n"); got != 1 || !strings.Contains(string(out), " lo:") {
		t.Fatalf("held namespace still has links besides lo:\n%s", out)
	}
}

// TestNativeSidecarStopsAfterMain: a native sidecar (an init container with
// restartPolicy Always) starts before the main container, is reported in
// status.initContainerStatuses and counted in Ready, and at deletion gets
// its stop signal only once the main container has exited, as the
// kubelet's (KEP-753).
func TestNativeSidecarStopsAfterMain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-sidecar")
	pod := l.serverPod("meshed", "protocol", 10, nil)
	sidecar := pod.Spec.Containers[0]
	always := corev1.ContainerRestartPolicyAlways
	sidecar.Name, sidecar.Args, sidecar.RestartPolicy = "proxy", []string{"--mode=naive", "--port=8081"}, &always
	sidecar.Ports = []corev1.ContainerPort{{Name: "proxy", ContainerPort: 8081}}
	sidecar.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8081)}}}
	pod.Spec.InitContainers = []corev1.Container{sidecar}
	created, h := l.create(t, ctx, pod)
	ready := h.until(t, ctx, "Ready", podReady)
	if s := ready.Status.InitContainerStatuses; len(s) != 1 || s[0].Name != "proxy" || s[0].ContainerID == "" || !s[0].Ready {
		t.Fatalf("initContainerStatuses %+v, want the ready sidecar proxy with its id", s)
	}
	if err := l.client.CoreV1().Pods(l.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.lastBeforeDelete(t, ctx)
	byName := map[string]node.Termination{}
	for _, tm := range l.agent.Terminations(created.UID) {
		byName[tm.Container] = tm
	}
	srv, proxy := byName["srv"], byName["proxy"]
	if srv.ExitAt.IsZero() || proxy.StopSignalAt.IsZero() || proxy.StopSignalAt.Before(srv.ExitAt) {
		t.Fatalf("srv exited at %v, proxy signalled at %v: want the sidecar stopped after the main container's exit",
			srv.ExitAt, proxy.StopSignalAt)
	}
	if !srv.SIGKILLAt.IsZero() || !proxy.SIGKILLAt.IsZero() || proxy.Grace < 2 || proxy.Grace > srv.Grace {
		t.Fatalf("srv %+v, proxy %+v: want both stopped gracefully, the sidecar with what was left of the grace", srv, proxy)
	}
}
