package kernel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// TestInflightKilledBySigkill: K requests held in flight against CPython's
// http.server (HTTP/1.1 keep-alive), then SIGKILL. Exactly K
// conn_closed_inflight with cause sigkill, one per in-flight connection;
// idle connections (connected, nothing sent) and answered keep-alive
// connections are not counted.
func TestInflightKilledBySigkill(t *testing.T) {
	const inflight, idle, answered = 5, 3, 4
	py := requirePython(t)
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	cmd := l.startServer(t, 8080, py, "-m", "http.server", "8080", "--bind", serverIP, "--protocol", "HTTP/1.1")
	want := map[uint16]bool{}
	for i := 0; i < inflight; i++ {
		c := mustDial(t, l)
		// Headers without the final blank line: the server reads them
		// and waits for the rest; the request is never answered.
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n", serverIP)
		waitAcked(t, c)
		want[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = true
	}
	for i := 0; i < idle; i++ {
		waitAcked(t, mustDial(t, l))
	}
	for i := 0; i < answered; i++ {
		getKeepAlive(t, mustDial(t, l))
	}
	evs := killAndCollect(t, k, cmd, srv)
	got := map[uint16]bool{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		if ev.Cause != collector.CauseSigkill || ev.NetnsIno != srv || ev.PID != uint32(cmd.Process.Pid) || !want[ev.Remote.Port()] {
			t.Errorf("unexpected %+v", ev)
		}
		got[ev.Remote.Port()] = true
	}
	if n := countType(evs, collector.EventConnClosedInflight, 0); n != inflight || len(got) != inflight {
		t.Fatalf("%d conn_closed_inflight events (%d connections), want exactly %d", n, len(got), inflight)
	}
}

func mustDial(t *testing.T, l *lab) *net.TCPConn {
	t.Helper()
	c, err := l.dial(8080)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitAcked waits (bounded) until the server's kernel acknowledged every
// byte sent on c: from then on the bytes are the server's, read or not.
func waitAcked(t *testing.T, c *net.TCPConn) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		var info *unix.TCPInfo
		var gerr error
		if err := raw.Control(func(fd uintptr) { info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if info.Unacked == 0 && info.State == unix.BPF_TCP_ESTABLISHED {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server did not acknowledge the request within 2s")
}

// getKeepAlive sends one complete request and reads the whole answer,
// leaving the connection open and idle.
func getKeepAlive(t *testing.T, c *net.TCPConn) {
	t.Helper()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", serverIP)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.Close {
		t.Fatalf("keep-alive answer: err %v, close %v, length %s", err, resp.Close, strconv.FormatInt(resp.ContentLength, 10))
	}
}

// TestInflightSocketRule: the test is the server, on raw sockets, and
// leaves each connection in one state the socket rule (bpf/inflight.h)
// must judge, then closes it (no message probes attached). Exactly the
// connections with a request read and unanswered (kind request) or unread
// bytes (kind unread) report conn_closed_inflight, cause close.
func TestInflightSocketRule(t *testing.T) {
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	lfd := rawListener(t, l, 8080)
	cases := []struct {
		name string
		run  func(s *rawConn)
		want collector.InflightKind
	}{
		{"connected, nothing sent", func(s *rawConn) {}, collector.InflightNone},
		{"request read, unanswered", func(s *rawConn) { s.clientSends("GET /a") }, collector.InflightRequest},
		{"request unread", func(s *rawConn) { s.clientSendsUnread("GET /a") }, collector.InflightUnread},
		{"answered, answer acked", func(s *rawConn) { s.exchange(); s.answerAcked() }, collector.InflightNone},
		{"answered, closed before the client acks", func(s *rawConn) {
			s.clientSends("GET /a")
			s.serverSends("200 a")
		}, collector.InflightNone},
		{"answer acked, next request read", func(s *rawConn) {
			s.exchange()
			s.answerAcked()
			s.clientSends("GET /b")
		}, collector.InflightRequest},
		{"next request carries the ack of the answer", func(s *rawConn) {
			s.exchange()
			s.clientSends("GET /b") // sent at once: the ACK of the answer rides on it
		}, collector.InflightRequest},
		{"next request in two segments", func(s *rawConn) {
			s.exchange()
			s.clientSends("GET /b")
			s.clientSends(" HTTP/1.1")
		}, collector.InflightRequest},
		{"first request in two segments", func(s *rawConn) {
			s.clientSends("GET /a")
			s.clientSends(" HTTP/1.1")
		}, collector.InflightRequest},
		{"request read, then the client's FIN", func(s *rawConn) {
			s.clientSends("GET /a")
			s.clientHalfCloses()
		}, collector.InflightRequest},
		{"answered, then the client's FIN", func(s *rawConn) {
			s.exchange()
			s.answerAcked()
			s.clientHalfCloses()
		}, collector.InflightNone},
		{"answered, a later request read, then the client's FIN", func(s *rawConn) {
			s.exchange()
			s.answerAcked()
			// A jiffy apart at least: a request and a lone FIN within
			// the jiffy of the previous answer count as idle
			// (bpf/inflight.h).
			time.Sleep(20 * time.Millisecond)
			s.clientSends("GET /b")
			s.clientHalfCloses()
		}, collector.InflightRequest},
		{"connected, then the client's FIN, EOF read", func(s *rawConn) {
			s.clientHalfCloses()
			s.serverReadsEOF()
		}, collector.InflightNone},
		{"request with its FIN, unread", func(s *rawConn) {
			s.clientSendsUnread("GET /a")
			s.clientHalfCloses()
		}, collector.InflightUnread},
	}
	want := map[uint16]collector.InflightKind{}
	for _, tc := range cases {
		s := acceptRaw(t, l, lfd)
		tc.run(s)
		unix.Close(s.fd)
		if tc.want != collector.InflightNone {
			want[s.clientPort()] = tc.want
		}
		t.Logf("%s: client port %d, want %v", tc.name, s.clientPort(), tc.want)
	}
	evs := drain(k, 500*time.Millisecond)
	got := 0
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		got++
		if kind, ok := want[ev.Remote.Port()]; !ok || ev.Inflight != kind || ev.Cause != collector.CauseClose {
			t.Errorf("unexpected %+v (want kind %v)", ev, want[ev.Remote.Port()])
		}
	}
	if got != len(want) {
		t.Fatalf("%d conn_closed_inflight events, want exactly %d", got, len(want))
	}
}

// rawConn is one accepted connection: the server's fd, and the client.
type rawConn struct {
	t  *testing.T
	fd int
	c  *net.TCPConn
}

func acceptRaw(t *testing.T, l *lab, lfd int) *rawConn {
	t.Helper()
	c := mustDial(t, l)
	fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, fd: fd, c: c}
}

func (s *rawConn) clientPort() uint16 { return uint16(s.c.LocalAddr().(*net.TCPAddr).Port) }

// clientSendsUnread sends b and waits until the server's kernel has it.
func (s *rawConn) clientSendsUnread(b string) {
	if _, err := s.c.Write([]byte(b)); err != nil {
		s.t.Fatal(err)
	}
	waitAcked(s.t, s.c)
}

// clientSends sends b and has the server read exactly it.
func (s *rawConn) clientSends(b string) {
	if _, err := s.c.Write([]byte(b)); err != nil {
		s.t.Fatal(err)
	}
	if _, err := io.ReadFull(fdReader(s.fd), make([]byte, len(b))); err != nil {
		s.t.Fatal(err)
	}
}

// serverSends answers b and has the client read exactly it.
func (s *rawConn) serverSends(b string) {
	if _, err := unix.Write(s.fd, []byte(b)); err != nil {
		s.t.Fatal(err)
	}
	s.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(s.c, make([]byte, len(b))); err != nil {
		s.t.Fatal(err)
	}
}

// exchange is one request read and answered.
func (s *rawConn) exchange() {
	s.clientSends("GET /a")
	s.serverSends("200 a")
}

// answerAcked waits (bounded) until the client acknowledged everything
// the server sent: a pure ACK, the client's delayed one (40 ms or more).
func (s *rawConn) answerAcked() {
	s.waitServer("the client's ACK of the answer", func(i *unix.TCPInfo) bool { return i.Unacked == 0 })
}

// clientHalfCloses sends the client's FIN and waits until the server's
// kernel has it (CLOSE_WAIT); the server does not read the EOF.
func (s *rawConn) clientHalfCloses() {
	if err := s.c.CloseWrite(); err != nil {
		s.t.Fatal(err)
	}
	s.waitServer("the client's FIN", func(i *unix.TCPInfo) bool { return i.State == unix.BPF_TCP_CLOSE_WAIT })
}

func (s *rawConn) serverReadsEOF() {
	if n, err := unix.Read(s.fd, make([]byte, 1)); n != 0 || err != nil {
		s.t.Fatalf("read %d bytes, %v; want EOF", n, err)
	}
}

func (s *rawConn) waitServer(what string, done func(*unix.TCPInfo) bool) {
	for i := 0; i < 200; i++ {
		info, err := unix.GetsockoptTCPInfo(s.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			s.t.Fatal(err)
		}
		if done(info) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("no %s within 2s", what)
}

// TestInflightKeepAliveHammerThenSigkill: 50 keep-alive connections hammer
// the Go HTTP/1.1 server (testdata/h2server) with 100 requests each, all at
// once; right after its last answer every even connection sends a request
// the server holds ("/slow"), usually within the jiffy of that answer.
// Then SIGKILL: exactly the 25 connections whose client has a request
// outstanding report conn_closed_inflight, cause sigkill; the 25 idle
// ones, just done hammering, do not.
func TestInflightKeepAliveHammerThenSigkill(t *testing.T) {
	const conns, requests = 50, 100
	bin := buildH2Server(t)
	l := newLab(t)
	k := openTestKernel(t, Options{})
	srv := l.server.Inode()
	if err := k.WatchNetns(srv); err != nil {
		t.Fatal(err)
	}
	heldFile := filepath.Join(t.TempDir(), "held")
	cmd := l.startServer(t, 8080, bin, "-addr", serverIP+":8080", "-held", heldFile)
	want := map[uint16]bool{}
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		c := mustDial(t, l)
		hold := i%2 == 0
		if hold {
			want[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = true
		}
		go func() { errs <- hammer(c, requests, hold) }()
	}
	for i := 0; i < conns; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitFileSize(t, heldFile, int64(len(want)))
	evs := killAndCollect(t, k, cmd, srv)
	got := map[uint16]bool{}
	for _, ev := range evs {
		if ev.Type != collector.EventConnClosedInflight {
			continue
		}
		if ev.Cause != collector.CauseSigkill || ev.Inflight != collector.InflightRequest || !want[ev.Remote.Port()] {
			t.Errorf("unexpected %+v", ev)
		}
		got[ev.Remote.Port()] = true
	}
	if n := countType(evs, collector.EventConnClosedInflight, 0); n != len(want) || len(got) != len(want) {
		t.Fatalf("%d conn_closed_inflight events (%d connections), want exactly %d", n, len(got), len(want))
	}
}

// hammer sends n requests on c one after the other, reading each answer
// whole, then with hold one request the server never answers.
func hammer(c *net.TCPConn, n int, hold bool) error {
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", serverIP); err != nil {
			return err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return fmt.Errorf("answer %d: %w", i, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		resp.Body.Close()
	}
	if hold {
		_, err := fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", serverIP)
		return err
	}
	return nil
}
