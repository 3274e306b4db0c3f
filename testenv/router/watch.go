package router

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Follow selects the EndpointSlices FollowReady watches: those of one
// Service, one port of them.
type Follow struct {
	Client    kubernetes.Interface
	Namespace string
	Service   string
	PortName  string // EndpointSlice port name; the first port when empty
}

// FollowReady runs an informer on the Service's EndpointSlices and calls
// observe with the ready "ip:port" set (sorted) each time it changes. It
// returns once the informer has synced and observe has had the initial set
// (initial true); later calls come from the informer's goroutine, one at a
// time. The informer stops when ctx ends. The router and testenv/l7's
// proxies follow Services through it, the way ingress controllers do.
func FollowReady(ctx context.Context, f Follow, observe func(set []string, initial bool)) error {
	sel := labels.Set{discoveryv1.LabelServiceName: f.Service}.String()
	fac := informers.NewSharedInformerFactoryWithOptions(f.Client, 0,
		informers.WithNamespace(f.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := fac.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	var (
		mu     sync.Mutex // handlers vs. the initial set below
		last   []string
		synced bool
	)
	update := func() {
		mu.Lock()
		defer mu.Unlock()
		if !synced {
			return
		}
		set := readyBackends(lister, f.PortName, f.Namespace)
		if !slices.Equal(set, last) {
			last = set
			observe(set, false)
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	})
	if err != nil {
		return fmt.Errorf("watching EndpointSlices of %s/%s: %w", f.Namespace, f.Service, err)
	}
	fac.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("syncing EndpointSlices of %s/%s: %w", f.Namespace, f.Service, ctx.Err())
	}
	// The initial set comes from the synced cache; an event handled before
	// this point is already in the cache.
	mu.Lock()
	defer mu.Unlock()
	last = readyBackends(lister, f.PortName, f.Namespace)
	observe(last, true)
	synced = true
	return nil
}

// watchSlices feeds the table with the ready backend set each time it
// changes: the initial set applies at once, later ones after the delay.
func (r *Router) watchSlices(ctx context.Context) error {
	f := Follow{Client: r.cfg.Client, Namespace: r.cfg.Namespace, Service: r.cfg.Service, PortName: r.cfg.PortName}
	return FollowReady(ctx, f, func(set []string, initial bool) {
		if !initial {
			r.log.Debug().Strs("backends", set).Msg("endpoint set observed")
		}
		r.table.Observe(set, initial)
	})
}

// readyBackends lists "ip:port" of every ready endpoint (a nil ready condition
// means ready, as the EndpointSlice API says), sorted and deduplicated.
func readyBackends(l listers.EndpointSliceLister, portName, ns string) []string {
	all, _ := l.EndpointSlices(ns).List(labels.Everything())
	var out []string
	for _, s := range all {
		port, ok := slicePort(s, portName)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func slicePort(s *discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range s.Ports {
		if p.Port != nil && (name == "" || (p.Name != nil && *p.Name == name)) {
			return *p.Port, true
		}
	}
	return 0, false
}
