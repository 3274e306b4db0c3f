package realnode

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeletConfig is the node's KubeletConfiguration. What this host needs:
// failCgroupV1 false (hybrid cgroups: the kubelet sees v1) and the cgroupfs
// driver (no systemd here to own slices); a cgroupRoot of the node's own so
// nodes and the rest of the machine do not mix. The API is served on the
// node namespace's loopback only, without authentication (nothing outside
// the namespace can reach it). Image GC and disk eviction are off in
// effect: images are imported, not pulled, and the shared disk's fill level
// is not this node's business.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]q
containerRuntimeEndpoint: %[2]q
imageServiceEndpoint: %[2]q
podLogsDir: %[3]q
podCIDR: %[4]q
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
resolvConf: ""
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
`

// apiServerAddr is the host:port of the kubeconfig's current cluster.
func apiServerAddr(kubeconfig string) (string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		return "", fmt.Errorf("kubeconfig server %q: %w", rc.Host, err)
	}
	return u.Host, nil
}

// writeKubeconfig copies the control plane's kubeconfig with the server
// replaced by the relay's address inside the node namespace.
func (n *Node) writeKubeconfig(src, relayAddr string) (string, error) {
	kc, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return "", fmt.Errorf("reading kubeconfig %s: %w", src, err)
	}
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return "", fmt.Errorf("kubeconfig server %q: %w", c.Server, err)
		}
		u.Host = relayAddr
		c.Server = u.String()
	}
	path := filepath.Join(n.Dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

func (n *Node) startKubelet(kubeconfig string) error {
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, n.cgroupRoot(), "unix://"+n.Socket, filepath.Join(n.Dir, "pod-logs"), n.podCIDR)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	_, err := n.start("kubelet", filepath.Join(n.binDir, "kubelet"),
		"--config", cfg, "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(n.Dir, "kubelet"), "--cert-dir", filepath.Join(n.Dir, "pki"),
		"--hostname-override", n.Name, "--node-ip", n.IP, "--register-with-taints", taintFlag(), "--v", "2")
	return err
}

// waitReady waits for the Node to be registered and Ready.
func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil && ready(node) {
			return n.setPodCIDR(ctx, node)
		}
		for _, p := range n.procs {
			if p.exited() {
				return fmt.Errorf("%s exited: %v (log %s)", p.name, p.err, p.logPath)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready (logs in %s): %w", n.Name, n.Dir, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setPodCIDR sets the Node's spec.podCIDR, as kube-controller-manager's
// node IPAM would (testenv's controller manager does not run it; a kubelet
// registers without one and its own podCIDR setting only serves standalone
// mode). The stand-in sets it at registration.
func (n *Node) setPodCIDR(ctx context.Context, node *corev1.Node) error {
	if node.Spec.PodCIDR == n.podCIDR {
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.podCIDR, n.podCIDR)
	_, err := n.client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting node %s podCIDR: %w", n.Name, err)
	}
	return nil
}
