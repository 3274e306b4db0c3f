package node

import (
	"context"

	"github.com/drainwatch/drainwatch/testenv/gobuild"
)

// KubeletBinary is the file name of the prober binary: the kernel takes a
// task's comm from it, and drainwatch recognises the kubelet by comm.
const KubeletBinary = "kubelet"

// BuildKubeletProber builds testenv/cmd/kubeletprober into dir/kubelet,
// once per process and directory, and returns the path (a prober another
// process runs keeps its inode: see gobuild.Main).
func BuildKubeletProber(ctx context.Context, dir string) (string, error) {
	return gobuild.Main(ctx, "./testenv/cmd/kubeletprober", dir, KubeletBinary)
}
