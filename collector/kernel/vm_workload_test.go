//go:build vmguest

package kernel

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drainwatch/drainwatch/collector"
)

// The matrix suite's traffic, on loopback of the suite's own namespace.
const (
	nRefused = 5 // SYNs to a closed port
	nAccept  = 3 // connections accepted and closed cleanly
	nReset   = 2 // connections the server closes with unread data: one RST each
	nLate    = 2 // segments to those connections once gone: one RST without a socket each
	nHeld    = 2 // requests a server holds unanswered when SIGKILL hits it
	nIdle    = 2 // answered keep-alive connections idle at the SIGKILL
	// nIdleClosed answered keep-alive connections the server closes after
	// idleClosedAfter without data: one idle_close each.
	nIdleClosed     = 2
	idleClosedAfter = 300 * time.Millisecond
)

// workload is what the suite did, to match the kernel's events against.
type workload struct {
	acceptPort, holdPort uint16
	idlePort             uint16
	resetPort            uint16
	sleeper, holder      uint32
	held, idle, reset    map[uint16]bool // client ports
}

func newWorkload(t *testing.T) *workload {
	w := &workload{held: map[uint16]bool{}, idle: map[uint16]bool{}, reset: map[uint16]bool{}}
	for i := 0; i < nRefused; i++ {
		if c, err := net.Dial("tcp4", "127.0.0.1:9"); err == nil {
			c.Close()
			t.Fatal("port 9 accepted a connection")
		}
	}
	w.acceptPort = guestAccepts(t, nAccept, nil)
	w.resetPort = guestAccepts(t, nReset, w.reset)
	w.idlePort = guestIdleCloses(t)
	w.lateSegments(t)
	w.sleeper = sigtermSleeper(t)
	w.holdAndKill(t)
	sendBlackholed(t)
	return w
}

// guestAccepts accepts n connections. With unread set, the client's byte
// is left unread when the server closes, so the kernel aborts with a RST,
// and unread records the client ports (a closed socket's RST has lost its
// local port: closing unhashed it).
func guestAccepts(t *testing.T, n int, unread map[uint16]bool) uint16 {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if unread != nil {
			unread[uint16(c.LocalAddr().(*net.TCPAddr).Port)] = true
			_, _ = c.Write([]byte("x"))
			waitUnread(t, s.(*net.TCPConn))
		}
		s.Close()
		if unread != nil {
			waitReset(t, c)
		}
		c.Close()
	}
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// guestIdleCloses answers one request on each of nIdleClosed connections,
// waits idleClosedAfter and closes them: the server's idle timeout.
func guestIdleCloses(t *testing.T) uint16 {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var clients, servers []net.Conn
	for range nIdleClosed {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET\n"))
		_, _ = bufio.NewReader(s).ReadString('\n')
		_, _ = s.Write([]byte("OK\n"))
		_, _ = bufio.NewReader(c).ReadString('\n')
		clients, servers = append(clients, c), append(servers, s)
	}
	time.Sleep(idleClosedAfter)
	for i := range servers {
		servers[i].Close()
		clients[i].Close()
	}
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// waitReset waits (bounded) until the client has taken the server's RST,
// so that its close sends nothing: a FIN it sent before would meet no
// socket and draw one more RST (under TCG the RST may still be queued).
func waitReset(t *testing.T, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the client's read after the server's abort: %v, want ECONNRESET", err)
	}
}

// waitUnread waits (bounded) until the client's byte sits in the server's
// receive queue.
func waitUnread(t *testing.T, c *net.TCPConn) {
	raw, _ := c.SyscallConn()
	for i := 0; i < 200; i++ {
		n := 0
		_ = raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the client's byte never reached the server")
}

// lateSegments sends one segment from each reset connection's client to
// its server's port, whose sockets are all gone (the listener closed, the
// connections aborted): the kernel answers each with a RST no socket sends.
func (w *workload) lateSegments(t *testing.T) {
	server := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), w.resetPort)
	n := 0
	for port := range w.reset {
		if n == nLate {
			break
		}
		n++
		if err := sendSegment(netip.AddrPortFrom(server.Addr(), port), server, tcpACK|tcpPSH, []byte("late\n")); err != nil {
			t.Fatal(err)
		}
	}
}

