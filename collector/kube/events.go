package kube

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// Kubelet Event reasons that mark a termination.
const (
	ReasonKilling           = "Killing"
	ReasonFailedPreStopHook = "FailedPreStopHook"
)

// eventWatch watches the Events of each terminating local pod (deleted, or
// stopped by the kubelet without a deletion: stoppedWithoutDeletion), one small
// list+watch per pod with fieldSelector involvedObject.uid=<uid>. The API
// server offers no field selector on the reporting host, and Events have no
// watch cache by default, so a per-node watch of every kubelet Event would
// hand each node the Events of every rollout in the cluster; a per-pod watch
// costs nothing while no local pod terminates. Its initial list also returns
// the Killing Event recorded before the daemon saw the deletion.
//
// The watch is a plain list, then a watch from the list's resourceVersion,
// never client-go's WatchList (sendInitialEvents): Events have no watch
// cache, and an etcd-backed watch ends its initial events with the required
// bookmark only at etcd's next progress notification. Under load that took
// 10-30 s, and the reflector delivers nothing, neither the initial Events nor
// the new ones, until that bookmark: Killing Events were lost with the
// linger (make scale: 153 Events for 500 terminations).
type eventWatch struct {
	k     *Kube
	mu    sync.Mutex
	stops map[string]chan struct{} // by pod UID
}

func newEventWatch(k *Kube) *eventWatch {
	return &eventWatch{k: k, stops: make(map[string]chan struct{})}
}

// start watches the Events of a pod; a no-op when already watching.
func (w *eventWatch) start(ns, uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.stops[uid]; ok {
		return
	}
	stop := make(chan struct{})
	w.stops[uid] = stop
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.uid", uid),
		fields.OneTermEqualSelector("involvedObject.kind", "Pod")).String()
	lw := cache.NewFilteredListWatchFromClient(w.k.client.CoreV1().RESTClient(), "events", ns,
		func(o *metav1.ListOptions) { o.FieldSelector = selector })
	inf := cache.NewSharedIndexInformer(listThenWatch{lw}, &corev1.Event{}, 0, cache.Indexers{})
	_ = inf.SetTransform(shrinkEventObject)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: w.onAdd})
	go inf.Run(stop)
}

// listThenWatch makes the reflector list and then watch, even with
// client-go's WatchListClient feature on (see eventWatch).
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// stop ends a pod's Event watch.
func (w *eventWatch) stop(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if stop, ok := w.stops[uid]; ok {
		close(stop)
		delete(w.stops, uid)
	}
}

func (w *eventWatch) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, stop := range w.stops {
		close(stop)
		delete(w.stops, uid)
	}
}

// onAdd forwards a kubelet Event. Updates are count bumps of the same Event
// (the recorder's aggregation): its first occurrence is the mark.
func (w *eventWatch) onAdd(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	w.k.counts.events.Add(1)
	if ke, ok := ConvertKubeletEvent(ev, w.k.cfg.NodeName); ok {
		ke.Time = refineEventTime(ke.Time, w.k.cfg.Now())
		w.k.cfg.Sink.Kubelet(ke)
	}
}

// refineEventTime sharpens an Event time that has only whole seconds (the
// legacy recorder's firstTimestamp): the Event happened in [t, t+1s) and no
// later than it was received, so a receipt inside that second is the
// closer bound (watch latency is milliseconds; truncation costs up to 1 s
// of prestop_duration).
func refineEventTime(t, received time.Time) time.Time {
	if t.Nanosecond() != 0 || received.Before(t) || !received.Before(t.Add(time.Second)) {
		return t
	}
	return received
}

// ConvertKubeletEvent turns a pod's Killing or FailedPreStopHook Event
// recorded by the kubelet of node into a KubeletEvent; ok is false for any
// other Event.
func ConvertKubeletEvent(ev *corev1.Event, node string) (collector.KubeletEvent, bool) {
	if ev.InvolvedObject.Kind != "Pod" || (ev.Reason != ReasonKilling && ev.Reason != ReasonFailedPreStopHook) ||
		!fromKubeletOf(ev, node) {
		return collector.KubeletEvent{}, false
	}
	return collector.KubeletEvent{
		PodUID: string(ev.InvolvedObject.UID), Reason: ev.Reason, Message: ev.Message, Time: eventTime(ev),
	}, true
}

// fromKubeletOf reports whether ev names the kubelet of node as its
// reporter. Anyone allowed to create Events in a namespace can write one
// with reason Killing about any pod: a mark the kubelet did not set would
// move a termination's timeline and its durations. The kubelet's recorder
// sets source (component, host) and, on newer clients, reporting
// (controller, instance) to the same pair: each pair that is set must be
// the kubelet of this node, and one must be set.
func fromKubeletOf(ev *corev1.Event, node string) bool {
	source := reporter{ev.Source.Component, ev.Source.Host}
	reporting := reporter{ev.ReportingController, ev.ReportingInstance}
	if source == (reporter{}) && reporting == (reporter{}) {
		return false
	}
	return source.isKubeletOf(node) && reporting.isKubeletOf(node)
}

// reporter is who an Event says recorded it; the zero value is unset.
type reporter struct{ component, host string }

// isKubeletOf is true for the kubelet of node, or an unset reporter.
func (r reporter) isKubeletOf(node string) bool {
	return r == reporter{} || (r.component == "kubelet" && r.host == node)
}

// eventTime is the Event's own time: eventTime (µs) when the recorder set
// it, else the first occurrence (s), else its creation.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

func shrinkEventObject(obj any) (any, error) {
	if ev, ok := obj.(*corev1.Event); ok {
		ev.ManagedFields = nil
		ev.Annotations = nil
	}
	return obj, nil
}
