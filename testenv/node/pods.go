package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watchPods starts the informer on this node's pods and waits for its
// first sync.
func (a *Agent) watchPods(ctx context.Context) error {
	selector := fields.OneTermEqualSelector("spec.nodeName", a.cfg.Name).String()
	factory := informers.NewSharedInformerFactoryWithOptions(a.cfg.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.onPod(ctx, obj) },
		UpdateFunc: func(_, obj any) { a.onPod(ctx, obj) },
		DeleteFunc: func(obj any) { a.onPodDeleted(obj) },
	})
	if err != nil {
		return fmt.Errorf("pod informer handler: %w", err)
	}
	a.goRun(func() { inf.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("node %s: pod informer did not sync", a.cfg.Name)
	}
	return nil
}

// onPod starts a worker for a new pod, or hands the update to its worker.
func (a *Agent) onPod(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.workers[pod.UID]; w != nil {
		w.update(pod)
		return
	}
	if _, done := a.finished[pod.UID]; done {
		return
	}
	switch {
	case pod.DeletionTimestamp != nil:
		a.goRun(func() { a.deleteOrphan(ctx, pod) })
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
	default:
		w := newPodWorker(a, pod)
		a.workers[pod.UID] = w
		a.goRun(func() { w.run(ctx); a.retire(w) })
	}
}

func (a *Agent) onPodDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.workers[pod.UID]; w != nil {
		w.markGone(pod)
	}
}

// retire moves a finished worker out of the live set; its record stays
// readable (Terminations) for the life of the agent.
func (a *Agent) retire(w *podWorker) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.workers, w.pod.UID)
	a.finished[w.pod.UID] = w
}
