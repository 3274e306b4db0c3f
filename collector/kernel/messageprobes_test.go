package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMessageProbesPinnedAcrossRestart: attached message probes are pinned
// with the other links, so a restart (Close, Open with the same PinPath)
// keeps them attached in on-demand mode; detaching removes their pins;
// attaching after a resume loads the object against the pinned maps, and
// the programs run (an HTTP/2 preface read marks the connection HTTP/2 in
// the shared conns map); off mode detaches them at Open.
func TestMessageProbesPinnedAcrossRestart(t *testing.T) {
	root := pinRoot(t)
	l := newLab(t)
	k1 := openPinned(t, Options{PinPath: root, MessageProbes: MessageProbesOnDemand})
	requireMessageProbes(t, k1, ProbeDetached)
	if err := k1.WatchNetns(l.server.Inode()); err != nil {
		t.Fatal(err)
	}
	if err := k1.SetMessageProbes(true); err != nil {
		t.Fatal(err)
	}
	pin := filepath.Join(k1.pins.dir(), linkPinName(probeProg{name: "sock_recv", prog: "sock_recv"}))
	requirePin(t, pin, true)
	k1.Close()

	k2 := openPinned(t, Options{PinPath: root, MessageProbes: MessageProbesOnDemand})
	if !k2.Resumed() {
		t.Fatal("the second run did not resume the pins")
	}
	requireMessageProbes(t, k2, ProbeAttached)
	if err := k2.SetMessageProbes(false); err != nil {
		t.Fatal(err)
	}
	requireMessageProbes(t, k2, ProbeDetached)
	requirePin(t, pin, false)
	if err := k2.SetMessageProbes(true); err != nil {
		t.Fatal(err)
	}
	requireMessageProbes(t, k2, ProbeAttached)
	requirePin(t, pin, true)
	requirePrefaceFollowed(t, k2, l)
	k2.Close()

	k3 := openPinned(t, Options{PinPath: root, MessageProbes: MessageProbesOff})
	requireMessageProbes(t, k3, ProbeDetached)
	requirePin(t, pin, false)
	if err := k3.SetMessageProbes(true); err == nil {
		t.Fatal("SetMessageProbes(true) accepted with MessageProbesOff")
	}
}

func requirePin(t *testing.T, path string, want bool) {
	t.Helper()
	_, err := os.Stat(path)
	if got := err == nil; got != want || (err != nil && !errors.Is(err, os.ErrNotExist)) {
		t.Fatalf("pin %s exists: %v (%v), want %v", path, got, err, want)
	}
}

// requirePrefaceFollowed has the server read an HTTP/2 preface and checks
// that the message probes marked exactly that connection HTTP/2.
func requirePrefaceFollowed(t *testing.T, k *Kernel, l *lab) {
	t.Helper()
	lfd := rawListener(t, l, 8081)
	c, err := l.dial(8081)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(h2FrameSettings, 0, 0, nil)...)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	fd := acceptFd(t, lfd)
	if err := readvExactly(fd, len(hello), 64); err != nil {
		t.Fatal(err)
	}
	var key uint64
	var conn inflightConn
	h2 := 0
	for it := k.maps.byName["conns"].Iterate(); it.Next(&key, &conn); {
		if conn.Proto == protoH2 {
			h2++
		}
	}
	if h2 != 1 {
		t.Fatalf("%d HTTP/2 connections in conns, want exactly 1", h2)
	}
}

func acceptFd(t *testing.T, lfd int) int {
	t.Helper()
	fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}
