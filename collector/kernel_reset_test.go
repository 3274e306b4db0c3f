package collector

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestResetAndCloseCause: a server closing a connection whose request it
// never read sends a RST (reason TCP_ABORT_ON_CLOSE) and loses an in-flight
// request by its own close (cause close); the same server answering first
// and then closing loses nothing. One socket cookie follows the connection
// from accept to reset to conn_closed_inflight.
func TestResetAndCloseCause(t *testing.T) {
	const abortOnClose = 11 // SK_RST_REASON_TCP_ABORT_ON_CLOSE
	l := newLab(t)
	k := openTestKernel(t, KernelOptions{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	unread := exchange(t, l, ln, false)
	exchange(t, l, ln, true)
	evs := collect(k, 10*time.Second, func(evs []Event) bool { return countType(evs, EventConnClosedInflight, srv) > 0 })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	cookies := map[EventType]uint64{}
	for _, ev := range evs {
		if ev.Remote.Port() == unread {
			cookies[ev.Type] = ev.SockCookie
		}
	}
	if countType(evs, EventAccept, srv) != 2 || countType(evs, EventReset, srv) != 1 || countType(evs, EventConnClosedInflight, srv) != 1 {
		t.Fatalf("want 2 accept, 1 reset, 1 conn_closed_inflight; got %v", typeCounts(evs))
	}
	for _, ev := range evs {
		switch {
		case ev.Type == EventReset && (ev.Reason != abortOnClose || ev.Remote.Port() != unread):
			t.Errorf("reset %+v: want reason %d on the unread connection", ev, abortOnClose)
		case ev.Type == EventConnClosedInflight && (ev.Cause != CauseClose || ev.Remote.Port() != unread):
			t.Errorf("conn_closed_inflight %+v: want cause close on the unread connection", ev)
		}
	}
	if c := cookies[EventAccept]; c == 0 || cookies[EventReset] != c || cookies[EventConnClosedInflight] != c {
		t.Errorf("socket cookies differ along the connection: %v", cookies)
	}
}

// exchange opens a connection, sends a request, and has the server either
// answer it before closing or close without reading it. It returns the
// client's port.
func exchange(t *testing.T, l *lab, ln net.Listener, answer bool) uint16 {
	t.Helper()
	c := mustDial(t, l)
	if _, err := c.Write([]byte("request\n")); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, c)
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if answer {
		buf := make([]byte, 8)
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("answer\n"))
		io.ReadFull(c, buf[:7])
	}
	s.Close()
	return uint16(c.LocalAddr().(*net.TCPAddr).Port)
}

func typeCounts(evs []Event) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		m[ev.Type.String()]++
	}
	return m
}
