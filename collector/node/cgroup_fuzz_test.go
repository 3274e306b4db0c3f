package node

import (
	"strings"
	"testing"
)

// FuzzParseContainerCgroup: any path parses to a container of one of the
// documented layouts or is refused; an accepted one has a 64-hex container
// id and a UID-shaped pod UID, the ones a canonical path built from them
// gives back.
func FuzzParseContainerCgroup(f *testing.F) {
	id := strings.Repeat("ab12", 16)
	for _, p := range []string{
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234abcd_1234_abcd_1234_1234abcd1234.slice/cri-containerd-" + id + ".scope",
		"/kubepods.slice/kubepods-pod1234abcd_1234_abcd_1234_1234abcd1234.slice/crio-" + id + ".scope/container",
		"kubepods/besteffort/pod1234abcd-1234-abcd-1234-1234abcd1234/" + id,
		"kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1234abcd_1234_abcd_1234_1234abcd1234.slice/crio-conmon-" + id + ".scope",
		"/", "", "kubepods//pod/", "kubepods.slice/-pod.slice/cri-containerd-.scope",
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, path string) {
		c, ok := ParseContainerCgroup(path)
		if !ok {
			if c != (ContainerCgroup{}) {
				t.Fatalf("%q refused with %+v", path, c)
			}
			return
		}
		if !isContainerID(c.ContainerID) || !isUID(c.PodUID) {
			t.Fatalf("%q: container %q pod %q", path, c.ContainerID, c.PodUID)
		}
		canonical := "kubepods/burstable/pod" + c.PodUID + "/" + c.ContainerID
		if back, ok := ParseContainerCgroup(canonical); !ok || back.ContainerID != c.ContainerID || back.PodUID != c.PodUID {
			t.Fatalf("%q: %+v, its canonical path %q gives %+v %v", path, c, canonical, back, ok)
		}
	})
}

// FuzzParseProcCgroup: /proc/<pid>/cgroup contents of any shape give the
// unified line's path or an error.
func FuzzParseProcCgroup(f *testing.F) {
	for _, s := range []string{"0::/kubepods.slice/x.scope\n", "12:memory:/a\n1:name=systemd:/b\n0::/c\n", "", "0::", "\n\n0::\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rel, err := parseProcCgroup(s)
		if err == nil && (strings.Contains(rel, "\n") || !strings.Contains(s, "0::"+rel)) {
			t.Fatalf("%q gave %q", s, rel)
		}
	})
}

// FuzzParseCgroup2Mount: any mountinfo gives a mount point or an error.
func FuzzParseCgroup2Mount(f *testing.F) {
	for _, s := range []string{
		"35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
		"36 35 0:31 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n30 24 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		"36 35 0:31 / /sys/fs/with\\040space rw - cgroup2 cgroup2 rw\n", "- cgroup2\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mnt, err := parseCgroup2Mount(strings.NewReader(s))
		if err == nil && mnt == "" {
			t.Fatalf("%q: an empty mount point without an error", s)
		}
	})
}
