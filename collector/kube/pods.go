package kube

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// defaultGrace is the API's default spec.terminationGracePeriodSeconds.
const defaultGrace = 30 * time.Second

// podWatch is the node's pod informer: one list+watch limited by
// spec.nodeName, caching shrunk pods.
type podWatch struct {
	k *Kube
	// blind dates the deletions delivered while catching up on a failure.
	blind blindWindow
	// scope decides which pods are observed (Config.Scope).
	scope scopeMemory
}

func newPodWatch(k *Kube) *podWatch { return &podWatch{k: k, scope: scopeMemory{scope: k.cfg.Scope}} }

// start runs the informer and waits for its first list.
func (w *podWatch) start(ctx context.Context) error {
	selector := fields.OneTermEqualSelector("spec.nodeName", w.k.cfg.NodeName).String()
	inf := w.newPodInformer(func(o *metav1.ListOptions) { o.FieldSelector = selector })
	if err := inf.SetTransform(shrinkPodObject); err != nil {
		return fmt.Errorf("setting pod transform: %w", err)
	}
	if err := inf.SetWatchErrorHandler(w.watchFailed); err != nil {
		return fmt.Errorf("setting pod watch error handler: %w", err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: w.onAdd, UpdateFunc: w.onUpdate, DeleteFunc: w.onDelete,
	})
	if err != nil {
		return fmt.Errorf("adding pod handler: %w", err)
	}
	go inf.Run(ctx.Done())
	// The registration is synced once the first list has been handed to
	// the sink: Synced then means "every pod of the node was sent".
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("listing pods of node %s did not complete: check the API server address and that the service account may list/watch pods", w.k.cfg.NodeName)
	}
	w.k.cfg.Log.Info().Str("node", w.k.cfg.NodeName).Int("pods", len(inf.GetStore().ListKeys())).Msg("pod watch synced")
	return nil
}

// watchFailed logs as the informer's default handler does and records the
// failure for the daemon's liveness.
func (w *podWatch) watchFailed(r *cache.Reflector, err error) {
	if notFailing(err) {
		w.k.cfg.Log.Debug().Err(err).Msg("pod watch restarted")
		return
	}
	w.k.counts.podFailures.Add(1)
	w.k.health.failed(r, err)
	w.blind.failed(w.k.cfg.Now())
	w.k.cfg.Log.Warn().Err(err).Msg("pod watch failed; retrying")
}

func (w *podWatch) onAdd(obj any) {
	w.k.health.received()
	if pod, ok := obj.(*corev1.Pod); ok {
		w.k.counts.pods.Add(1)
		if w.scope.admits(pod) {
			w.emit(pod)
		}
	}
}

func (w *podWatch) onUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	w.k.health.received()
	w.k.counts.pods.Add(1)
	if samePodButVersion(oldPod, pod) || !w.scope.admits(pod) {
		return // a change in a field the transform dropped, or out of scope
	}
	w.emit(pod)
}

func (w *podWatch) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj // the watch missed the delete; the last known state
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.k.counts.pods.Add(1)
	if !w.scope.forget(pod) {
		return // never observed: out of scope
	}
	uid := string(pod.UID)
	now := w.k.cfg.Now()
	w.k.cfg.Sink.PodDeleted(collector.PodDeleted{Seen: now, UID: uid, BlindSince: w.blind.blindSince(now)})
	linger := podGrace(pod) + w.k.cfg.Linger
	time.AfterFunc(linger, func() {
		w.k.events.stop(uid)
		w.k.endpoints.podGone(pod.Namespace, uid)
	})
}

// emit converts a pod, sends it to the sink and keeps the Event and
// EndpointSlice watches in step with it.
func (w *podWatch) emit(pod *corev1.Pod) {
	wl := w.k.owners.workload(pod)
	p := ConvertPod(pod, wl)
	if pod.DeletionTimestamp != nil {
		p.Stop.OwnerRevision = w.k.owners.currentRevision(wl)
	}
	w.k.cfg.Sink.Pod(collector.PodUpdate{Seen: w.k.cfg.Now(), Pod: p})
	w.k.endpoints.podSeen(pod.Namespace, string(pod.UID), pod.Labels)
	if pod.DeletionTimestamp != nil || stoppedWithoutDeletion(pod, p) {
		w.k.events.start(pod.Namespace, string(pod.UID))
	}
}

