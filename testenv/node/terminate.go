package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// terminate stops every running container in parallel with the grace
// period, keeps readiness probes and status going while they drain, then
// reports the terminal phase, removes the cgroups and the sandbox, and
// (when the pod was deleted gracefully) deletes it with grace 0 — the
// kubelet's order: the API object goes only after the pod's resources are
// reclaimed.
//
// A grace period can only shrink (calculateEffectiveGracePeriod): when a
// later version of the pod carries a shorter one (a second delete, a force
// delete), the round in progress is abandoned and the containers still
// running are killed again with the shorter grace, as the kubelet's pod
// worker does when it cancels and restarts its terminating sync.
func (w *podWorker) terminate(ctx context.Context, grace int64, deleteAfter bool) {
	w.terminating = true
	for _, cancel := range w.stopLiveness {
		cancel()
	}
	for grace > 0 {
		w.log.Info().Int64("grace", grace).Msg("terminating pod")
		var shorter int64
		shorter, deleteAfter = w.killRound(ctx, grace, deleteAfter)
		grace = shorter
	}
	w.drainExits()
	w.stopProbes()
	w.push(ctx)
	w.teardown()
	if deleteAfter {
		w.deleteFromAPI(ctx)
	}
}

// killRound kills the running containers with the grace period and waits
// for them. It returns a shorter grace period when one arrived meanwhile
// (0 otherwise), and whether the pod is still in the API to be deleted.
func (w *podWorker) killRound(ctx context.Context, grace int64, inAPI bool) (int64, bool) {
	abort := make(chan struct{})
	done := make(chan *Termination, len(w.containers))
	pod, began := w.pod, time.Now()
	// The main containers first, in parallel; the native sidecars once
	// every main container has exited, with what is left of the grace
	// (at least the kubelet's minimum of 2 s).
	launch := func(sidecars bool, grace int64) (n int) {
		for name, cs := range w.containers {
			if cs.run != nil && cs.terminated == nil && sidecarNamed(pod, name) == sidecars {
				n++
				go func(c *container) {
					done <- w.a.killContainer(ctx, pod, c, w.sb.IP, grace, abort)
				}(cs.run)
			}
		}
		return n
	}
	running, sidecarsLeft := launch(false, grace), len(nativeSidecars(pod)) > 0
	next := func() {
		if running == 0 && sidecarsLeft {
			sidecarsLeft = false
			running = launch(true, max(grace-int64(time.Since(began)/time.Second), 2))
		}
	}
	next()
	var shorter int64
	shrink := func(p *corev1.Pod) {
		if g := GracePeriod(p); shorter == 0 && g < grace {
			shorter = g
			close(abort)
		}
	}
	gone := w.gone
	if !inAPI {
		gone = nil
	}
	for running > 0 {
		select {
		case t := <-done:
			running--
			w.mu.Lock()
			w.terminations = append(w.terminations, t)
			w.mu.Unlock()
			if shorter == 0 {
				next()
			}
		case c := <-w.exits:
			w.onExit(ctx, c)
		case r := <-w.probes:
			w.onProbe(ctx, r)
		case p := <-w.updates:
			w.setPod(p)
			shrink(p)
		case <-gone:
			gone, inAPI = nil, false
			shrink(w.final())
		}
	}
	return shorter, inAPI
}

// drainExits consumes exit notifications still queued, so the final status
// has every container terminated.
func (w *podWorker) drainExits() {
	for _, cs := range w.containers {
		if cs.run != nil && cs.terminated == nil {
			<-cs.run.exited
			w.mu.Lock()
			cs.terminated, cs.ready = terminatedState(cs.run), false
			w.mu.Unlock()
		}
	}
}

// deleteFromAPI removes the pod with grace 0, only if it is still this pod
// (UID precondition), retrying on API errors as the kubelet's status
// manager does on each sync: an API server restarting or unreachable for
// a minute must not leave the pod Terminating for ever. Retries back off
// from 200 ms to 5 s and end after deleteRetryFor.
func (w *podWorker) deleteFromAPI(ctx context.Context) {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &w.pod.UID}}
	pods := w.a.cfg.Client.CoreV1().Pods(w.pod.Namespace)
	delay, giveUp := 200*time.Millisecond, time.Now().Add(deleteRetryFor)
	for attempt := 0; ; attempt++ {
		err := pods.Delete(ctx, w.pod.Name, opts)
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
			w.log.Info().Msg("pod deleted")
			return
		}
		if time.Now().After(giveUp) {
			w.log.Error().Err(err).Int("attempt", attempt).Msg("deleting pod: giving up")
			return
		}
		w.log.Warn().Err(err).Int("attempt", attempt).Msg("deleting pod")
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// deleteRetryFor bounds deleteFromAPI's retries: past an API-server
// outage of a few minutes.
const deleteRetryFor = 3 * time.Minute

// deleteOrphan deletes a pod seen only while terminating: nothing of it
// runs here (the agent restarted, or the pod never started).
func (a *Agent) deleteOrphan(ctx context.Context, pod *corev1.Pod) {
	w := &podWorker{a: a, pod: pod, log: a.log.With().Str("pod", pod.Namespace+"/"+pod.Name).Logger()}
	w.deleteFromAPI(ctx)
}
