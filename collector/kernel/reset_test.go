package kernel

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/collector"
)

// resetSources are the ways RSTs are seen: tcp_send_reset with its reason
// (Linux >= 6.10) and the two fallbacks of older kernels, forced, where
// tcp_send_reset without its reason sees the RSTs of sockets (reason 0).
var resetSources = []struct {
	name string
	opts Options
	// named: the source reports the kernel's reason for a socket's RST.
	named bool
	// noSocket: the source sees RSTs answering segments without a socket.
	noSocket bool
}{
	{"tcp_send_reset", Options{}, true, true},
	{"tcp_send_reset_sock+kfree_skb", Options{RefusedFallback: true}, false, true},
	{"tcp_send_reset_sock+kfree_skb_rcv_syn", Options{RefusedByLocation: true}, false, false},
}

// forEachResetSource runs test once per source of RSTs, with the reason a
// socket's RST should carry: want from the kernel, 0 where it names none.
func forEachResetSource(t *testing.T, test func(t *testing.T, opts Options, reason func(want uint32) uint32)) {
	for _, src := range resetSources {
		t.Run(src.name, func(t *testing.T) {
			test(t, src.opts, func(want uint32) uint32 {
				if src.named {
					return want
				}
				return 0
			})
		})
	}
}

// TestResetAndCloseCause: a server closing a connection whose request it
// never read sends a RST (reason TCP_ABORT_ON_CLOSE) and loses an in-flight
// request by its own close (cause close); the same server answering first
// and then closing loses nothing. One socket cookie follows the connection
// from accept to reset to conn_closed_inflight. Each source sees it.
func TestResetAndCloseCause(t *testing.T) { forEachResetSource(t, testResetAndCloseCause) }

func testResetAndCloseCause(t *testing.T, opts Options, reason func(uint32) uint32) {
	abortOnClose := reason(11) // SK_RST_REASON_TCP_ABORT_ON_CLOSE
	l := newLab(t)
	opts.Detail = true
	k := openTestKernel(t, opts)
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
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventConnClosedInflight, srv) > 0 })
	evs = append(evs, drain(k, 500*time.Millisecond)...)
	cookies := map[collector.EventType]uint64{}
	for _, ev := range evs {
		if ev.Remote.Port() == unread {
			cookies[ev.Type] = ev.SockCookie
		}
	}
	if countType(evs, collector.EventAccept, srv) != 2 || countType(evs, collector.EventReset, srv) != 1 || countType(evs, collector.EventConnClosedInflight, srv) != 1 {
		t.Fatalf("want 2 accept, 1 reset, 1 conn_closed_inflight; got %v", typeCounts(evs))
	}
	for _, ev := range evs {
		switch {
		case ev.Type == collector.EventReset && (ev.Reason != abortOnClose || ev.Remote.Port() != unread):
			t.Errorf("reset %+v: want reason %d on the unread connection", ev, abortOnClose)
		case ev.Type == collector.EventConnClosedInflight && (ev.Cause != collector.CauseClose || ev.Remote.Port() != unread):
			t.Errorf("conn_closed_inflight %+v: want cause close on the unread connection", ev)
		}
	}
	if c := cookies[collector.EventAccept]; c == 0 || cookies[collector.EventReset] != c || cookies[collector.EventConnClosedInflight] != c {
		t.Errorf("socket cookies differ along the connection: %v", cookies)
	}
	// The server is this process: its close sent the RST, in its context.
	for _, ev := range evs {
		if ev.Type == collector.EventReset {
			assertSender(t, ev, uint32(os.Getpid()), selfComm(t))
		}
	}
}

// TestResetAtExitNamesTheExitingProcess: a real server process exits with a
// request it accepted but never read; the exit closes its files and the
// kernel resets that connection in the exiting process's context. The reset
// carries that process's pid, which correlate's connections_reset_at_exit
// needs. Each source sees it.
func TestResetAtExitNamesTheExitingProcess(t *testing.T) {
	forEachResetSource(t, testResetAtExitNamesTheExitingProcess)
}

