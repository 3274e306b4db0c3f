package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const (
	testCID = "3f4b1c2d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"
	testUID = "1b2c3d4e-5f60-4718-a9b0-c1d2e3f40516"
)

var testUIDUnderscore = strings.ReplaceAll(testUID, "-", "_")

func TestParseContainerCgroup(t *testing.T) {
	tests := []struct {
		name, path string
		want       ContainerCgroup
		ok         bool
	}{
		{"systemd containerd burstable",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDUnderscore + ".slice/cri-containerd-" + testCID + ".scope",
			ContainerCgroup{testUID, testCID, RuntimeContainerd}, true},
		{"systemd containerd besteffort",
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + testUIDUnderscore + ".slice/cri-containerd-" + testCID + ".scope",
			ContainerCgroup{testUID, testCID, RuntimeContainerd}, true},
		{"systemd guaranteed directly under kubepods.slice",
			"/kubepods.slice/kubepods-pod" + testUIDUnderscore + ".slice/cri-containerd-" + testCID + ".scope",
			ContainerCgroup{testUID, testCID, RuntimeContainerd}, true},
		{"nested kubelet.slice (kind)",
			"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + testUIDUnderscore + ".slice/cri-containerd-" + testCID + ".scope",
			ContainerCgroup{testUID, testCID, RuntimeContainerd}, true},
		{"cgroupfs burstable",
			"/kubepods/burstable/pod" + testUID + "/" + testCID,
			ContainerCgroup{testUID, testCID, RuntimeCgroupfs}, true},
		{"cgroupfs guaranteed",
			"/kubepods/pod" + testUID + "/" + testCID,
			ContainerCgroup{testUID, testCID, RuntimeCgroupfs}, true},
		{"crio",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDUnderscore + ".slice/crio-" + testCID + ".scope",
			ContainerCgroup{testUID, testCID, RuntimeCRIO}, true},
		{"crio crun container sub-cgroup",
			"/kubepods.slice/kubepods-pod" + testUIDUnderscore + ".slice/crio-" + testCID + ".scope/container",
			ContainerCgroup{testUID, testCID, RuntimeCRIO}, true},
		{"crio conmon skipped",
			"/kubepods.slice/kubepods-pod" + testUIDUnderscore + ".slice/crio-conmon-" + testCID + ".scope", ContainerCgroup{}, false},
		{"pod slice itself", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + testUIDUnderscore + ".slice", ContainerCgroup{}, false},
		{"qos slice", "/kubepods.slice/kubepods-burstable.slice", ContainerCgroup{}, false},
		{"short id", "/kubepods/burstable/pod" + testUID + "/3f4b1c", ContainerCgroup{}, false},
		{"upper-case hex", "/kubepods/pod" + testUID + "/" + strings.ToUpper(testCID), ContainerCgroup{}, false},
		{"docker scope outside kubepods", "/system.slice/docker-" + testCID + ".scope", ContainerCgroup{}, false},
		{"not under kubepods", "/system.slice/pod" + testUID + "/" + testCID, ContainerCgroup{}, false},
		{"bad uid", "/kubepods/podnot-a-uid/" + testCID, ContainerCgroup{}, false},
		{"root", "/", ContainerCgroup{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseContainerCgroup(tt.path)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("ParseContainerCgroup(%q) = %+v, %v; want %+v, %v", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestScanContainerCgroups builds a fake cgroup tree in a temporary
// directory: a sandbox and a container of one pod, a conmon cgroup, and
// unrelated system cgroups.
func TestScanContainerCgroups(t *testing.T) {
	root := t.TempDir()
	sandbox := strings.Repeat("ab", 32)
	pod := filepath.Join(root, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+testUIDUnderscore+".slice")
	dirs := []string{
		filepath.Join(pod, "cri-containerd-"+testCID+".scope"),
		filepath.Join(pod, "cri-containerd-"+sandbox+".scope"),
		filepath.Join(pod, "crio-conmon-"+testCID+".scope"),
		filepath.Join(root, "system.slice", "containerd.service"),
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	found, err := ScanContainerCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 {
		t.Fatalf("found %d container cgroups, want 2 (container and sandbox): %+v", len(found), found)
	}
	got := found[testCID]
	if got.PodUID != testUID || got.Dir != dirs[0] || got.ID != inode(t, dirs[0]) {
		t.Fatalf("container cgroup = %+v, want dir %s, id %d", got, dirs[0], inode(t, dirs[0]))
	}
}

func TestContainerNetns(t *testing.T) {
	dir := t.TempDir()
	procs := "999999999\n" + strconv.Itoa(os.Getpid()) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(procs), 0o644); err != nil {
		t.Fatal(err)
	}
	ino, ok, err := ContainerNetns("/proc", dir)
	if err != nil || !ok {
		t.Fatalf("ContainerNetns: %v, ok=%v", err, ok)
	}
	if want := uint32(inode(t, "/proc/self/ns/net")); ino != want {
		t.Fatalf("netns inode = %d, want %d", ino, want)
	}
	f, ino2, ok, err := OpenContainerNetns("/proc", dir, nil)
	if err != nil || !ok || ino2 != ino {
		t.Fatalf("OpenContainerNetns = %d, %v, %v; want %d", ino2, ok, err, ino)
	}
	f.Close()
	// From the kernel's tasks (a stand-in here; kernel.ProcessNetns in
	// collector/kernel's test): the namespace is held by /proc/<pid>/net/dev.
	fromKernel := func() (map[int]uint32, error) { return map[int]uint32{os.Getpid(): ino}, nil }
	f, ino2, ok, err = OpenContainerNetns("/proc", dir, fromKernel)
	if err != nil || !ok || ino2 != ino || f.Name() != "/proc/"+strconv.Itoa(os.Getpid())+"/net/dev" {
		t.Fatalf("OpenContainerNetns from the kernel = %v, %d, %v, %v; want /proc/%d/net/dev, %d", f, ino2, ok, err, os.Getpid(), ino)
	}
	f.Close()
	notListed := func() (map[int]uint32, error) { return map[int]uint32{}, nil }
	if _, _, ok, err := OpenContainerNetns("/proc", dir, notListed); ok || err != nil {
		t.Fatalf("a process the kernel does not list: ok=%v err=%v, want not ok, no error", ok, err)
	}
	os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644)
	if _, ok, err := ContainerNetns("/proc", dir); ok || err != nil {
		t.Fatalf("empty cgroup: ok=%v err=%v, want not ok and no error", ok, err)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
