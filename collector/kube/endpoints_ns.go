package kube

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// namespaceWatch is the Service watch of one namespace with local pods and
// the EndpointSlice watch of the services in it that select local pods. Its
// fields are guarded by the endpointWatch's mutex.
type namespaceWatch struct {
	w        *endpointWatch
	ns       string
	svcStop  chan struct{}
	svcInf   cache.SharedIndexInformer
	services []string // followed now, sorted
	// sliceStop stops the current slice watch; gen tells its events from
	// those of a watch already replaced.
	sliceStop chan struct{}
	gen       int
	timer     *time.Timer
	stopped   bool
}

func newNamespaceWatch(w *endpointWatch, ns string) *namespaceWatch {
	return &namespaceWatch{w: w, ns: ns}
}

func (n *namespaceWatch) startServices() {
	lw := cache.NewFilteredListWatchFromClient(n.w.k.client.CoreV1().RESTClient(), "services", n.ns, func(*metav1.ListOptions) {})
	n.svcInf = cache.NewSharedIndexInformer(lw, &corev1.Service{}, 0, cache.Indexers{})
	_ = n.svcInf.SetTransform(shrinkServiceObject)
	changed := func(any) {
		n.w.k.counts.services.Add(1)
		n.w.mu.Lock()
		defer n.w.mu.Unlock()
		n.scheduleRecompute()
	}
	_, _ = n.svcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
	})
	n.svcStop = make(chan struct{})
	go n.svcInf.Run(n.svcStop)
}

// scheduleRecompute coalesces changes into one recompute; mu is held.
func (n *namespaceWatch) scheduleRecompute() {
	if n.timer == nil && !n.stopped {
		n.timer = time.AfterFunc(recomputeDelay, n.recompute)
	}
}

// recompute restarts the slice watch when the set of services selecting
// local pods has changed.
func (n *namespaceWatch) recompute() {
	defer n.w.flush()
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	n.timer = nil
	if n.stopped {
		return
	}
	if !n.svcInf.HasSynced() {
		n.scheduleRecompute()
		return
	}
	set := n.w.selectingServices(n.ns, n.svcInf.GetStore().List())
	if slices.Equal(set, n.services) {
		return
	}
	n.w.k.cfg.Log.Debug().Str("namespace", n.ns).Strs("services", set).Msg("following EndpointSlices")
	n.restartSlices(set)
}

// restartSlices replaces the slice watch by one for the given services.
func (n *namespaceWatch) restartSlices(set []string) {
	n.stopSlices()
	n.services = set
	n.gen++
	follow := func(_ string, e sliceEntry) bool { return slices.Contains(set, e.service) }
	n.w.emit(n.w.table.retain(n.ns, follow, n.w.k.cfg.Now()))
	if len(set) == 0 {
		return
	}
	n.w.k.counts.restarts.Add(1)
	req, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In, set)
	if err != nil {
		n.w.k.cfg.Log.Error().Err(err).Strs("services", set).Msg("cannot select EndpointSlices of these services")
		return
	}
	selector := labels.NewSelector().Add(*req).String()
	lw := cache.NewFilteredListWatchFromClient(n.w.k.client.DiscoveryV1().RESTClient(), "endpointslices", n.ns,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	inf := cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	_ = inf.SetTransform(shrinkSliceObject)
	gen := n.gen
	_, _ = inf.AddEventHandler(n.sliceHandler(gen))
	n.sliceStop = make(chan struct{})
	go inf.Run(n.sliceStop)
	go n.reconcileAfterSync(inf, gen, n.sliceStop)
}

// reconcileAfterSync drops slices deleted while no watch ran: the new
// watch's first list is the truth for the services it follows.
func (n *namespaceWatch) reconcileAfterSync(inf cache.SharedIndexInformer, gen int, stop chan struct{}) {
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		return
	}
	defer n.w.flush()
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	if gen != n.gen || n.stopped {
		return
	}
	listed := make(map[string]bool)
	for _, key := range inf.GetStore().ListKeys() {
		listed[key] = true
	}
	n.w.emit(n.w.table.retain(n.ns, func(key string, _ sliceEntry) bool { return listed[key] }, n.w.k.cfg.Now()))
}

func (n *namespaceWatch) sliceHandler(gen int) cache.ResourceEventHandler {
	// on counts a slice event and, unless a newer watch generation or a
	// stop replaced this one, applies change to the table.
	on := func(obj any, change func(s *discoveryv1.EndpointSlice, now time.Time) []collector.EndpointUpdate) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		n.w.k.counts.slices.Add(1)
		defer n.w.flush()
		n.w.mu.Lock()
		defer n.w.mu.Unlock()
		if gen == n.gen && !n.stopped {
			n.w.emit(change(s, n.w.k.cfg.Now()))
		}
	}
	apply := func(obj any) { on(obj, n.w.table.apply) }
	remove := func(obj any) {
		on(obj, func(s *discoveryv1.EndpointSlice, now time.Time) []collector.EndpointUpdate {
			return n.w.table.remove(s.Namespace, s.Name, now)
		})
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: apply, UpdateFunc: func(_, o any) { apply(o) }, DeleteFunc: remove}
}

func (n *namespaceWatch) stopSlices() {
	if n.sliceStop != nil {
		close(n.sliceStop)
		n.sliceStop = nil
	}
}

// stop ends both watches; mu is held.
func (n *namespaceWatch) stop() {
	n.stopped = true
	if n.timer != nil {
		n.timer.Stop()
	}
	n.stopSlices()
	close(n.svcStop)
}
