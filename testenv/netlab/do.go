package netlab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a locked OS thread switched into the namespace, then switches
// the thread back. Sockets fn creates belong to the namespace, and processes
// fn starts inherit it. fn must not hand work to other goroutines: they run
// on other threads, in the root namespace.
//
// If switching back fails the thread stays locked, so the Go runtime
// destroys it when the calling goroutine exits instead of reusing a thread in
// the wrong namespace.
func (ns *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening current netns: %w", err)
	}
	defer orig.Close()
	target, err := os.Open(ns.Path())
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening netns %s: %w", ns.name, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: %w", ns.name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("leaving netns %s (thread left locked): %w", ns.name, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Command returns a command that runs inside the namespace, through
// `nsenter --net=<path>` (nsenter execs the program in place, so the PID is
// the program's). Use it like any exec.Cmd.
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + ns.Path(), "--", name}, args...)...)
}

// Start starts cmd from a thread inside the namespace, without a wrapper
// process. SysProcAttr.Pdeathsig fires when that thread exits; Do keeps the
// thread alive in the runtime's pool, so it fires when this process dies.
func (ns *NS) Start(cmd *exec.Cmd) error {
	return ns.Do(cmd.Start)
}

// Dial connects from inside the namespace. addr must be a literal IP and
// port: nothing is resolved.
func (ns *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := literal(addr); err != nil {
		return nil, err
	}
	var conn net.Conn
	err := ns.Do(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// DialContext has the signature of net.Dialer.DialContext, for an
// http.Transport whose connections must start inside the namespace.
func (ns *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return ns.Dial(ctx, network, addr)
}

// Listen listens inside the namespace on a literal IP and port.
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	if err := literal(addr); err != nil {
		return nil, err
	}
	var ln net.Listener
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// literal refuses anything but "ip:port" with a literal (or empty) IP.
func literal(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("address %q: netlab accepts literal IPs only (no name resolution): %w", addr, err)
	}
	return nil
}

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
