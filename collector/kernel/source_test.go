package kernel

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestLocalSourceOfConnections: a thread named like the kubelet opens
// connections from the client namespace (the node, as it were) to the
// server's address, refused on a closed port and accepted on an open one;
// another thread does the same. Exactly the kubelet's pod-side events carry
// it as their source (pid, comm, cgroup); the others carry none. The same
// connections to an address not listed with WatchAddr carry no source.
func TestLocalSourceOfConnections(t *testing.T) {
	const probes, clients = 5, 3
	l := newLab(t)
	k := openTestKernel(t, Options{Detail: true})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	if err := k.WatchAddr(netip.MustParseAddr(serverIP)); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := l.server.Do(func() (err error) { ln, err = net.Listen("tcp4", serverIP+":8080"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for i := 0; i < probes; i++ {
		connectAs(t, l, "kubelet", 8080, nil)
		connectAs(t, l, "kubelet", 9999, syscall.ECONNREFUSED)
	}
	for i := 0; i < clients; i++ {
		connectAs(t, l, "", 8080, nil)
		connectAs(t, l, "", 9999, syscall.ECONNREFUSED)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventRefused, srv) >= probes+clients && countType(evs, collector.EventAccept, srv) >= probes+clients
	})
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	for _, typ := range []collector.EventType{collector.EventRefused, collector.EventAccept} {
		// Both threads are tasks of this node: the other one is a
		// node-local source too, under the test binary's name.
		var fromKubelet, fromOther int
		for _, ev := range evs {
			if ev.Type != typ || ev.NetnsIno != srv {
				continue
			}
			switch {
			case ev.SenderPID != uint32(unix.Getpid()) || ev.SenderCgroup == 0:
				t.Errorf("%s with an unexpected source: pid %d comm %q cgroup %d", typ, ev.SenderPID, ev.SenderComm, ev.SenderCgroup)
			case ev.SenderComm.String() == "kubelet":
				fromKubelet++
			default:
				fromOther++
			}
		}
		if fromKubelet != probes || fromOther != clients {
			t.Errorf("%s: %d from kubelet, %d from the other thread; want %d and %d", typ, fromKubelet, fromOther, probes, clients)
		}
	}
	if err := k.UnwatchAddr(netip.MustParseAddr(serverIP)); err != nil {
		t.Fatal(err)
	}
	connectAs(t, l, "kubelet", 9999, syscall.ECONNREFUSED)
	evs = collect(k, 5*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventRefused, srv) >= 1 })
	for _, ev := range evs {
		if ev.Type == collector.EventRefused && ev.SenderPID != 0 {
			t.Errorf("refused to an unlisted address carries source %q", ev.SenderComm)
		}
	}
}

// connectAs connects from the client namespace on a thread named comm
// (unchanged when empty) and checks the outcome.
func connectAs(t *testing.T, l *lab, comm string, port int, want error) {
	t.Helper()
	err := l.client.Do(func() error {
		var old [16]byte
		if comm != "" {
			name := append([]byte(comm), 0)
			if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0); err != nil {
				return err
			}
			if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
				return err
			}
			defer unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrInet4{Port: port, Addr: netip.MustParseAddr(serverIP).As4()}
		return unix.Connect(fd, sa)
	})
	if err != want {
		t.Fatalf("connect as %q to :%d: %v, want %v", comm, port, err, want)
	}
}

// TestLocalSourceThroughRedirect: the pod's own iptables REDIRECT (a
// mesh's, 8080 to the proxy's 15006) changes the port the pod sees from the
// one the kubelet dialed. Its probes through it are still its own, accepted
// while the proxy listens and refused once it is gone, and a client's
// connections carry no kubelet.
func TestLocalSourceThroughRedirect(t *testing.T) {
	const probes = 4
	l := newLab(t)
	k := openTestKernel(t, Options{Detail: true})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	if err := k.WatchAddr(netip.MustParseAddr(serverIP)); err != nil {
		t.Fatal(err)
	}
	if out, err := l.server.Command("iptables", "-t", "nat", "-A", "PREROUTING", "-p", "tcp", "--dport", "8080",
		"-j", "REDIRECT", "--to-ports", "15006").CombinedOutput(); err != nil {
		t.Fatalf("iptables REDIRECT: %v: %s", err, out)
	}
	var ln net.Listener
	if err := l.server.Do(func() (err error) { ln, err = net.Listen("tcp4", "0.0.0.0:15006"); return err }); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for range probes {
		connectAs(t, l, "kubelet", 8080, nil)
	}
	connectAs(t, l, "", 8080, nil)
	ln.Close()
	for range probes {
		connectAs(t, l, "kubelet", 8080, syscall.ECONNREFUSED)
	}
	connectAs(t, l, "", 8080, syscall.ECONNREFUSED)
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventRefused, srv) >= probes+1 && countType(evs, collector.EventAccept, srv) >= probes+1
	})
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	for _, typ := range []collector.EventType{collector.EventAccept, collector.EventRefused} {
		var fromKubelet, other int
		for _, ev := range evs {
			if ev.Type != typ || ev.NetnsIno != srv {
				continue
			}
			if ev.Local.Port() != 15006 {
				t.Errorf("%s at %s, want the redirected port 15006", typ, ev.Local)
			}
			if ev.SenderComm.String() == "kubelet" {
				fromKubelet++
			} else {
				other++
			}
		}
		if fromKubelet != probes || other != 1 {
			t.Errorf("%s: %d from kubelet, %d other; want %d and 1", typ, fromKubelet, other, probes)
		}
	}
}
