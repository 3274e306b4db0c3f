package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/drainwatch/drainwatch/exporter"
	"github.com/drainwatch/drainwatch/testenv/shipped"
)

// Daemon is one node's drainwatch: the real `drainwatch run` binary as its
// own process, serving on 127.0.0.1 only, with its own state directory.
type Daemon struct {
	Node string
	URL  string // "http://127.0.0.1:<port>", https:// with DaemonSpec.Shipped
	Log  string // its stderr (JSON lines)
	// Addr is the listener's host:port.
	Addr string
	// Client reads the daemon: plain, or verifying the shipped CA and
	// sending DaemonSpec.Token.
	Client *http.Client
	cmd    *exec.Cmd
	done   chan error
}

// DaemonSpec is what StartDaemon needs to run one node's daemon.
type DaemonSpec struct {
	Bin, Node, Kubeconfig, CgroupRoot, Dir string
	// Unpinned runs the daemon without pins and with a fresh state
	// directory, so each start is a cold start (make bench starts one per
	// round); otherwise it pins per node like production and keeps its
	// state under Dir across restarts.
	Unpinned bool
	// WatchAllNodes passes --watch-all-nodes: traffic from the other
	// node's kube-proxy is named after that node.
	WatchAllNodes bool
	// Args are more flags for `drainwatch run` (the soak's
	// --keep-completed).
	Args []string
	// Shipped, when set, serves as the chart's shipped values do
	// (--auth=kubernetes, TLS with the generated certificate), read with
	// Token (bound to the drainwatch audience).
	Shipped *shipped.Install
	Token   string
}

// StartDaemon runs `drainwatch run` for a node and waits until /readyz
// answers 200 (the node's pods are listed). The process dies with the lab
// (Pdeathsig) if the lab itself is killed.
func StartDaemon(ctx context.Context, s DaemonSpec) (*Daemon, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	d := &Daemon{Node: s.Node, URL: "http://" + addr, Addr: addr, Log: filepath.Join(s.Dir, s.Node+".log"),
		Client: http.DefaultClient, done: make(chan error, 1)}
	if s.Shipped != nil {
		d.URL = "https://" + addr
		if d.Client, err = s.Shipped.Client(s.Token); err != nil {
			return nil, err
		}
	}
	logf, err := os.Create(d.Log)
	if err != nil {
		return nil, fmt.Errorf("creating the log of %s's daemon: %w", s.Node, err)
	}
	state := filepath.Join(s.Dir, "state-"+s.Node)
	// Pinned like in production (the default pin path, per node), and
	// unpinned when the lab stops it: nothing stays attached afterwards.
	// A lab killed outright leaves pins that the next run replaces.
	pin := "--unpin-on-exit"
	if s.Unpinned {
		pin = "--pin-path="
		if state, err = os.MkdirTemp(s.Dir, "state-"+s.Node+"-"); err != nil {
			logf.Close()
			return nil, fmt.Errorf("state directory of %s's daemon: %w", s.Node, err)
		}
	}
	args := []string{"run", "--node-name=" + s.Node, "--kubeconfig=" + s.Kubeconfig,
		"--listen=" + addr, "--state-dir=" + state,
		"--cgroup-root=" + s.CgroupRoot, "--log-format=json", "--log-level=info", pin}
	if s.WatchAllNodes {
		args = append(args, "--watch-all-nodes")
	}
	if s.Shipped != nil {
		args = append(args, s.Shipped.DaemonArgs...)
	}
	args = append(args, s.Args...)
	d.cmd = exec.Command(s.Bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s run for %s: %w", s.Bin, s.Node, err)
	}
	go func() { d.done <- d.cmd.Wait(); logf.Close() }()
	if err := d.waitReady(ctx); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if code, _ := httpGet(ctx, d.Client, d.URL+"/readyz", io.Discard); code == http.StatusOK {
			return nil
		}
		select {
		case err := <-d.done:
			d.done <- err
			return fmt.Errorf("drainwatch of %s exited before ready (%v): see %s", d.Node, err, d.Log)
		case <-ctx.Done():
			return fmt.Errorf("drainwatch of %s not ready at %s/readyz: %w (log %s)", d.Node, d.URL, ctx.Err(), d.Log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits (15 s, then SIGKILL). It returns the
// process's error: a daemon that failed on its own shows here.
func (d *Daemon) Stop() error {
	if d.cmd.Process == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return exitErr(d, err)
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		return fmt.Errorf("drainwatch of %s ignored SIGTERM for 15 s: killed", d.Node)
	}
}

func exitErr(d *Daemon, err error) error {
	if err != nil {
		return fmt.Errorf("drainwatch of %s: %w (log %s)", d.Node, err, d.Log)
	}
	return nil
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// API is the daemon as the exporter's clients reach it.
func (d *Daemon) API() exporter.Daemon { return exporter.URLDaemon(d.URL, d.Client) }

// httpGet GETs url with c into w and returns the status code.
func httpGet(ctx context.Context, c *http.Client, url string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return resp.StatusCode, fmt.Errorf("reading %s: %w", url, err)
	}
	return resp.StatusCode, nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// stopAll stops daemons and joins their errors.
func stopAll(ds []*Daemon) error {
	var errs []error
	for _, d := range ds {
		errs = append(errs, d.Stop())
	}
	return errors.Join(errs...)
}