// stoppedWithoutDeletion says whether the kubelet stopped the pod or one
// of its containers with no deletion: its verdict in the status (node
// pressure, node shutdown), a container terminated or restarted. The
// Killing Event (a failed liveness probe says so) is read from then on;
// the watch's list returns the one already recorded. It stays until the
// pod is deleted: one small watch per such pod of the node.
func stoppedWithoutDeletion(pod *corev1.Pod, p collector.Pod) bool {
	if p.Stop.Disruption != "" || p.Stop.Reason != "" {
		return true
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated != nil || s.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// stopEvidence reads why the pod stops from its status: the
// DisruptionTarget condition and the kubelet's reason and message.
func stopEvidence(pod *corev1.Pod) collector.StopEvidence {
	e := collector.StopEvidence{Reason: pod.Status.Reason, Message: pod.Status.Message}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			e.Disruption = c.Reason
		}
	}
	return e
}

func samePodButVersion(a, b *corev1.Pod) bool {
	ac, bc := *a, *b
	ac.ResourceVersion, bc.ResourceVersion = "", ""
	return equality.Semantic.DeepEqual(&ac, &bc)
}

// ConvertPod turns a (shrunk) API pod into the collector's Pod.
func ConvertPod(pod *corev1.Pod, w collector.Workload) collector.Pod {
	p := collector.Pod{
		UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
		Workload: w, GracePeriod: podGrace(pod), Ready: podReady(pod), Created: pod.CreationTimestamp.Time,
	}
	p.IP, _ = netip.ParseAddr(pod.Status.PodIP)
	if len(pod.Status.PodIPs) > 1 {
		for _, ip := range pod.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				p.IPs = append(p.IPs, a)
			}
		}
	}
	p.Stop = stopEvidence(pod)
	p.Terminal = pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	if pod.DeletionTimestamp != nil {
		p.DeletionTimestamp = pod.DeletionTimestamp.Time
		if s := pod.DeletionGracePeriodSeconds; s != nil {
			p.DeletionGracePeriod = time.Duration(*s) * time.Second
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			p.HasPreStop = true
		}
		for _, port := range c.Ports {
			p.HTTP2 = p.HTTP2 || collector.HTTP2PortName(port.Name)
		}
		p.Containers = append(p.Containers, convertContainer(c, pod.Status.ContainerStatuses))
	}
	for _, c := range pod.Spec.InitContainers {
		if !nativeSidecar(c) {
			continue
		}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			p.HasPreStop = true
		}
		sc := convertContainer(c, pod.Status.InitContainerStatuses)
		sc.Sidecar = true
		p.Containers = append(p.Containers, sc)
	}
	return p
}

func convertContainer(c corev1.Container, statuses []corev1.ContainerStatus) collector.Container {
	out := collector.Container{Name: c.Name}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		out.StopSignal = signalNumber(*c.Lifecycle.StopSignal)
	}
	for _, s := range statuses {
		if s.Name != c.Name {
			continue
		}
		out.ID = collector.TrimContainerID(s.ContainerID)
		if s.StopSignal != nil {
			out.StopSignal = signalNumber(*s.StopSignal)
		}
		if t := s.State.Terminated; t != nil {
			out.Terminated, out.ExitCode, out.Reason = true, t.ExitCode, t.Reason
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			out.LastReason = t.Reason
		}
	}
	return out
}

// signalNumber maps an API signal name (SIGTERM, SIGUSR1…) to its number; 0
// (meaning SIGTERM) for a name this platform does not know.
func signalNumber(s corev1.Signal) uint32 {
	return uint32(unix.SignalNum(string(s)))
}

func podGrace(pod *corev1.Pod) time.Duration {
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return defaultGrace
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
