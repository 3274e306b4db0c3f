package node

import (
	"context"
	"fmt"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Termination is what the agent did to stop one container, with the times
// it did it: the ground truth for drainwatch's kernel and API marks.
type Termination struct {
	Pod, Container, ContainerID string // Pod is "namespace/name"
	PodUID                      types.UID
	// Grace is the grace period the kill started with (GracePeriod).
	Grace   int64
	Killing time.Time // the Killing event was recorded
	// PreStop is "exec", "httpGet", "sleep" or "" (none).
	PreStop        string
	PreStopStart   time.Time
	PreStopEnd     time.Time // zero when the hook outlived the grace
	PreStopElapsed int64     // whole seconds, as subtracted from Grace
	PreStopErr     string    // non-empty: FailedPreStopHook was recorded
	// Superseded: a shorter grace period arrived before this kill ended; the
	// next Termination of the container is the kill with that grace.
	Superseded   bool
	StopTimeout  int64 // seconds between the stop signal and SIGKILL
	StopSignal   syscall.Signal
	StopSignalAt time.Time
	SIGKILLAt    time.Time // zero when the container exited in time
	ExitAt       time.Time
	ExitCode     int32
}

// killContainer stops a container like kuberuntime's killContainer followed
// by containerd's StopContainer: Killing event, preStop bounded by the
// grace, stop signal to PID 1, wait, SIGKILL.
//
// Closing abort abandons the kill (no SIGKILL): a shorter grace period
// arrived and the caller kills again with it.
func (a *Agent) killContainer(ctx context.Context, pod *corev1.Pod, c *container, podIP string, grace int64, abort <-chan struct{}) *Termination {
	return a.killContainerWithMessage(ctx, pod, c, podIP, grace, "Stopping container "+c.spec.Name, abort)
}

// killContainerWithMessage is killContainer with the Killing event's
// message (a liveness failure says why).
func (a *Agent) killContainerWithMessage(ctx context.Context, pod *corev1.Pod, c *container, podIP string, grace int64, message string, abort <-chan struct{}) *Termination {
	t := &Termination{Pod: pod.Namespace + "/" + pod.Name, PodUID: pod.UID, Container: c.spec.Name, ContainerID: c.id, Grace: grace}
	t.Killing = time.Now()
	a.events.record(pod, c.spec.Name, corev1.EventTypeNormal, ReasonKilling, message)
	if c.spec.Lifecycle != nil && c.spec.Lifecycle.PreStop != nil && grace > 0 {
		grace -= a.preStop(ctx, pod, c, podIP, grace, t, abort)
	}
	t.StopTimeout = StopTimeout(grace, 0)
	a.stopContainer(ctx, c, t, abort)
	if !c.running() {
		t.ExitAt, t.ExitCode = c.finished, c.exitCode
	}
	a.log.Info().Str("pod", t.Pod).Str("container", t.Container).Int64("grace", t.Grace).
		Int64("prestop_s", t.PreStopElapsed).Int64("stop_timeout", t.StopTimeout).
		Bool("sigkill", !t.SIGKILLAt.IsZero()).Int32("exit_code", t.ExitCode).Msg("container stopped")
	return t
}

// preStop runs the hook in a goroutine and waits for it at most grace
// seconds; it returns the elapsed whole seconds. A failure is recorded as
// FailedPreStopHook whenever it happens, even after the grace ran out.
func (a *Agent) preStop(ctx context.Context, pod *corev1.Pod, c *container, podIP string, grace int64, t *Termination, abort <-chan struct{}) int64 {
	hook := c.spec.Lifecycle.PreStop
	// tcpSocket is deprecated for hooks: the kubelet fails it as an invalid
	// handler, and so does runHandler without it.
	h := handler{Exec: hook.Exec, HTTPGet: hook.HTTPGet, Sleep: hook.Sleep}
	t.PreStop = handlerKind(h)
	t.PreStopStart = time.Now()
	done := make(chan error, 1)
	// The kubelet stops waiting after the grace but lets the hook run on; it
	// ends with the container at the latest. The bound here only keeps an
	// httpGet to somewhere else from hanging forever.
	hookCtx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+time.Minute)
	go func() {
		defer cancel()
		err := a.runHandler(hookCtx, h, c, podIP)
		if err != nil {
			a.events.record(pod, c.spec.Name, corev1.EventTypeWarning, ReasonFailedPreStopHook, "PreStopHook failed")
			a.log.Info().Err(err).Str("pod", t.Pod).Str("container", t.Container).Msg("preStop hook failed")
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.PreStopEnd = time.Now()
		if err != nil {
			t.PreStopErr = err.Error()
		}
	case <-time.After(time.Duration(grace) * time.Second):
	case <-ctx.Done(): // the agent is stopping
	case <-abort:
	}
	t.PreStopElapsed = PreStopElapsed(time.Since(t.PreStopStart))
	return t.PreStopElapsed
}

func handlerKind(h handler) string {
	switch {
	case h.Exec != nil:
		return "exec"
	case h.HTTPGet != nil:
		return "httpGet"
	case h.TCPSocket != nil:
		return "tcpSocket"
	case h.Sleep != nil:
		return "sleep"
	}
	return ""
}

// stopContainer is containerd's StopContainer(timeout): the stop signal
// once to the init process, wait up to the timeout, then SIGKILL and wait
// for the exit (bounded: the cgroup is killed as a last resort).
func (a *Agent) stopContainer(ctx context.Context, c *container, t *Termination, abort <-chan struct{}) {
	sig, err := StopSignal(&c.spec, c.image)
	if err != nil {
		a.log.Warn().Err(err).Str("container", c.spec.Name).Msg("bad stop signal, using SIGTERM")
		sig = syscall.SIGTERM
	}
	t.StopSignal = sig
	select {
	case <-abort:
		t.Superseded = true
		return
	default:
	}
	if c.running() {
		t.StopSignalAt = time.Now()
		_ = c.proc.Signal(sig)
	}
	select {
	case <-c.exited:
		return
	case <-time.After(time.Duration(t.StopTimeout) * time.Second):
	case <-ctx.Done(): // the agent is stopping: no more grace
	case <-abort:
		t.Superseded = true
		return
	}
	t.SIGKILLAt = time.Now()
	_ = c.proc.Signal(syscall.SIGKILL)
	a.awaitExit(c)
}

// awaitExit waits for the init process after SIGKILL; if it has not gone
// in 10 s, every process of the cgroup is killed.
func (a *Agent) awaitExit(c *container) {
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		a.log.Error().Str("container", c.spec.Name).Msg("init survived SIGKILL for 10 s, killing its cgroup")
		_ = removeCgroup(c.scope)
		<-c.exited
	}
}

// forceStop kills a container at once (agent shutdown, not a pod deletion).
func (a *Agent) forceStop(c *container) error {
	if c.running() {
		_ = c.proc.Signal(syscall.SIGKILL)
	}
	a.awaitExit(c)
	if err := removeCgroup(c.scope); err != nil {
		return fmt.Errorf("container %s: %w", c.spec.Name, err)
	}
	return nil
}