func testResetAtExitNamesTheExitingProcess(t *testing.T, opts Options, reason func(uint32) uint32) {
	abortOnClose := reason(11) // SK_RST_REASON_TCP_ABORT_ON_CLOSE
	py := requirePython(t)
	l := newLab(t)
	k := openTestKernel(t, opts)
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	// Accepts the readiness probe of startProcess, then one connection it
	// never reads; when stdin closes it exits without closing anything
	// itself (os._exit), so the exit closes the connection.
	script := "import os,socket,sys\n" +
		"s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n" +
		"s.bind(('" + serverIP + "', 8080)); s.listen()\n" +
		"s.accept()[0].close(); c=s.accept()[0]; sys.stdin.read(); os._exit(0)\n"
	cmd := exec.Command(py, "-c", script)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	cmd = startProcess(t, l, cmd)
	c := mustDial(t, l)
	if _, err := c.Write([]byte("request\n")); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, c)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server: %v", err)
	}
	port := uint16(c.LocalAddr().(*net.TCPAddr).Port)
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventReset, srv) > 0 })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	if n := countType(evs, collector.EventReset, srv); n != 1 {
		t.Fatalf("%d reset events, want 1: %v", n, typeCounts(evs))
	}
	for _, ev := range evs {
		if ev.Type == collector.EventReset {
			if ev.Reason != abortOnClose || ev.Remote.Port() != port {
				t.Errorf("reset %+v: want reason %d on port %d", ev, abortOnClose, port)
			}
			assertSender(t, ev, uint32(cmd.Process.Pid), "python3")
		}
	}
}

// TestResetInSoftirqHasNoProcess: a RST the kernel sends in softirq (here:
// data arriving for a connection the server closed) names no process,
// although the packet was sent, and possibly received, in this process's
// context: current is not the sender there. Each source sees it.
func TestResetInSoftirqHasNoProcess(t *testing.T) {
	forEachResetSource(t, testResetInSoftirqHasNoProcess)
}

func testResetInSoftirqHasNoProcess(t *testing.T, opts Options, reason func(uint32) uint32) {
	// The closed connection answers as an orphaned FIN_WAIT2 socket: the
	// ACK of its FIN was processed from the backlog of the close, which
	// keeps it a full socket (a timewait socket's RST, reason 9, would be
	// unseen below Linux 6.10, as by the fallbacks).
	abortOnData := reason(8) // SK_RST_REASON_TCP_ABORT_ON_DATA
	l := newLab(t)
	k := openTestKernel(t, opts)
	srv := l.server.Inode()
	must(t, k.WatchNetns(srv))
	ln, err := l.server.Listen("tcp4", serverIP+":8080")
	must(t, err)
	defer ln.Close()
	c := mustDial(t, l)
	s, err := ln.Accept()
	must(t, err)
	must(t, s.Close())
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read after the server's close: %d, %v; want EOF", n, err)
	}
	if _, err := c.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	evs := collect(k, 10*time.Second, func(evs []collector.Event) bool { return countType(evs, collector.EventReset, srv) > 0 })
	evs = append(evs, drain(k, 300*time.Millisecond)...)
	if n := countType(evs, collector.EventReset, srv); n != 1 {
		t.Fatalf("%d reset events, want 1: %v", n, typeCounts(evs))
	}
	for _, ev := range evs {
		if ev.Type == collector.EventReset {
			if ev.Reason != abortOnData || ev.Remote.Port() != uint16(c.LocalAddr().(*net.TCPAddr).Port) {
				t.Errorf("reset %+v: want reason %d on the client's connection", ev, abortOnData)
			}
			assertSender(t, ev, 0, "")
		}
	}
}

// assertSender checks the process a reset names: pid and comm exactly, and a
// tid of that process (0 with pid 0).
func assertSender(t *testing.T, ev collector.Event, pid uint32, comm string) {
	t.Helper()
	if ev.PID != pid || ev.Comm.String() != comm {
		t.Errorf("reset sent by pid %d (%q), want pid %d (%q)", ev.PID, ev.Comm.String(), pid, comm)
	}
	if pid == 0 {
		if ev.TID != 0 || ev.CgroupID != 0 {
			t.Errorf("reset in softirq has tid %d, cgroup %d; want 0", ev.TID, ev.CgroupID)
		}
		return
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, ev.TID)); ev.TID == 0 || (pid == uint32(os.Getpid()) && err != nil) {
		t.Errorf("reset tid %d is not a thread of pid %d", ev.TID, pid)
	}
}

func selfComm(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/comm")
	must(t, err)
	return strings.TrimSuffix(string(b), "\n")
}

// startProcess starts cmd in the server namespace like lab.startServer
// (killed at the end of the test, waited for until it listens on 8080),
// for a cmd the caller prepared (pipes).
func startProcess(t *testing.T, l *lab, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	must(t, l.server.Start(cmd))
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for range 100 {
		c, err := l.dial(8080)
		if err == nil {
			c.Close()
			return cmd
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("server did not listen on 8080 within 5s")
	return nil
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

func typeCounts(evs []collector.Event) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		m[ev.Type.String()]++
	}
	return m
}
