package scale

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// naive is the design drainwatch avoids: the node's pods, plus one
// cluster-wide EndpointSlice watch and one cluster-wide watch of pod
// Events, on every node. It only counts what it receives.
type naive struct {
	client                  kubernetes.Interface
	node                    string
	pods, slices, events    atomic.Uint64
	podInf, sliceInf, evInf cache.SharedIndexInformer
}

func newNaive(node string, cfg *rest.Config) (*naive, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating API client: %w", err)
	}
	n := &naive{client: client, node: node}
	rc := client.CoreV1().RESTClient()
	n.podInf = n.informer(rc, "pods", &corev1.Pod{}, fields.OneTermEqualSelector("spec.nodeName", node), &n.pods)
	n.sliceInf = n.informer(client.DiscoveryV1().RESTClient(), "endpointslices", &discoveryv1.EndpointSlice{}, nil, &n.slices)
	n.evInf = n.informer(rc, "events", &corev1.Event{}, fields.OneTermEqualSelector("involvedObject.kind", "Pod"), &n.events)
	return n, nil
}

func (n *naive) informer(c cache.Getter, resource string, obj runtime.Object, sel fields.Selector, count *atomic.Uint64) cache.SharedIndexInformer {
	lw := cache.NewFilteredListWatchFromClient(c, resource, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		if sel != nil {
			o.FieldSelector = sel.String()
		}
	})
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	_ = inf.SetTransform(dropManagedFields)
	on := func(any) { count.Add(1) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, o any) { on(o) }, DeleteFunc: on})
	return inf
}

func (n *naive) run(ctx context.Context) error {
	for _, inf := range []cache.SharedIndexInformer{n.podInf, n.sliceInf, n.evInf} {
		go inf.Run(ctx.Done())
	}
	<-ctx.Done()
	return nil
}

func (n *naive) synced() bool {
	return n.podInf.HasSynced() && n.sliceInf.HasSynced() && n.evInf.HasSynced()
}

func (n *naive) received() received {
	return received{pods: n.pods.Load(), slices: n.slices.Load(), events: n.events.Load()}
}

func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
