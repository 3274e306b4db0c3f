package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// daemon is one `drainwatch run` process for a node, unpinned (nothing
// stays attached after it stops), serving on a free loopback port.
type daemon struct {
	cmd  *exec.Cmd
	url  string
	log  string
	done chan error
}

// daemonSpec says which binary runs for which node of which cluster.
type daemonSpec struct {
	Bin, Node, Kubeconfig, CgroupRoot, Dir string
}

// startDaemon starts drainwatch and waits until /readyz answers 200.
func startDaemon(ctx context.Context, s daemonSpec) (*daemon, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	state, err := os.MkdirTemp(s.Dir, "state-")
	if err != nil {
		return nil, fmt.Errorf("daemon state dir: %w", err)
	}
	d := &daemon{url: "http://" + addr, log: state + ".log", done: make(chan error, 1)}
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	d.cmd = exec.Command(s.Bin, "run", "--node-name="+s.Node, "--kubeconfig="+s.Kubeconfig,
		"--listen="+addr, "--state-dir="+state, "--cgroup-root="+s.CgroupRoot,
		"--pin-path=", "--log-format=json", "--log-level=info")
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s run: %w", s.Bin, err)
	}
	go func() { d.done <- d.cmd.Wait(); logf.Close() }()
	if err := d.waitReady(ctx); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-d.done:
			d.done <- err
			return fmt.Errorf("drainwatch exited before ready (%v): see %s", err, d.log)
		case <-ctx.Done():
			return fmt.Errorf("drainwatch not ready at %s/readyz: %w (log %s)", d.url, ctx.Err(), d.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop interrupts the daemon and waits up to 30 s before killing it.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-d.done:
		d.done <- err
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		d.done <- <-d.done
	}
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// buildDrainwatch builds ./cmd/drainwatch of the tree at root into dir.
func buildDrainwatch(ctx context.Context, root, dir string) (string, error) {
	out := filepath.Join(dir, "drainwatch")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/drainwatch")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building drainwatch: %w: %s", err, msg)
	}
	return out, nil
}
