package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// newPodInformer is the node's pod informer, built as client-go's informer
// factory builds it (typed client, WatchList when the client supports it)
// with one difference: every watch call's outcome reaches the watch health.
//
// The reflector retries a watch refused by the API server (connection
// refused, 429) itself, with backoff (0.8 s doubling to 30 s, jittered),
// without a relist and without calling the watch error handler: it expects
// to resume where it was. Through the handler alone, an API server that
// refuses connections for good never counted as a failing watch, and
// liveness never reported it.
func (w *podWatch) newPodInformer(tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	pods := w.k.client.CoreV1().Pods(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			wi, err := pods.Watch(ctx, o)
			w.watchCalled(err)
			return wi, err
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, w.k.client),
		&corev1.Pod{}, cache.SharedIndexInformerOptions{})
}

// watchCalled records a watch call's outcome: an opened watch ends a run of
// failures (the API server answers), a refusal the reflector retries on its
// own is one failure. Other errors reach watchFailed through the reflector.
func (w *podWatch) watchCalled(err error) {
	w.blind.watchCalled(err, w.k.cfg.Now())
	switch {
	case err == nil:
		w.k.health.received()
	case retriedByReflector(err):
		w.k.counts.podFailures.Add(1)
		w.k.health.failed(nil, err)
		w.k.cfg.Log.Warn().Err(err).Msg("pod watch refused; the informer retries with backoff")
	}
}

// retriedByReflector is client-go's isWatchErrorRetriable: the errors the
// reflector retries without a relist and without telling the handler.
func retriedByReflector(err error) bool {
	return utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)
}
