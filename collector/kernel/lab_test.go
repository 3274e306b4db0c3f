package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
	"github.com/drainwatch/drainwatch/testenv/privileged"
)

// Addresses of the two ends of a lab's veth pair (10.251.0.0/24: never the
// machine's own 192.0.2.0/24, and only reachable inside the lab).
const (
	clientIP = "10.251.0.1"
	serverIP = "10.251.0.2"
)

// lab is a client and a server network namespace joined by a veth pair.
type lab struct {
	client, server *netlab.NS
}

func newLab(t testing.TB) *lab {
	t.Helper()
	privileged.RequireRoot(t)
	l := &lab{client: newNetns(t, "dwk-cli"), server: newNetns(t, "dwk-srv")}
	err := netlab.Veth(
		netlab.End{NS: l.client, Name: "veth0", CIDR: clientIP + "/24"},
		netlab.End{NS: l.server, Name: "veth0", CIDR: serverIP + "/24"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newNetns(t testing.TB, name string) *netlab.NS {
	t.Helper()
	ns, err := netlab.New(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	return ns
}

// dial connects from the client namespace to the server, bounded in time.
func (l *lab) dial(port int) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := l.client.Dial(ctx, "tcp4", fmt.Sprintf("%s:%d", serverIP, port))
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// startServer runs a real server process inside the server namespace and
// waits (bounded) until it accepts connections on port.
func (l *lab) startServer(t testing.TB, port int, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := l.server.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	l.waitListening(t, port)
	return cmd
}

// waitListening waits (bounded) until the server namespace accepts
// connections on port.
func (l *lab) waitListening(t testing.TB, port int) {
	t.Helper()
	for i := 0; i < 100; i++ {
		c, err := l.dial(port)
		if err == nil {
			c.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listened on %s:%d within 5s", serverIP, port)
}

func requirePython(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		privileged.RequireFile(t, "/usr/bin/python3", "CPython for the real-server tests")
		py = "/usr/bin/python3"
	}
	return py
}
