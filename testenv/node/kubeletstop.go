package node

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet stops pods of its own accord, with no deletion: node-pressure
// eviction (pkg/kubelet/eviction) and graceful node shutdown
// (pkg/kubelet/nodeshutdown). Its pod worker first writes the verdict into
// the status (phase Failed, reason, message, the DisruptionTarget condition
// with reason TerminationByKubelet), then stops the containers with the
// grace it chose (Killing "Stopping container …", the stop signal, SIGKILL
// after the grace) and tears the sandbox down. The Pod object stays Failed
// until someone deletes it (the pod GC, a person, the controller): the
// kubelet then deletes it with grace 0, nothing being left to stop.

// Status reasons and messages the kubelet writes (checked against
// pkg/kubelet/eviction and pkg/kubelet/nodeshutdown).
const (
	ReasonEvicted          = "Evicted"
	ReasonNodeShutdown     = "Terminated"
	MessageNodeShutdown    = "Pod was terminated in response to imminent node shutdown."
	disruptionByKubelet    = "TerminationByKubelet"
	evictionMessageFormat  = "The node was low on resource: %s. Threshold quantity: %s, available: %s. "
	evictionUsageFormat    = "Container %s was using %s, request is %s, has larger consumption of %s. "
	defaultEvictionRequest = "0"
)

// verdict is the kubelet's decision to stop a pod: what the status says
// and the grace period it stops the containers with.
type verdict struct {
	reason, message string
	grace           int64
	// event is the Warning Event's reason recorded before the kill
	// (Evicted), "" for none (node shutdown logs, it records none per pod).
	event string
	done  chan struct{} // closed once the containers are stopped
}

// EvictionMessage is the message of a node-pressure eviction for memory as
// the eviction manager writes it (threshold, available, the container that
// used the most).
func EvictionMessage(threshold, available, container, usage string) string {
	return fmt.Sprintf(evictionMessageFormat, corev1.ResourceMemory, threshold, available) +
		fmt.Sprintf(evictionUsageFormat, container, usage, defaultEvictionRequest, corev1.ResourceMemory)
}

// Evict stops a pod of this node the way the kubelet's eviction manager
// does under node pressure: the Evicted Event, status Failed/Evicted with
// the DisruptionTarget condition, containers stopped with grace (the
// soft-eviction evictionMaxPodGracePeriod; a hard threshold uses 0, which
// the kubelet raises to its 2 s floor), sandbox gone, no deletion. It
// returns once the containers are stopped.
func (a *Agent) Evict(ctx context.Context, uid types.UID, message string, grace int64) error {
	return a.stopPods(ctx, []types.UID{uid}, verdict{reason: ReasonEvicted, message: message, grace: grace, event: ReasonEvicted})
}

// ShutdownNode stops every pod of the node the way graceful node shutdown
// does: each one's status says the node is shutting down, its containers
// get min(their grace, shutdownGrace), all pods in parallel. It returns
// once every container is stopped; the agent itself keeps running (the
// Pod objects stay Failed, as after a real node's reboot until the pod GC
// or the controllers clean up).
func (a *Agent) ShutdownNode(ctx context.Context, shutdownGrace int64) error {
	a.mu.Lock()
	var uids []types.UID
	for uid := range a.workers {
		uids = append(uids, uid)
	}
	a.mu.Unlock()
	return a.stopPods(ctx, uids, verdict{reason: ReasonNodeShutdown, message: MessageNodeShutdown, grace: shutdownGrace})
}

// ShutdownPods stops the given pods of this node as ShutdownNode stops
// all of them: for a node shared with pods that must keep running (the
// lab's nodes carry its earlier scenarios' pods), the shutdown as those
// pods see it.
func (a *Agent) ShutdownPods(ctx context.Context, uids []types.UID, shutdownGrace int64) error {
	return a.stopPods(ctx, uids, verdict{reason: ReasonNodeShutdown, message: MessageNodeShutdown, grace: shutdownGrace})
}

// stopPods hands each pod's worker the verdict and waits for all of them.
func (a *Agent) stopPods(ctx context.Context, uids []types.UID, v verdict) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(uids))
	for _, uid := range uids {
		a.mu.Lock()
		w := a.workers[uid]
		a.mu.Unlock()
		if w == nil {
			return fmt.Errorf("node %s: no running pod %s", a.cfg.Name, uid)
		}
		pv := v
		pv.done = make(chan struct{})
		select {
		case w.verdicts <- pv:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-pv.done:
			case <-ctx.Done():
				errs <- fmt.Errorf("stopping pod %s: %w", uid, ctx.Err())
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// stopByKubelet applies a verdict: the Event, the status, then the
// containers stopped like a deletion's but with the verdict's grace, and
// the sandbox torn down. The pod then waits for its deletion (after).
func (w *podWorker) stopByKubelet(ctx context.Context, v verdict) {
	if v.event != "" {
		w.a.events.record(w.pod, "", corev1.EventTypeWarning, v.event, v.message)
	}
	w.verdict = &v
	w.terminating = true
	w.push(ctx) // the status first, as the kubelet's pod worker writes it
	grace := min(v.grace, GracePeriod(w.pod))
	w.log.Info().Str("reason", v.reason).Int64("grace", grace).Msg("kubelet stops the pod")
	w.terminate(ctx, grace, false)
	close(v.done)
}

// afterKubeletStop waits, the pod stopped, for its deletion: the kubelet
// then deletes it at once (grace 0), nothing being left to stop.
func (w *podWorker) afterKubeletStop(ctx context.Context) {
	if w.pod.DeletionTimestamp != nil { // arrived while the containers stopped
		w.deleteFromAPI(ctx)
		return
	}
	for {
		select {
		case p := <-w.updates:
			w.setPod(p)
			if p.DeletionTimestamp != nil {
				w.deleteFromAPI(ctx)
				return
			}
		case v := <-w.verdicts: // already stopped
			close(v.done)
		case <-w.gone:
			return
		case <-ctx.Done():
			return
		}
	}
}

// applyVerdict writes the kubelet's verdict into a pod status.
func (v *verdict) applyVerdict(w *podWorker, st *corev1.PodStatus) {
	st.Phase, st.Reason, st.Message = corev1.PodFailed, v.reason, v.message
	c := w.condition(corev1.DisruptionTarget, true)
	c.Reason, c.Message = disruptionByKubelet, v.message
	st.Conditions = append(st.Conditions, c)
}
