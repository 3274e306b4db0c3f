package kube

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// namespaceWatch is the Service watch of one namespace with local pods and
// one EndpointSlice watch per service in it that selects local pods. Its
// fields are guarded by the endpointWatch's mutex.
type namespaceWatch struct {
	w       *endpointWatch
	ns      string
	svcStop chan struct{}
	svcInf  cache.SharedIndexInformer
	// slices are the followed services' slice watches, by service name.
	// A handler applies events only while its watch is the one here.
	slices  map[string]*serviceSlices
	timer   *time.Timer
	stopped bool
}

// serviceSlices is the slice watch of one service.
type serviceSlices struct {
	service string
	stop    chan struct{}
	// blind dates the changes delivered while catching up on a failure.
	blind blindWindow
}

func newNamespaceWatch(w *endpointWatch, ns string) *namespaceWatch {
	return &namespaceWatch{w: w, ns: ns, slices: make(map[string]*serviceSlices)}
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

// recompute follows the services that came to select local pods and
// stops following those that no longer do. Each service has its own watch,
// so a change of the set lists only the services that joined it: a single
// watch of the set (kubernetes.io/service-name in (...)) had to be restarted
// with a new list of every followed service at each change, which a rollout
// moving the node's pods between services does several times per daemon.
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
	for name := range n.slices {
		if !slices.Contains(set, name) {
			n.unfollow(name)
		}
	}
	for _, name := range set {
		if n.slices[name] == nil {
			n.w.k.cfg.Log.Debug().Str("namespace", n.ns).Str("service", name).Msg("following EndpointSlices")
			n.follow(name)
		}
	}
}

// unfollow stops a service's slice watch and drops its endpoints; mu is held.
func (n *namespaceWatch) unfollow(name string) {
	close(n.slices[name].stop)
	delete(n.slices, name)
	n.w.emit(n.w.table.retain(n.ns, func(_ string, e sliceEntry) bool { return e.service != name }, n.w.k.cfg.Now()))
}

// follow starts the slice watch of a service (label selector
// kubernetes.io/service-name=<name>); mu is held.
func (n *namespaceWatch) follow(name string) {
	n.w.k.counts.sliceWatches.Add(1)
	ss := &serviceSlices{service: name, stop: make(chan struct{})}
	n.slices[name] = ss
	selector := labels.SelectorFromValidatedSet(labels.Set{discoveryv1.LabelServiceName: name}).String()
	lw := cache.NewFilteredListWatchFromClient(n.w.k.client.DiscoveryV1().RESTClient(), "endpointslices", n.ns,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	n.watchBlindness(lw, ss)
	inf := cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	_ = inf.SetTransform(shrinkSliceObject)
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		if !notFailing(err) {
			ss.blind.failed(n.w.k.cfg.Now())
		}
	})
	_, _ = inf.AddEventHandler(n.sliceHandler(ss))
	go inf.Run(ss.stop)
	go n.reconcileAfterSync(inf, ss)
}

// reconcileAfterSync drops the service's slices deleted while it was not
// followed: the watch's first list is the truth for its service.
func (n *namespaceWatch) reconcileAfterSync(inf cache.SharedIndexInformer, ss *serviceSlices) {
	if !cache.WaitForCacheSync(ss.stop, inf.HasSynced) {
		return
	}
	defer n.w.flush()
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	if n.slices[ss.service] != ss || n.stopped {
		return
	}
	listed := make(map[string]bool)
	for _, key := range inf.GetStore().ListKeys() {
		listed[key] = true
	}
	keep := func(key string, e sliceEntry) bool { return e.service != ss.service || listed[key] }
	now := n.w.k.cfg.Now()
	n.w.emit(blindSince(n.w.table.retain(n.ns, keep, now), ss.blind.blindSince(now)))
}

// watchBlindness has every slice watch call of ss recorded in its blind
// window: the reflector retries a refused watch without telling the error
// handler, and an opened one ends the failure.
func (n *namespaceWatch) watchBlindness(lw *cache.ListWatch, ss *serviceSlices) {
	open := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		wi, err := open(ctx, o)
		ss.blind.watchCalled(err, n.w.k.cfg.Now())
		return wi, err
	}
}

// blindSince stamps updates with the start of the blind period they catch
// up on (zero: none).
func blindSince(updates []collector.EndpointUpdate, since time.Time) []collector.EndpointUpdate {
	for i := range updates {
		updates[i].BlindSince = since
	}
	return updates
}

func (n *namespaceWatch) sliceHandler(ss *serviceSlices) cache.ResourceEventHandler {
	// on counts a slice event and, unless the service is no longer
	// followed by this watch, applies change to the table.
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
		if n.slices[ss.service] == ss && !n.stopped {
			now := n.w.k.cfg.Now()
			n.w.emit(blindSince(change(s, now), ss.blind.blindSince(now)))
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

// stop ends the namespace's watches; mu is held.
func (n *namespaceWatch) stop() {
	n.stopped = true
	if n.timer != nil {
		n.timer.Stop()
	}
	for name, ss := range n.slices {
		close(ss.stop)
		delete(n.slices, name)
	}
	close(n.svcStop)
}
