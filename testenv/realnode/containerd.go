package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// CRINamespace is the containerd namespace the CRI plugin keeps pods and
// images in.
const CRINamespace = "k8s.io"

// CNIBinDir holds Debian's containernetworking-plugins.
const CNIBinDir = "/usr/lib/cni"

// containerdConfig keeps every containerd path under the node's dir, runs
// runc through the v2 shim with the cgroupfs driver (SystemdCgroup off, as
// the kubelet's cgroupDriver), uses the local pause image, and mounts pod
// network namespaces under the state dir so that Close finds them.
// restrict_oom_score_adj: this machine's root lacks CAP_SYS_RESOURCE, and
// runc's init fails writing the kubelet's -998 for the pause container
// ("failed to update /proc/self/oom_score_adj: Permission denied"); with it
// containerd clamps scores to its own (0).
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`

// cniConfig is the pod network: Debian's bridge plugin on the node
// namespace's cbr0 (netlab.ConnectNode made it, with the gateway address),
// host-local addresses from the node's pod CIDR, no masquerade (the fabric
// routes pod CIDRs), then loopback.
const cniConfig = `{"cniVersion": "0.4.0", "name": "testenv", "plugins": [
  {"type": "bridge", "bridge": %[1]q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %[2]q, "gateway": %[3]q}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %[4]q}},
  {"type": "loopback"}]}
`

func (n *Node) writeContainerdConfig() (string, error) {
	d := n.Dir
	cniDir := filepath.Join(d, "cni", "net.d")
	if err := os.MkdirAll(cniDir, 0o755); err != nil {
		return "", err
	}
	cni := fmt.Sprintf(cniConfig, nodeBridge, n.podCIDR, n.podGateway, filepath.Join(d, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(cniDir, "10-testenv.conflist"), []byte(cni), 0o644); err != nil {
		return "", err
	}
	cfg := filepath.Join(d, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, filepath.Join(d, "root"), filepath.Join(d, "state"), n.Socket,
		n.Socket+".ttrpc", filepath.Join(d, "opt"), PauseImage, CNIBinDir, cniDir)
	return cfg, os.WriteFile(cfg, []byte(body), 0o644)
}

// noPulls is containerd's environment: every registry request goes to a
// proxy on the node namespace's loopback where nothing listens, so a pull
// fails at once ("proxyconnect … connection refused") and never resolves
// or dials a registry. Images are imported; a pod that is not pinned here
// (realnode.Pin: imagePullPolicy Never) would otherwise make containerd
// look up registry-1.docker.io through the host's resolver, a packet to an
// address outside the test network (it dies in the fabric, which routes
// nothing out, but it must not be sent at all).
var noPulls = []string{"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=", "https_proxy=", "http_proxy=", "no_proxy="}

// startContainerd runs Debian's containerd in the node namespace (the CNI
// plugins it runs put pod veths on the bridge of its own namespace) and in
// the node's runtime cgroup, and waits until it answers.
func (n *Node) startContainerd(ctx context.Context) error {
	cfg, err := n.writeContainerdConfig()
	if err != nil {
		return fmt.Errorf("containerd config: %w", err)
	}
	p, err := n.startEnv("containerd", noPulls, "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	if err := joinCgroup(n.runtimeCgroup(), p.cmd.Process.Pid); err != nil {
		return err
	}
	for i := 0; i < 200; i++ { // 20 s
		if _, err := n.Ctr(ctx, "version"); err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("containerd exited (log %s)", p.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("containerd did not answer on %s within 20s (log %s)", n.Socket, p.logPath)
}

// Ctr runs ctr against the node's containerd in the CRI namespace.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.Socket, "--namespace", CRINamespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("ctr %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}
