//go:build vmguest

package kernel

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestVMGuest is the kernel matrix's suite (TestVMMatrix): it runs as /init
// of a VM, or natively on the host in a network namespace of its own
// (DRAINWATCH_VM_STAGE=native), and nowhere else. In a watched namespace it
// makes known traffic and checks every count exactly, printing one MATRIX
// line per feature.
func TestVMGuest(t *testing.T) {
	if role := os.Getenv("DRAINWATCH_VM_ROLE"); role != "" {
		guestChild(role)
		return
	}
	switch os.Getenv("DRAINWATCH_VM_STAGE") {
	case "":
		if os.Getenv("DRAINWATCH_VM_GUEST") != "1" {
			t.Fatal("TestVMGuest runs only inside TestVMMatrix (as a VM's /init or natively)")
		}
		bootGuest(t)
	case "native":
		loopbackUp(t)
	}
	runMatrixSuite(t)
}

func runMatrixSuite(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	netns := uint32(st.Ino)
	// Detail: every accept as an event, as the daemon asks for a terminating pod.
	k, err := Open(Options{Logger: zerolog.New(zerolog.NewTestWriter(t)), Detail: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := k.WatchNetns(netns); err != nil {
		t.Fatal(err)
	}
	// The suite's namespace is terminating from the start: accepts are
	// sent one by one (detail), which also proves the detail handover
	// (an RCU grace period through membarrier) on every kernel.
	if err := k.SetDetail(netns, true); err != nil {
		t.Fatal(err)
	}
	probes := k.Probes()
	for _, p := range probes {
		fmt.Printf("VMGUEST probe %s %s %s %s\n", p.Name, p.Hook, p.State, p.Detail)
	}
	markBlackholeDst(t, k)
	start := time.Now()
	w := newWorkload(t)
	traffic := time.Since(start)
	evs := collect(k, 30*time.Second, func(evs []collector.Event) bool {
		return countExits(evs, w.sleeper) > 0 && countExits(evs, w.holder) > 0
	})
	evs = append(evs, drain(k, time.Second)...)
	fmt.Printf("VMGUEST traffic %.1fs, events %.1fs, holder exits %d\n",
		traffic.Seconds(), (time.Since(start) - traffic).Seconds(), countExits(evs, w.holder))
	checkMatrix(t, probes, w.features(evs))
	checkOutcome(t, probes, netns, evs, w)
	guestInflight(t, k)
}

// bootGuest mounts what init needs, brings loopback up and re-executes the
// test: cilium/ebpf reads /proc/self/mountinfo once, at first use, which
// must come after /proc is mounted.
func bootGuest(t *testing.T) {
	for _, m := range [][3]string{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}} {
		if err := unix.Mount(m[0], m[1], m[2], 0, ""); err != nil {
			t.Fatalf("mount %s: %v", m[1], err)
		}
	}
	loopbackUp(t)
	t.Fatal(unix.Exec("/init", os.Args, append(os.Environ(), "DRAINWATCH_VM_STAGE=2")))
}

func loopbackUp(t *testing.T) {
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	defer unix.Close(fd)
	ifr, _ := unix.NewIfreq("lo")
	_ = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("lo up: %v", err)
	}
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}
