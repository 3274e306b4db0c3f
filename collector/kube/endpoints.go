package kube

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/drainwatch/drainwatch/collector"
)

// recomputeDelay coalesces bursts of pod and service changes (the first
// list at start, a rollout placing several pods) into one recompute of the
// followed services.
const recomputeDelay = 200 * time.Millisecond

// endpointWatch follows the EndpointSlices of the services that select the
// node's pods, and nothing else. EndpointSlices cannot be filtered by node,
// and a cluster-wide slice watch on every node would multiply every slice
// change in the cluster by the node count (kube-proxy already does). Instead,
// per namespace that has local pods, it watches the namespace's Services
// (they change rarely), computes the services selecting a local pod, and
// watches only their slices, one watch per service with the label selector
// kubernetes.io/service-name=<name>: a service joining the set costs one
// list of its own slices, one leaving costs nothing, and the others' watches
// go on. A rollout of a workload with no pod on this node sends this node
// nothing.
type endpointWatch struct {
	k     *Kube
	mu    sync.Mutex
	table *endpointTable
	// out holds the updates the table produced, in order, until flush
	// sends them; sending holds sendMu and never mu, so a sink that
	// blocks never blocks stopAll or the other watches' handlers.
	out        []collector.EndpointUpdate
	sendMu     sync.Mutex
	pods       map[string]localPod // by UID, deleted pods until their linger ends
	namespaces map[string]*namespaceWatch
}

type localPod struct {
	namespace string
	labels    labels.Set
}

func newEndpointWatch(k *Kube) *endpointWatch {
	w := &endpointWatch{k: k, pods: make(map[string]localPod), namespaces: make(map[string]*namespaceWatch)}
	w.table = newEndpointTable(func(uid string) bool { _, ok := w.pods[uid]; return ok })
	return w
}

// podSeen records a local pod's labels (they decide which services select it).
func (w *endpointWatch) podSeen(ns, uid string, podLabels map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, known := w.pods[uid]
	w.pods[uid] = localPod{namespace: ns, labels: labels.Set(podLabels)}
	nw := w.namespaces[ns]
	if nw == nil {
		nw = newNamespaceWatch(w, ns)
		w.namespaces[ns] = nw
		nw.startServices()
	}
	if !known || !labels.Equals(old.labels, labels.Set(podLabels)) {
		nw.scheduleRecompute()
	}
}

// podGone forgets a pod once its linger has passed; the namespace's watches
// stop with its last pod.
func (w *endpointWatch) podGone(ns, uid string) {
	defer w.flush()
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, uid)
	w.table.forget(uid)
	nw := w.namespaces[ns]
	if nw == nil {
		return
	}
	if w.hasPods(ns) {
		nw.scheduleRecompute()
		return
	}
	nw.stop()
	delete(w.namespaces, ns)
	w.emit(w.table.retain(ns, func(string, sliceEntry) bool { return false }, w.k.cfg.Now()))
}

func (w *endpointWatch) hasPods(ns string) bool {
	for _, p := range w.pods {
		if p.namespace == ns {
			return true
		}
	}
	return false
}

func (w *endpointWatch) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, nw := range w.namespaces {
		nw.stop()
		delete(w.namespaces, ns)
	}
}

// emit queues endpoint updates for flush; called with mu held so the sink
// sees them in the order the table produced them.
func (w *endpointWatch) emit(updates []collector.EndpointUpdate) {
	w.out = append(w.out, updates...)
}

// flush sends the queued updates to the sink; called without mu. sendMu
// keeps the order across callers: whoever takes a batch sends it before
// the next batch is taken.
func (w *endpointWatch) flush() {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	w.mu.Lock()
	out := w.out
	w.out = nil
	w.mu.Unlock()
	for _, u := range out {
		w.k.cfg.Sink.Endpoint(u)
	}
}

// selectingServices returns, sorted, the services of ns whose selector
// matches a local pod. Services without a selector (hand-made slices) are
// not followed.
func (w *endpointWatch) selectingServices(ns string, services []any) []string {
	var out []string
	for _, obj := range services {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromValidatedSet(labels.Set(svc.Spec.Selector))
		for _, p := range w.pods {
			if p.namespace == ns && sel.Matches(p.labels) {
				out = append(out, svc.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func shrinkServiceObject(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		meta := svc.ObjectMeta
		meta.ManagedFields, meta.Annotations = nil, nil
		return &corev1.Service{TypeMeta: svc.TypeMeta, ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: svc.Spec.Selector}}, nil
	}
	return obj, nil
}

func shrinkSliceObject(obj any) (any, error) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		s.ManagedFields = nil
	}
	return obj, nil
}
