//go:build vmguest

package kernel

import (
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// guestInflight runs the socket rule's cases on the guest's loopback (the
// guest kernel has no sock_recv_length: the rule alone decides): the
// server is the test, on raw sockets, and closes each connection. Exactly
// the connections with a request unanswered or bytes unread report
// conn_closed_inflight, with their kind.
func guestInflight(t *testing.T, k *Kernel) {
	lfd, port := guestListener(t)
	defer unix.Close(lfd)
	cases := []struct {
		name string
		run  func(s *rawConn)
		want collector.InflightKind
	}{
		{"idle", func(s *rawConn) {}, collector.InflightNone},
		{"request read", func(s *rawConn) { s.clientSends("GET /a") }, collector.InflightRequest},
		{"request unread", func(s *rawConn) { s.clientSendsUnread("GET /a") }, collector.InflightUnread},
		{"answered and acked", func(s *rawConn) { s.exchange(); s.answerAcked() }, collector.InflightNone},
		{"next request read", func(s *rawConn) { s.exchange(); s.answerAcked(); s.clientSends("GET /b") }, collector.InflightRequest},
		{"next request with the ack", func(s *rawConn) { s.exchange(); s.clientSends("GET /b") }, collector.InflightRequest},
		{"request then FIN", func(s *rawConn) { s.clientSends("GET /a"); s.clientHalfCloses() }, collector.InflightRequest},
		{"answered then FIN", func(s *rawConn) { s.exchange(); s.answerAcked(); s.clientHalfCloses() }, collector.InflightNone},
	}
	want := map[uint16]collector.InflightKind{}
	for _, tc := range cases {
		s := acceptLoopback(t, lfd, port)
		tc.run(s)
		unix.Close(s.fd)
		s.c.Close()
		if tc.want != collector.InflightNone {
			want[s.clientPort()] = tc.want
		}
	}
	got, bad := 0, 0
	for _, ev := range drain(k, time.Second) {
		if ev.Type != collector.EventConnClosedInflight || ev.Local.Port() != port {
			continue
		}
		got++
		if kind, ok := want[ev.Remote.Port()]; !ok || ev.Inflight != kind || ev.Cause != collector.CauseClose {
			bad++
			t.Errorf("unexpected %+v", ev)
		}
	}
	fmt.Printf("VMGUEST inflight=%d want=%d unexpected=%d\n", got, len(want), bad)
	if got != len(want) {
		t.Errorf("%d conn_closed_inflight events, want exactly %d", got, len(want))
	}
}

func guestListener(t *testing.T) (int, uint16) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, uint16(sa.(*unix.SockaddrInet4).Port)
}

func acceptLoopback(t *testing.T, lfd int, port uint16) *rawConn {
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, fd: fd, c: c.(*net.TCPConn)}
}
