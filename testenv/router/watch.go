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
	listers "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// watchSlices runs an informer on the Service's EndpointSlices and feeds the
// table with the ready backend set each time it changes. It returns once the
// informer has synced and the initial set is in the table.
func (r *Router) watchSlices(ctx context.Context) error {
	sel := labels.Set{discoveryv1.LabelServiceName: r.cfg.Service}.String()
	f := informers.NewSharedInformerFactoryWithOptions(r.cfg.Client, 0,
		informers.WithNamespace(r.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := f.Discovery().V1().EndpointSlices()
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
		set := readyBackends(lister, r.cfg.PortName, r.cfg.Namespace)
		if !slices.Equal(set, last) {
			last = set
			r.log.Debug().Strs("backends", set).Msg("endpoint set observed")
			r.table.Observe(set, false)
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	})
	if err != nil {
		return fmt.Errorf("watching EndpointSlices of %s/%s: %w", r.cfg.Namespace, r.cfg.Service, err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("syncing EndpointSlices of %s/%s: %w", r.cfg.Namespace, r.cfg.Service, ctx.Err())
	}
	// The initial set comes from the synced cache and applies at once; an
	// event handled before this point is already in the cache, later ones
	// apply after the delay.
	mu.Lock()
	defer mu.Unlock()
	last = readyBackends(lister, r.cfg.PortName, r.cfg.Namespace)
	r.table.Observe(last, true)
	synced = true
	return nil
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