func self(role string, files ...*os.File) *exec.Cmd {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^TestVMGuest$")
	cmd.Env = append(os.Environ(), "DRAINWATCH_VM_ROLE="+role)
	cmd.ExtraFiles = files
	return cmd
}

// sigtermSleeper starts a child, SIGTERMs it once it sleeps and returns its
// pid: one signal, one exit 143.
func sigtermSleeper(t *testing.T) uint32 {
	child := self("sleep")
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(out).ReadString('\n') // "sleeping"
	_ = child.Process.Signal(syscall.SIGTERM)
	_ = child.Wait()
	return uint32(child.Process.Pid)
}

// holdAndKill runs a server child on a listener of ours; nIdle clients get
// answers and stay idle, nHeld send a request the server reads and holds;
// then the server dies of SIGKILL.
func (w *workload) holdAndKill(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.holdPort = uint16(ln.Addr().(*net.TCPAddr).Port)
	f, _ := ln.(*net.TCPListener).File()
	child := self("hold", f)
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln.Close()
	var conns []net.Conn
	for i := 0; i < nIdle+nHeld; i++ {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		port := uint16(c.LocalAddr().(*net.TCPAddr).Port)
		if i < nIdle {
			w.idle[port] = true
			_, _ = c.Write([]byte("GET\n"))
			_, _ = bufio.NewReader(c).ReadString('\n')
		} else {
			w.held[port] = true
			_, _ = c.Write([]byte("HOLD\n"))
		}
	}
	_, _ = bufio.NewReader(out).ReadString('\n') // "read N": every request read
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	w.holder = uint32(child.Process.Pid)
	for _, c := range conns {
		c.Close()
	}
}

// guestChild is a child process of the suite: "sleep" waits for its
// SIGTERM; "hold" serves the listener on fd 3 (answers GET, holds HOLD).
func guestChild(role string) {
	if role == "sleep" {
		os.Stdout.WriteString("sleeping\n")
		time.Sleep(time.Minute)
		return
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		os.Exit(2)
	}
	for i := 0; i < nIdle+nHeld; i++ {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(2)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		if line == "GET\n" {
			_, _ = c.Write([]byte("OK\n"))
		}
	}
	os.Stdout.WriteString("read all\n")
	time.Sleep(time.Minute)
}

// features counts the events per feature of the matrix.
func (w *workload) features(evs []collector.Event) map[string]int {
	got := map[string]int{}
	for _, ev := range evs {
		switch {
		case ev.Type == collector.EventBlackholed && ev.Local.Addr() == blackholeDst:
			got["blackholed"]++
		case ev.Type == collector.EventRefused && ev.Local.String() == "127.0.0.1:9":
			got["refused"]++
		case ev.Type == collector.EventAccept && ev.Local.Port() == w.acceptPort:
			got["accepted"]++
		case ev.Type == collector.EventListenClose && ev.Local.Port() == w.acceptPort:
			got["listen_close"]++
		// Idle at least the wait (less a jiffy of HZ >= 100), and not
		// seconds more even under TCG.
		case ev.Type == collector.EventIdleClose && ev.Local.Port() == w.idlePort &&
			ev.Idle() >= idleClosedAfter-10*time.Millisecond && ev.Idle() < idleClosedAfter+5*time.Second:
			got["idle_close"]++
		case ev.Type == collector.EventReset && ev.SockCookie != 0 && w.reset[ev.Remote.Port()]:
			got["reset"]++
		case ev.Type == collector.EventReset && ev.SockCookie == 0 && ev.Local.Port() == w.resetPort && w.reset[ev.Remote.Port()]:
			got["reset_no_socket"]++
		// The stop signal from outside: Go's runtime re-raises a fatal
		// signal to itself (twice) to die of it.
		case ev.Type == collector.EventSignal && ev.PID == w.sleeper && ev.SenderPID != w.sleeper &&
			ev.Signal == uint32(syscall.SIGTERM):
			got["signal"]++
		case ev.Type == collector.EventExit && ev.PID == w.sleeper && ev.ExitCode == 143 && ev.ExitSignal == 15:
			got["exit"]++
		case ev.Type == collector.EventConnClosedInflight && ev.Local.Port() == w.holdPort && ev.Cause == collector.CauseSigkill:
			if w.held[ev.Remote.Port()] {
				got["inflight_sigkill"]++
			}
			if w.idle[ev.Remote.Port()] {
				got["idle_keepalive"]++
			}
		}
	}
	return got
}
