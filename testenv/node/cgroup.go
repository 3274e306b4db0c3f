package node

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Cgroup layout of the kubelet's systemd cgroup driver with containerd:
//
//	kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with _>.slice/cri-containerd-<id>.scope
//
// Guaranteed pods sit directly under kubepods.slice ("kubepods-pod<uid>.slice").
const kubepodsSlice = "kubepods.slice"

// Cgroup2Mount returns the cgroup v2 mount point from /proc/self/mountinfo:
// /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "id parent maj:min root mountpoint opts ... - fstype source superopts"
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo: mount -t cgroup2 none /sys/fs/cgroup/unified")
}

// PodSlice is the pod's cgroup path relative to the cgroup2 root.
func PodSlice(qos corev1.PodQOSClass, uid types.UID) string {
	escaped := strings.ReplaceAll(string(uid), "-", "_")
	if qos == corev1.PodQOSGuaranteed {
		return filepath.Join(kubepodsSlice, "kubepods-pod"+escaped+".slice")
	}
	q := strings.ToLower(string(qos))
	return filepath.Join(kubepodsSlice, "kubepods-"+q+".slice", "kubepods-"+q+"-pod"+escaped+".slice")
}

// ContainerScope is the container's cgroup path relative to the cgroup2 root.
func ContainerScope(qos corev1.PodQOSClass, uid types.UID, containerID string) string {
	return filepath.Join(PodSlice(qos, uid), "cri-containerd-"+containerID+".scope")
}

// QOSClass is the pod's QoS class as the API server set it, or computed
// like the API server does when the status lacks it.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	requests, limits, guaranteed := false, false, true
	for _, c := range pod.Spec.Containers {
		requests = requests || len(c.Resources.Requests) > 0
		limits = limits || len(c.Resources.Limits) > 0
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, okL := c.Resources.Limits[r]
			q, okR := c.Resources.Requests[r]
			if !okL || (okR && q.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !requests && !limits:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// makeCgroup creates a cgroup directory (and its parents) and opens it for
// clone3's CLONE_INTO_CGROUP.
func makeCgroup(path string) (*os.File, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening cgroup %s: %w", path, err)
	}
	return f, nil
}

// removeCgroup kills whatever is left in the cgroup (cgroup.kill), waits up
// to 5 s for it to empty, and removes it. A missing cgroup is not an error.
func removeCgroup(path string) error {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil
	}
	if populated(path) {
		_ = os.WriteFile(filepath.Join(path, "cgroup.kill"), []byte("1"), 0o644)
	}
	var err error
	for i := 0; i < 100; i++ {
		if err = os.Remove(path); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", path, err)
}

func populated(path string) bool {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	return err == nil && strings.Contains(string(b), "populated 1")
}
