package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// KubeletBinary is the file name of the prober binary: the kernel takes a
// task's comm from it, and drainwatch recognises the kubelet by comm.
const KubeletBinary = "kubelet"

var kubeletBuilt struct {
	sync.Mutex
	paths map[string]string
}

// BuildKubeletProber builds testenv/cmd/kubeletprober into dir/kubelet,
// once per process and directory, and returns the path. Like
// workload.Build it builds next to the target and renames over it, so a
// prober another process runs keeps its inode.
func BuildKubeletProber(ctx context.Context, dir string) (string, error) {
	kubeletBuilt.Lock()
	defer kubeletBuilt.Unlock()
	if p, ok := kubeletBuilt.paths[dir]; ok {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubelet prober dir: %w", err)
	}
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/drainwatch/drainwatch").Output()
	if err != nil {
		return "", fmt.Errorf("finding the drainwatch module root (run from inside the repository): %w", err)
	}
	out := filepath.Join(dir, KubeletBinary)
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./testenv/cmd/kubeletprober")
	cmd.Dir = strings.TrimSpace(string(root))
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the kubelet prober: %w: %s", err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("installing the kubelet prober: %w", err)
	}
	if kubeletBuilt.paths == nil {
		kubeletBuilt.paths = map[string]string{}
	}
	kubeletBuilt.paths[dir] = out
	return out, nil
}
