package kernel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
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
