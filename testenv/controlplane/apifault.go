package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// apiServer is kube-apiserver's component name (its binary and log file).
const apiServer = "kube-apiserver"

// apiServerStopGrace is how long a stopped kube-apiserver may take to end
// its requests and watches after SIGTERM before it is killed.
const apiServerStopGrace = 10 * time.Second

// The methods below inject API-server faults for the tests that prove
// drainwatch survives them: an outage (the process stopped, as during an
// upgrade: connections refused) and a freeze (the process stopped by
// SIGSTOP: connections and watches stay open, nothing answers). etcd, the
// controllers and the scheduler keep running, as they do on a real control
// plane whose API server restarts.

// StopAPIServer stops kube-apiserver (SIGTERM, SIGKILL 10 s later) and
// returns once it has exited: from then on its port refuses connections.
func (cp *ControlPlane) StopAPIServer() error {
	i, err := cp.apiServerIndex()
	if err != nil {
		return err
	}
	if err := cp.procs[i].stop(apiServerStopGrace); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts a stopped kube-apiserver again with the flags Start
// gave it (same port, etcd, certificates, tokens: the kubeconfig and every
// client's configuration stay valid) and returns once /readyz answers ok.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	i, err := cp.apiServerIndex()
	if err != nil {
		return err
	}
	if done, _ := cp.procs[i].exited(); !done {
		return errors.New("starting kube-apiserver: it is still running (StopAPIServer first)")
	}
	p, err := startProcess(cp.log, cp.Dir, apiServer, filepath.Join(cp.BinDir, apiServer), cp.apiArgs)
	if err != nil {
		return err
	}
	cp.procs[i] = p
	if err := cp.waitReady(ctx); err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	cp.log.Info().Str("url", cp.URL).Msg("kube-apiserver started again")
	return nil
}

// RestartAPIServer stops kube-apiserver, keeps it down for down, and starts
// it again (StopAPIServer, then StartAPIServer). The outage lasts down plus
// the stop's and the start's own time (seconds each).
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	// Started again even when ctx is done: later tests share this control
	// plane. A fresh context bounds the wait instead.
	return cp.StartAPIServer(context.WithoutCancel(ctx))
}

// FreezeAPIServer stops kube-apiserver with SIGSTOP for d (or until ctx is
// done), then resumes it with SIGCONT. While frozen, its connections stay
// open and every request and watch hangs: the fault of an overloaded or
// paused API server, unlike StopAPIServer's refused connections.
func (cp *ControlPlane) FreezeAPIServer(ctx context.Context, d time.Duration) error {
	i, err := cp.apiServerIndex()
	if err != nil {
		return err
	}
	pid := cp.procs[i].cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("freezing kube-apiserver (pid %d): %w", pid, err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resuming kube-apiserver (pid %d): %w", pid, err)
	}
	return nil
}

// APIServerPID is kube-apiserver's current process id (it changes with
// StartAPIServer).
func (cp *ControlPlane) APIServerPID() (int, error) {
	i, err := cp.apiServerIndex()
	if err != nil {
		return 0, err
	}
	return cp.procs[i].cmd.Process.Pid, nil
}

func (cp *ControlPlane) apiServerIndex() (int, error) {
	i := slices.IndexFunc(cp.procs, func(p *process) bool { return p.name == apiServer })
	if i < 0 {
		return 0, errors.New("kube-apiserver is not one of the control plane's processes (stopped control plane?)")
	}
	return i, nil
}
