package node

import (
	"path/filepath"
	"strings"
)

// Runtime names the container runtime whose cgroup naming a path follows.
type Runtime string

const (
	RuntimeContainerd Runtime = "containerd"
	RuntimeCRIO       Runtime = "cri-o"
	// RuntimeCgroupfs is any runtime under the kubelet's cgroupfs driver,
	// where the container's cgroup is named by its bare id.
	RuntimeCgroupfs Runtime = "cgroupfs"
)

// ContainerCgroup is what a container's cgroup path says about it.
type ContainerCgroup struct {
	// PodUID is the pod's UID in its API form (dashes, not underscores).
	PodUID string
	// ContainerID is the runtime's 64-hex container id. The pod sandbox
	// (pause) has a cgroup of the same shape: only the pod's
	// containerStatuses tell a container from its sandbox.
	ContainerID string
	Runtime     Runtime
}

// ParseContainerCgroup reads a cgroup path (relative to the cgroup2 mount or
// absolute) in one of the kubelet's layouts:
//
//	systemd + containerd: kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<64hex>.scope
//	systemd + CRI-O:      .../kubepods-pod<uid_>.slice/crio-<64hex>.scope (crio-conmon-<hex>.scope is skipped)
//	cgroupfs:             kubepods/burstable/pod<uid>/<64hex>
//
// Guaranteed pods sit directly under kubepods(.slice). A prefix before the
// kubepods element (kind's nested kubelet.slice, for example) is allowed.
// ok is false for anything that is not a container cgroup.
func ParseContainerCgroup(path string) (c ContainerCgroup, ok bool) {
	parts := strings.Split(strings.Trim(filepath.ToSlash(path), "/"), "/")
	// CRI-O with crun may put the processes one level down, in "container".
	if n := len(parts); n >= 2 && parts[n-1] == "container" && strings.HasPrefix(parts[n-2], "crio-") {
		parts = parts[:n-1]
	}
	if len(parts) < 2 || !underKubepods(parts[:len(parts)-2]) {
		return ContainerCgroup{}, false
	}
	c.ContainerID, c.Runtime, ok = containerIDOf(parts[len(parts)-1])
	if !ok {
		return ContainerCgroup{}, false
	}
	c.PodUID, ok = podUIDOf(parts[len(parts)-2])
	if !ok {
		return ContainerCgroup{}, false
	}
	return c, true
}

// underKubepods reports whether the elements above a pod's cgroup contain
// the kubelet's kubepods root.
func underKubepods(above []string) bool {
	for _, p := range above {
		if p == "kubepods" || p == "kubepods.slice" || strings.HasSuffix(p, "-kubepods.slice") {
			return true
		}
	}
	return false
}

// containerIDOf extracts the container id from a container cgroup's name.
func containerIDOf(name string) (string, Runtime, bool) {
	switch {
	case strings.HasPrefix(name, "cri-containerd-") && strings.HasSuffix(name, ".scope"):
		id := strings.TrimSuffix(strings.TrimPrefix(name, "cri-containerd-"), ".scope")
		return id, RuntimeContainerd, isContainerID(id)
	case strings.HasPrefix(name, "crio-conmon-"):
		return "", "", false
	case strings.HasPrefix(name, "crio-") && strings.HasSuffix(name, ".scope"):
		id := strings.TrimSuffix(strings.TrimPrefix(name, "crio-"), ".scope")
		return id, RuntimeCRIO, isContainerID(id)
	case isContainerID(name):
		return name, RuntimeCgroupfs, true
	}
	return "", "", false
}

// podUIDOf extracts the pod UID from a pod cgroup's name: pod<uid> under
// cgroupfs, kubepods[-<qos>]-pod<uid with _>.slice under systemd.
func podUIDOf(name string) (string, bool) {
	var uid string
	switch {
	case strings.HasSuffix(name, ".slice"):
		i := strings.LastIndex(name, "-pod")
		if i < 0 {
			return "", false
		}
		uid = strings.ReplaceAll(strings.TrimSuffix(name[i+len("-pod"):], ".slice"), "_", "-")
	case strings.HasPrefix(name, "pod"):
		uid = strings.TrimPrefix(name, "pod")
	default:
		return "", false
	}
	return uid, isUID(uid)
}

// isContainerID reports whether s is 64 lower-case hex digits.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// isUID reports whether s has the 8-4-4-4-12 shape of a Kubernetes UID.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(b byte) bool { return ('0' <= b && b <= '9') || ('a' <= b && b <= 'f') }
