package l7

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/testenv/netlab"
)

// waitListening dials the proxy from its namespace until it accepts, for at
// most 10 s, or until it exits.
func (p *Proxy) waitListening() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := p.cfg.NetNS.Dial(ctx, "tcp", p.addr)
		cancel()
		if err == nil {
			return conn.Close()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before listening on %s (logs in %s)", p.cfg.Kind, p.addr, p.cfg.Dir)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after 10 s: %w", p.cfg.Kind, p.addr, err)
		}
	}
}

// freePort asks the namespace's kernel for a free loopback port.
func freePort(ns *netlab.NS) (int, error) {
	ln, err := ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port in %s: %w", ns, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startIn starts argv inside ns with stdout and stderr into files of dir;
// the process dies with ours.
func startIn(ns *netlab.NS, dir, name string, argv []string) (*exec.Cmd, error) {
	out, err := os.Create(dir + "/" + name + ".out")
	if err != nil {
		return nil, fmt.Errorf("%s output file: %w", name, err)
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ns.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s in %s: %w", argv[0], ns, err)
	}
	return cmd, nil
}
