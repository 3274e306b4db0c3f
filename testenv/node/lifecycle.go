package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// start creates the sandbox and starts every container, then reports the
// status. Failures leave the containers waiting with the reason.
func (w *podWorker) start(ctx context.Context) {
	if n := initContainersSkipped(w.pod); n > 0 || w.pod.Spec.HostNetwork {
		w.log.Warn().Int("init_containers", n).Bool("host_network", w.pod.Spec.HostNetwork).
			Msg("not supported by the testenv node: init containers other than native sidecars are skipped, hostNetwork pods get their own netns")
	}
	sb, err := w.a.createSandbox(w.pod)
	if err != nil {
		w.log.Error().Err(err).Msg("creating pod sandbox")
		w.setWaiting("", "CreatePodSandboxError", err.Error())
		w.push(ctx)
		return
	}
	w.mu.Lock()
	w.sb = sb
	w.mu.Unlock()
	for _, sc := range nativeSidecars(w.pod) {
		w.startOne(ctx, sc, 0) // before the main containers, as the kubelet does
	}
	for i := range w.pod.Spec.Containers {
		w.startOne(ctx, &w.pod.Spec.Containers[i], 0)
	}
	w.push(ctx)
}

// startOne starts one run of a container and its probes.
func (w *podWorker) startOne(ctx context.Context, spec *corev1.Container, restarts int32) {
	c, err := w.a.startContainer(w.pod, w.sb, *spec, restarts)
	if err != nil {
		w.log.Error().Err(err).Str("container", spec.Name).Msg("starting container")
		w.setWaiting(spec.Name, "CreateContainerError", err.Error())
		return
	}
	cs := w.containers[spec.Name]
	w.mu.Lock()
	cs.run, cs.terminated, cs.started = c, nil, spec.StartupProbe == nil
	cs.ready = cs.started && spec.ReadinessProbe == nil
	w.mu.Unlock()
	cs.stopSignal = ""
	if sig, err := StopSignal(spec, c.image); err == nil && !w.a.cfg.DisableContainerStopSignals {
		cs.stopSignal = corev1.Signal(unix.SignalName(sig))
	}
	w.a.events.record(w.pod, spec.Name, corev1.EventTypeNormal, ReasonStarted, "Started container "+spec.Name)
	w.log.Debug().Str("container", spec.Name).Int("pid", c.pid).Str("id", c.id).Msg("container started")
	go func() {
		<-c.exited
		select {
		case w.exits <- c:
		case <-w.done:
		}
	}()
	w.startProbes(ctx, c)
}

// startProbes starts the container's startup probe, or, without one, its
// readiness and liveness probes (the kubelet holds those back until the
// startup probe has passed). Liveness and startup stop at termination.
func (w *podWorker) startProbes(ctx context.Context, c *container) {
	lctx, cancel := context.WithCancel(w.probeCtx)
	w.stopLiveness[c.spec.Name] = cancel
	if p := c.spec.StartupProbe; p != nil {
		w.runProber(lctx, c, startup, p)
		return
	}
	w.startedProbes(lctx, c)
}

// startedProbes starts readiness and liveness probes of a started container.
func (w *podWorker) startedProbes(lctx context.Context, c *container) {
	if p := c.spec.ReadinessProbe; p != nil {
		w.runProber(w.probeCtx, c, readiness, p)
	}
	if p := c.spec.LivenessProbe; p != nil {
		w.runProber(lctx, c, liveness, p)
	}
}

func (w *podWorker) runProber(ctx context.Context, c *container, kind probeKind, spec *corev1.Probe) {
	pr := &prober{a: w.a, pod: w.pod, podIP: w.sb.IP, c: c, kind: kind, spec: spec, results: w.probes}
	go pr.run(ctx)
}

func (w *podWorker) setWaiting(name, reason, msg string) {
	for n, cs := range w.containers {
		if name == "" || n == name {
			cs.waiting, cs.waitingMsg = reason, msg
		}
	}
}

// onExit records a run's end and schedules its restart when the policy
// says so. Once nothing runs or restarts the pod is terminal: its sandbox
// is removed (the Pod object stays until it is deleted).
func (w *podWorker) onExit(ctx context.Context, c *container) {
	cs := w.containers[c.spec.Name]
	if cs.run != c {
		return // an older run
	}
	if cancel := w.stopLiveness[c.spec.Name]; cancel != nil {
		cancel()
	}
	w.mu.Lock()
	cs.terminated, cs.ready = terminatedState(c), false
	cs.restartable = restartable(w.pod, c.exitCode) || sidecarNamed(w.pod, c.spec.Name)
	w.mu.Unlock()
	w.log.Info().Str("container", c.spec.Name).Int32("exit_code", c.exitCode).Bool("terminating", w.terminating).Msg("container exited")
	if cs.restartable && !w.terminating {
		delay := time.Duration(0)
		if c.finished.Sub(c.startedAt) < 10*time.Second {
			delay = backoff(c.restarts + 1)
		}
		time.AfterFunc(delay, func() {
			select {
			case w.restarts <- c.spec.Name:
			case <-w.done:
			}
		})
	}
	w.push(ctx)
	if ph := w.phase(); !w.terminating && (ph == corev1.PodSucceeded || ph == corev1.PodFailed) {
		w.stopProbes()
		w.teardown()
	}
}

func (w *podWorker) restart(ctx context.Context, name string) {
	cs := w.containers[name]
	if w.terminating || cs.run == nil || cs.terminated == nil {
		return
	}
	if spec := specOf(w.pod, name); spec != nil {
		cs.last = cs.terminated
		_ = removeCgroup(cs.run.scope)
		w.startOne(ctx, spec, cs.run.restarts+1)
	}
	w.push(ctx)
}

// onProbe applies a probe verdict: readiness flips Ready, a liveness
// failure kills the container (its exit then restarts it).
func (w *podWorker) onProbe(ctx context.Context, r probeResult) {
	cs := w.containers[r.container.spec.Name]
	if cs.run != r.container || !r.container.running() {
		return
	}
	switch {
	case r.kind == readiness:
		w.mu.Lock()
		cs.ready = r.passing
		w.mu.Unlock()
		w.push(ctx)
	case r.kind == startup && r.passing && !w.terminating:
		w.mu.Lock()
		cs.started, cs.ready = true, r.container.spec.ReadinessProbe == nil
		w.mu.Unlock()
		w.push(ctx)
		lctx, cancel := context.WithCancel(w.probeCtx)
		w.stopLiveness[r.container.spec.Name] = cancel
		w.startedProbes(lctx, r.container)
	case !r.passing && !w.terminating:
		msg := fmt.Sprintf("Container %s failed %s probe, will be restarted", r.container.spec.Name, strings.ToLower(string(r.kind)))
		go func() {
			t := w.a.killContainerWithMessage(ctx, w.pod, r.container, w.sb.IP, GracePeriod(w.pod), msg, nil)
			w.mu.Lock()
			w.restartKills = append(w.restartKills, t)
			w.mu.Unlock()
		}()
	}
}

func (w *podWorker) push(ctx context.Context) {
	err := w.pushStatus(ctx)
	w.statusStale = err != nil
	if err != nil && ctx.Err() == nil {
		w.log.Warn().Err(err).Msg("pod status")
	}
}
