package daemon_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/collector/kernel"
	"github.com/drainwatch/drainwatch/daemon"
)

// fakeKernel is the kernel side for tests that exercise the daemon's wiring
// without BPF: the test feeds events, and reads which scopes are watched.
type fakeKernel struct {
	events  chan collector.Event
	resumed bool
	// lostInKernel is what Stats reports as ring-buffer reserve failures.
	lostInKernel uint64
	mu           sync.Mutex
	netns        map[uint32]bool
	cgroups      map[uint64]bool
	once         sync.Once
	// reader is what ReaderHealth reports; stall, when set, blocks Stats
	// (called by every tick) until it is closed, signalling stalled first.
	reader  kernel.ReaderHealth
	stall   chan struct{}
	stalled chan struct{}
}

func newFakeKernel(resumed bool) *fakeKernel {
	return &fakeKernel{events: make(chan collector.Event, 1024), resumed: resumed,
		netns: map[uint32]bool{}, cgroups: map[uint64]bool{}}
}

func (k *fakeKernel) open(kernel.Options) (daemon.Kernel, error) { return k, nil }
func (k *fakeKernel) Events() <-chan collector.Event             { return k.events }
func (k *fakeKernel) Resumed() bool                              { return k.resumed }
func (k *fakeKernel) Probes() []kernel.ProbeStatus               { return nil }
func (k *fakeKernel) Stats() (kernel.Stats, error) {
	k.mu.Lock()
	stall, stalled := k.stall, k.stalled
	k.stall, k.stalled = nil, nil
	k.mu.Unlock()
	if stall != nil {
		close(stalled)
		<-stall
	}
	return kernel.Stats{LostInKernel: k.lostInKernel}, nil
}
func (k *fakeKernel) Close() error { k.once.Do(func() { close(k.events) }); return nil }

func (k *fakeKernel) WatchNetns(ino uint32) error { k.set(func() { k.netns[ino] = true }); return nil }
func (k *fakeKernel) UnwatchNetns(ino uint32) error {
	k.set(func() { delete(k.netns, ino) })
	return nil
}
func (k *fakeKernel) WatchCgroup(id uint64) error  { k.set(func() { k.cgroups[id] = true }); return nil }
func (k *fakeKernel) WatchAddr(netip.Addr) error   { return nil }
func (k *fakeKernel) SetDetail(uint32, bool) error { return nil }
func (k *fakeKernel) SetProbeComms([]string) error { return nil }
func (k *fakeKernel) ScopeAccepts(uint32) (collector.AcceptSummary, error) {
	return collector.AcceptSummary{}, nil
}
func (k *fakeKernel) UnwatchAddr(netip.Addr) error   { return nil }
func (k *fakeKernel) BlackholeAddr(netip.Addr) error { return nil }

// ProcessNetns fails as on a kernel without task iterators: the fake's
// /proc is a temp dir, read by the /proc/<pid>/ns/net fallback.
func (k *fakeKernel) ProcessNetns() (map[int]uint32, error) {
	return nil, errors.New("no BPF task iterator in this fake")
}

func (k *fakeKernel) UnwatchCgroup(id uint64) error {
	k.set(func() { delete(k.cgroups, id) })
	return nil
}

func (k *fakeKernel) ReaderHealth() kernel.ReaderHealth {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reader
}

func (k *fakeKernel) set(f func()) { k.mu.Lock(); f(); k.mu.Unlock() }

func (k *fakeKernel) watching(ino uint32, cg uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.netns[ino] && k.cgroups[cg]
}

// fakeNode is a pod's cgroup and /proc as the daemon finds them on a node
// using the systemd cgroup driver and containerd, built in temp dirs: the
// container's cgroup lists one process, whose ns/net is a plain file
// standing for the pod's network namespace.
type fakeNode struct {
	cgroupRoot, procRoot string
	netns                uint32
	cgroupID             uint64
}

const fakeInitPID = 4242

func newFakeNode(t *testing.T, podUID, containerID string) fakeNode {
	t.Helper()
	n := fakeNode{cgroupRoot: t.TempDir(), procRoot: t.TempDir()}
	uid := strings.ReplaceAll(podUID, "-", "_")
	dir := filepath.Join(n.cgroupRoot, "kubepods.slice", "kubepods-besteffort.slice",
		"kubepods-besteffort-pod"+uid+".slice", "cri-containerd-"+containerID+".scope")
	nsFile := filepath.Join(n.procRoot, "4242", "ns", "net")
	must(t, os.MkdirAll(dir, 0o755), os.MkdirAll(filepath.Dir(nsFile), 0o755),
		os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("4242\n"), 0o644),
		os.WriteFile(nsFile, nil, 0o644))
	n.cgroupID, n.netns = inode(t, dir), uint32(inode(t, nsFile))
	return n
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return st.Ino
}

// Kernel events of a termination, as the BPF side reports them.
func stopSignal(n fakeNode, at time.Time) collector.Event {
	return collector.Event{Type: collector.EventSignal, Time: at, CgroupID: n.cgroupID, NetnsIno: n.netns,
		PID: fakeInitPID, TID: fakeInitPID, Signal: 15, TargetInit: true}
}

func refused(n fakeNode, podIP netip.Addr, at time.Time, clientPort uint16) collector.Event {
	return collector.Event{Type: collector.EventRefused, Time: at, NetnsIno: n.netns, Reason: 1,
		Local: netip.AddrPortFrom(podIP, 8080), Remote: netip.AddrPortFrom(netip.MustParseAddr("10.98.200.1"), clientPort)}
}

func initExit(n fakeNode, at time.Time, code int32, sig uint32) collector.Event {
	return collector.Event{Type: collector.EventExit, Time: at, CgroupID: n.cgroupID, NetnsIno: n.netns,
		PID: fakeInitPID, TID: fakeInitPID, TargetInit: true, ExitCode: code, ExitSignal: sig}
}

func (k *fakeKernel) released(ino uint32, cg uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.netns[ino] && !k.cgroups[cg]
}
