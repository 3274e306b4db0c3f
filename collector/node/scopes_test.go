package node

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/drainwatch/drainwatch/collector"
)

// scopeKernel records the scopes the BPF map would hold; failNetns makes
// the next WatchNetns calls fail (the map is full).
type scopeKernel struct {
	Watcher
	netns     map[uint32]bool
	cgroups   map[uint64]bool
	failNetns int
	// addrs are local_dsts' entries: true once blackholed.
	addrs map[netip.Addr]bool
}

func (k *scopeKernel) WatchNetns(ino uint32) error {
	if k.failNetns > 0 {
		k.failNetns--
		return errors.New("scopes map full")
	}
	k.netns[ino] = true
	return nil
}
func (k *scopeKernel) UnwatchNetns(ino uint32) error { delete(k.netns, ino); return nil }
func (k *scopeKernel) WatchCgroup(id uint64) error   { k.cgroups[id] = true; return nil }
func (k *scopeKernel) UnwatchCgroup(id uint64) error { delete(k.cgroups, id); return nil }
func (k *scopeKernel) WatchAddr(a netip.Addr) error {
	if k.addrs != nil {
		k.addrs[a] = false
	}
	return nil
}

func (k *scopeKernel) UnwatchAddr(a netip.Addr) error { delete(k.addrs, a); return nil }

func (k *scopeKernel) BlackholeAddr(a netip.Addr) error {
	if k.addrs != nil {
		k.addrs[a] = true
	}
	return nil
}

// ProcessNetns fails as on a kernel without task iterators: these tests'
// /proc is a temp dir, read by the /proc/<pid>/ns/net fallback.
func (k *scopeKernel) ProcessNetns() (map[int]uint32, error) {
	return nil, errors.New("no BPF task iterator in this fake")
}

type nopBinder struct{}

func (nopBinder) BindNetns(string, uint32)              {}
func (nopBinder) BindCgroup(string, string, uint64)     {}
func (nopBinder) HostNetwork(string)                    {}
func (nopBinder) AcceptSummary(collector.AcceptSummary) {}

const scopePod = "0c1d2e3f-0000-4000-8000-00000000000a"

// scopeNode is a node's cgroup tree and /proc in temp dirs (systemd
// driver, containerd): each container's cgroup lists pid 4242, whose
// ns/net is a plain file standing for the pod's network namespace.
type scopeNode struct {
	root, proc, nsFile string
}

func newScopeNode(t *testing.T) scopeNode {
	n := scopeNode{root: t.TempDir(), proc: t.TempDir()}
	n.nsFile = filepath.Join(n.proc, "4242", "ns", "net")
	mustOK(t, os.MkdirAll(filepath.Dir(n.nsFile), 0o755), os.WriteFile(n.nsFile, nil, 0o644))
	return n
}

// container creates a container's cgroup and returns its id (the inode).
func (n scopeNode) container(t *testing.T, containerID string) uint64 {
	dir := filepath.Join(n.root, "kubepods.slice", "kubepods-besteffort.slice",
		"kubepods-besteffort-pod"+strings.ReplaceAll(scopePod, "-", "_")+".slice", "cri-containerd-"+containerID+".scope")
	mustOK(t, os.MkdirAll(dir, 0o755), os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("4242\n"), 0o644))
	var st syscall.Stat_t
	mustOK(t, syscall.Stat(dir, &st))
	return st.Ino
}

func (n scopeNode) netns(t *testing.T) uint32 {
	var st syscall.Stat_t
	mustOK(t, syscall.Stat(n.nsFile, &st))
	return uint32(st.Ino)
}

// openNetnsFiles counts this process's descriptors open on the netns file.
func (n scopeNode) openNetnsFiles(t *testing.T) int {
	fds, err := os.ReadDir("/proc/self/fd")
	mustOK(t, err)
	count := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == n.nsFile {
			count++
		}
	}
	return count
}

func mustOK(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func podWith(containerID string) collector.Pod {
	return collector.Pod{UID: scopePod, Containers: []collector.Container{{Name: "app", ID: containerID}}}
}

// TestContainerRestartUnwatchesOldCgroup: each restart of a crash-looping
// container gives it a new cgroup; the old one is unwatched, so the kernel
// watches exactly one cgroup for the pod however often it restarts.
func TestContainerRestartUnwatchesOldCgroup(t *testing.T) {
	n := newScopeNode(t)
	k := &scopeKernel{netns: map[uint32]bool{}, cgroups: map[uint64]bool{}}
	s := NewScopes(k, nopBinder{}, n.root, n.proc, zerolog.Nop())
	defer s.CloseFiles()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		id := "c0ffee" + strings.Repeat(string(rune('0'+i)), 58)
		cg := n.container(t, id)
		now = now.Add(time.Second)
		s.PodUpdate(podWith(id), now)
		want := map[uint64]bool{cg: true}
		if len(k.cgroups) != 1 || !k.cgroups[cg] || len(s.cgroupOwner) != 1 || s.cgroupOwner[cg] != scopePod {
			t.Fatalf("after %d restarts: kernel watches cgroups %v, owners %v; want %v owned by the pod", i, k.cgroups, s.cgroupOwner, want)
		}
	}
	if want := map[uint32]bool{n.netns(t): true}; len(k.netns) != 1 || !k.netns[n.netns(t)] {
		t.Errorf("kernel watches netns %v, want %v", k.netns, want)
	}
}

// TestWatchNetnsFailureRetries: when the kernel refuses the pod's netns,
// the namespace is not held (its descriptor is closed), the pod stays
// pending, and the next scan watches it.
func TestWatchNetnsFailureRetries(t *testing.T) {
	n := newScopeNode(t)
	k := &scopeKernel{netns: map[uint32]bool{}, cgroups: map[uint64]bool{}, failNetns: 1}
	s := NewScopes(k, nopBinder{}, n.root, n.proc, zerolog.Nop())
	defer s.CloseFiles()
	id := strings.Repeat("ab", 32)
	n.container(t, id)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s.PodUpdate(podWith(id), now)
	ps := s.pods[scopePod]
	if len(k.netns) != 0 || ps.netnsFile != nil || ps.netns != 0 || !ps.pending() {
		t.Fatalf("after a refused watch: kernel netns %v, held %v, netns %d, pending %v; want none, nil, 0, true",
			k.netns, ps.netnsFile, ps.netns, ps.pending())
	}
	if got := n.openNetnsFiles(t); got != 0 {
		t.Errorf("%d descriptors open on the refused netns, want 0", got)
	}
	s.Sync(now.Add(rescanEvery), false)
	ino := n.netns(t)
	if len(k.netns) != 1 || !k.netns[ino] || ps.netns != ino || ps.pending() {
		t.Errorf("after the next scan: kernel netns %v, netns %d, pending %v; want {%d}, %d, false", k.netns, ps.netns, ps.pending(), ino, ino)
	}
	if got := n.openNetnsFiles(t); got != 1 {
		t.Errorf("%d descriptors open on the watched netns, want 1 (held)", got)
	}
}
