package realnode_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
	"github.com/drainwatch/drainwatch/testenv/realnode"
)

func TestMain(m *testing.M) { cptest.Main(m) }

const (
	nodeIndex = 201 // its own pod CIDR, far from the stand-in tests' nodes
	grace     = 3   // terminationGracePeriodSeconds
	dwserver  = "testenv.local/dwserver:1"
)

// startNode brings up a real node linked to a fresh fabric.
func startNode(t *testing.T, ctx context.Context) (*realnode.Node, *netlab.NS) {
	t.Helper()
	privileged.RequireRoot(t)
	privileged.RequireFile(t, filepath.Join(realnode.CNIBinDir, "bridge"), "Debian's containernetworking-plugins (make deps)")
	cp := cptest.Get(t)
	fabric, err := netlab.NewFabric("rnode-fabric")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fabric.Close() })
	img, err := realnode.StaticImage(ctx, "./testenv/cmd/dwserver", realnode.BinaryDir(), dwserver)
	if err != nil {
		t.Fatal(err)
	}
	n, err := realnode.Start(ctx, realnode.Config{Name: "real-1", Index: nodeIndex, Fabric: fabric,
		Kubeconfig: cp.Kubeconfig, Images: []realnode.Image{img}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, n)
		}
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("real node %s Ready in %s (dir %s)", n.Name, n.StartupTime, n.Dir)
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.PodCIDR != netlab.PodCIDR(nodeIndex) {
		t.Fatalf("node podCIDR %q, want %s", node.Spec.PodCIDR, netlab.PodCIDR(nodeIndex))
	}
	t.Logf("kubelet %s, runtime %s", node.Status.NodeInfo.KubeletVersion, node.Status.NodeInfo.ContainerRuntimeVersion)
	return n, fabric
}

func serverPod(name, node string, args ...string) *corev1.Pod {
	g := int64(grace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &g,
			Containers: []corev1.Container{{
				Name: "server", Image: dwserver,
				Args: append([]string{"--port=8080"}, args...),
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
			}},
		},
	}
	realnode.Pin(&pod.Spec, node)
	return pod
}

// TestPodStartsReadyAndStops: the scheduler places a pod on the real node,
// containerd starts it behind the CNI bridge, the kubelet's readiness probe
// marks it Ready, a client in the fabric reaches it, and on deletion
// containerd's shim sends SIGTERM (a server that handles it exits 0, having
// logged it) or, to a server that ignores it, SIGKILL after the grace (137).
func TestPodStartsReadyAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n, fabric := startNode(t, ctx)
	cp := cptest.Get(t)
	pods := cp.Client.CoreV1().Pods("default")

	for _, tc := range []struct {
		name     string
		args     []string
		exitCode int32
		signal   string // what the server logged; "" when it ignores stop signals
	}{
		{name: "naive", args: []string{"--mode=naive"}, exitCode: 0, signal: "terminated"},
		{name: "ignore-stop", args: []string{"--mode=naive", "--ignore-stop"}, exitCode: 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := pods.Create(ctx, serverPod("rn-"+tc.name, n.Name, tc.args...), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ready := waitPod(t, ctx, cp.Client.CoreV1().Pods("default"), pod.Name, func(p *corev1.Pod) bool { return podReady(p) })
			if ready.Spec.NodeName != n.Name {
				t.Fatalf("pod on node %q, want %q", ready.Spec.NodeName, n.Name)
			}
			ip := ready.Status.PodIP
			if !strings.HasPrefix(ip, "10.244.201.") {
				t.Fatalf("pod IP %q outside the node's pod CIDR %s", ip, netlab.PodCIDR(nodeIndex))
			}
			if body := get(t, ctx, fabric, "http://"+ip+":8080/healthz"); body != "ok\n" {
				t.Fatalf("GET /healthz from the fabric = %q, want \"ok\\n\"", body)
			}
			log := containerLog(n, ready)
			if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			term, stopSignal, logged := waitTerminated(t, ctx, cp.Client.CoreV1().Pods("default"), pod.Name, log)
			t.Logf("%s: %s exit %d, status stopSignal %v", tc.name, term.Reason, term.ExitCode, stopSignal)
			if term.ExitCode != tc.exitCode {
				t.Errorf("exit code %d (%s), want %d", term.ExitCode, term.Reason, tc.exitCode)
			}
			checkKillingEvent(t, ctx, cp.Client, pod.Name, n.Name)
			got := signalLogged(logged)
			if got != tc.signal {
				t.Errorf("server logged stop signal %q, want %q", got, tc.signal)
			}
		})
	}
}
