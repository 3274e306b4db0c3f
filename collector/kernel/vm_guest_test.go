//go:build vmguest

package kernel

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestVMGuest runs as /init of TestOtherKernelInVM's VM (and nowhere else):
// probes load, refused/accept counts are exact on loopback, and a process
// dying of SIGTERM exits once with 143.
func TestVMGuest(t *testing.T) {
	if os.Getenv("DRAINWATCH_VM_SLEEP") == "1" {
		time.Sleep(time.Minute)
		return
	}
	if os.Getenv("DRAINWATCH_VM_GUEST") != "1" {
		t.Fatal("TestVMGuest runs only as /init inside TestOtherKernelInVM's VM")
	}
	if os.Getenv("DRAINWATCH_VM_STAGE") != "2" {
		bootGuest(t)
	}
	k, err := Open(Options{Logger: zerolog.New(zerolog.NewTestWriter(t)), WatchAll: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, p := range k.Probes() {
		fmt.Printf("VMGUEST probe %s %s %s %s\n", p.Name, p.Hook, p.State, p.Detail)
		if !p.Attached() && p.Name != "sock_recv" && p.Name != "sock_send" {
			t.Errorf("probe %s unavailable: %s", p.Name, p.Detail)
		}
	}
	port, child := guestTraffic(t)
	evs := collect(k, 30*time.Second, func(evs []collector.Event) bool { return countExits(evs, child) > 0 })
	evs = append(evs, drain(k, time.Second)...)
	var refused, accepted int
	for _, ev := range evs {
		switch {
		case ev.Type == collector.EventRefused && ev.Local.String() == "127.0.0.1:9":
			refused++
		case ev.Type == collector.EventAccept && ev.Local.Port() == port:
			accepted++
		case ev.Type == collector.EventExit && ev.PID == child && (ev.ExitCode != 143 || ev.ExitSignal != 15):
			t.Errorf("child exit %+v: want 143/15", ev)
		}
	}
	fmt.Printf("VMGUEST refused=%d accepted=%d child_exits=%d\n", refused, accepted, countExits(evs, child))
	if refused != 5 || accepted != 3 || countExits(evs, child) != 1 {
		t.Errorf("refused %d, accepted %d, child exits %d; want 5, 3, 1", refused, accepted, countExits(evs, child))
	}
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
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	ifr, _ := unix.NewIfreq("lo")
	_ = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("lo up: %v", err)
	}
	t.Fatal(unix.Exec("/init", os.Args, append(os.Environ(), "DRAINWATCH_VM_STAGE=2")))
}

// guestTraffic makes 5 refused attempts and 3 accepted connections on
// loopback, then SIGTERMs a child; it returns the listener port and the
// child's pid.
func guestTraffic(t *testing.T) (uint16, uint32) {
	for i := 0; i < 5; i++ {
		if _, err := net.Dial("tcp4", "127.0.0.1:9"); err == nil {
			t.Fatal("port 9 accepted a connection")
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		s.Close()
	}
	ln.Close()
	child := exec.Command("/init", "-test.run=^TestVMGuest$")
	child.Env = append(os.Environ(), "DRAINWATCH_VM_SLEEP=1")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the child reaches its sleep (not an assertion)
	_ = child.Process.Signal(syscall.SIGTERM)
	_ = child.Wait()
	return uint16(ln.Addr().(*net.TCPAddr).Port), uint32(child.Process.Pid)
}
