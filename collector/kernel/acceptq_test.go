package kernel

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestAcceptQueueResetAtListenerClose: K clients complete their handshake
// and send a request to a listener that never accepts, S more only
// connect; the listener closes (a server shutting down with connections in
// its accept queue). Every client sees ECONNRESET, and the kernel reports
// exactly those K+S connections, torn down in the accept queue by a live
// process (cause close): the K with their request unread, the S with
// nothing in flight.
func TestAcceptQueueResetAtListenerClose(t *testing.T) {
	const withRequest, silent = 3, 2
	const queued = withRequest + silent
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	var lfd int
	err := l.server.Do(func() (err error) {
		if lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err != nil {
			return err
		}
		if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: 8080, Addr: netip.MustParseAddr(serverIP).As4()}); err != nil {
			return err
		}
		return unix.Listen(lfd, 16)
	})
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	ports := map[uint16]bool{}
	for i := range queued {
		c := mustDial(t, l)
		if i < withRequest {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", serverIP)
		}
		waitAcked(t, c)
		ports[uint16(c.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port())] = true
		f, err := c.File()
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, int(f.Fd()))
	}
	if err := unix.Close(lfd); err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, fd := range fds {
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 3})
		_, err := unix.Read(fd, make([]byte, 64))
		if errors.Is(err, syscall.ECONNRESET) {
			resets++
		}
	}
	evs := collect(k, 5*time.Second, func(evs []collector.Event) bool {
		return countType(evs, collector.EventConnClosedInflight, srv) >= queued
	})
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	got := map[collector.InflightKind]int{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight || ev.NetnsIno != srv {
			continue
		}
		if ev.Cause != collector.CauseClose || !ports[ev.Remote.Port()] {
			t.Errorf("unexpected %v cause %v inflight %v from :%d", ev.Type, ev.Cause, ev.Inflight, ev.Remote.Port())
		}
		got[ev.Inflight]++
	}
	if resets != queued || got[collector.InflightUnread] != withRequest || got[collector.InflightNone] != silent || len(got) != 2 {
		t.Fatalf("clients saw %d resets, kernel reported %v; want %d resets, %d unread and %d none", resets, got, queued, withRequest, silent)
	}
}
