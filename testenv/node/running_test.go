package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRunsReadyAndReachableFromFabricOnly: a pod bound to the node runs
// as PID 1 of its own PID namespace, in its own netns and a kubelet-named
// cgroup, turns Ready through its readiness probe, answers from the fabric,
// and the root namespace has no route of ours to it.
func TestPodRunsReadyAndReachableFromFabricOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-running")
	pod, h := l.create(t, ctx, l.serverPod("web", "naive", 5, nil))
	got := h.until(t, ctx, "Ready", podReady)

	info, ok := l.agent.Pod(pod.UID)
	if !ok || len(info.Containers) != 1 {
		t.Fatalf("agent knows %+v", info)
	}
	c := info.Containers[0]
	cs := got.Status.ContainerStatuses[0]
	want := fmt.Sprintf("phase=Running podIP=%s hostIP=%s id=containerd://%s restarts=0 running=true qos=BestEffort",
		netlab.PodIP(0, 2), netlab.NodeIP(0), c.ID)
	have := fmt.Sprintf("phase=%s podIP=%s hostIP=%s id=%s restarts=%d running=%t qos=%s",
		got.Status.Phase, got.Status.PodIP, got.Status.HostIP, cs.ContainerID, cs.RestartCount, cs.State.Running != nil, got.Status.QOSClass)
	if have != want {
		t.Fatalf("status\n got %s\nwant %s", have, want)
	}
	root, _ := node.Cgroup2Mount()
	if wantCg := root + "/" + node.ContainerScope(corev1.PodQOSBestEffort, pod.UID, c.ID); c.Cgroup != wantCg {
		t.Fatalf("cgroup %s, want %s", c.Cgroup, wantCg)
	}
	checkInitProcess(t, c, info)
	checkReachability(t, ctx, l, info.IP)
}

// checkInitProcess reads /proc: the init is PID 1 in its PID namespace, sits
// in the container scope and in the pod's network namespace.
func checkInitProcess(t *testing.T, c node.ContainerInfo, info node.PodInfo) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.InitPID))
	if err != nil {
		t.Fatal(err)
	}
	nspid := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "NSpid:") {
			nspid = strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	if want := fmt.Sprintf("%d 1", c.InitPID); nspid != want {
		t.Errorf("NSpid %q, want %q (PID 1 of a child PID namespace)", nspid, want)
	}
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.InitPID))
	root, _ := node.Cgroup2Mount()
	if want := "0::" + strings.TrimPrefix(c.Cgroup, root) + "\n"; !strings.Contains(string(cg), want) {
		t.Errorf("/proc/%d/cgroup = %q, want a line %q", c.InitPID, cg, want)
	}
	link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", c.InitPID))
	if want := fmt.Sprintf("net:[%d]", info.NetnsInode); link != want {
		t.Errorf("init netns %s, want %s", link, want)
	}
}

// checkReachability: /work answers from the fabric; the root namespace's
// route to the pod IP is its default route, none of ours (asked with `ip
// route get`, no packet sent).
func checkReachability(t *testing.T, ctx context.Context, l *lab, ip string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: l.fabric.DialContext}}
	resp, err := client.Get("http://" + ip + ":8080/work")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "ok /work") {
		t.Fatalf("GET /work from the fabric: %d %q", resp.StatusCode, body)
	}
	out, err := exec.CommandContext(ctx, "ip", "route", "get", ip).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, ours := range []string{netlab.NodeUplink, netlab.NodeBridge, "fab0", "10.240."} {
		if strings.Contains(string(out), ours) {
			t.Fatalf("root namespace routes %s through our links: %s", ip, out)
		}
	}
}

// TestNodeRegisteredAndScheduledTo: the Node is Ready with its pod CIDR and
// address, and the real scheduler binds a pod to it.
func TestNodeRegisteredAndScheduledTo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := newLab(t, ctx, "t-sched")
	name := l.agent.Name()
	n, err := l.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := ""
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = string(c.Status)
		}
	}
	have := fmt.Sprintf("podCIDR=%s ready=%s ip=%s", n.Spec.PodCIDR, ready, n.Status.Addresses[0].Address)
	if want := fmt.Sprintf("podCIDR=10.244.0.0/24 ready=True ip=%s", netlab.NodeIP(0)); have != want {
		t.Fatalf("node: %s, want %s", have, want)
	}
	pod := l.serverPod("sched", "naive", 5, nil)
	pod.Spec.NodeName = ""
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": name}
	_, h := l.create(t, ctx, pod)
	got := h.until(t, ctx, "scheduled and Ready", podReady)
	if got.Spec.NodeName != name {
		t.Fatalf("bound to %q", got.Spec.NodeName)
	}
}
