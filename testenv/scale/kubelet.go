package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// hollowKubelet stands in for the kubelets of all registered nodes, at
// scale, with no containers: it writes to the API server what a kubelet
// writes for a pod whose single container starts and, at deletion, stops
// within stopAfter (its Events, its status, the final delete with grace 0),
// so the API server and the daemons see the traffic of a real rollout. It
// is not testenv/node's agent (which runs real processes and honours
// preStop hooks, probes and signals): nothing here runs.
type hollowKubelet struct {
	client    kubernetes.Interface
	stopAfter time.Duration
	log       zerolog.Logger
	queue     workqueue.TypedDelayingInterface[types.NamespacedName]
	mu        sync.Mutex
	started   map[types.UID]bool
	stopping  map[types.UID]bool
	ips       atomic.Uint32
	factory   informers.SharedInformerFactory
	inf       cache.SharedIndexInformer
	failures  atomic.Uint64
}

// kubeletWorkers bounds the API writes in flight, as the kubelet's pod
// workers do on each node (here for all nodes at once).
const kubeletWorkers = 32

func newHollowKubelet(client kubernetes.Interface, stopAfter time.Duration, log zerolog.Logger) *hollowKubelet {
	h := &hollowKubelet{
		client: client, stopAfter: stopAfter, log: log,
		queue:   workqueue.NewTypedDelayingQueue[types.NamespacedName](),
		started: make(map[types.UID]bool), stopping: make(map[types.UID]bool),
	}
	h.factory = informers.NewSharedInformerFactory(client, 0)
	h.inf = h.factory.Core().V1().Pods().Informer()
	return h
}

// run watches every bound pod and works its queue until ctx is done.
func (h *hollowKubelet) run(ctx context.Context) {
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			h.queue.Add(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	_, _ = h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	h.factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), h.inf.HasSynced)
	var wg sync.WaitGroup
	for range kubeletWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); h.work(ctx) }()
	}
	<-ctx.Done()
	h.queue.ShutDown()
	wg.Wait()
}

func (h *hollowKubelet) work(ctx context.Context) {
	for {
		key, quit := h.queue.Get()
		if quit {
			return
		}
		if err := h.sync(ctx, key); err != nil && ctx.Err() == nil {
			h.failures.Add(1)
			h.log.Debug().Err(err).Str("pod", key.String()).Msg("hollow kubelet retries")
			h.queue.AddAfter(key, time.Second)
		}
		h.queue.Done(key)
	}
}

// sync moves one pod a step: start a bound pod, begin stopping a deleted
// one, finish it once its container has had stopAfter to exit.
func (h *hollowKubelet) sync(ctx context.Context, key types.NamespacedName) error {
	obj, ok, err := h.inf.GetStore().GetByKey(key.String())
	if err != nil || !ok {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" {
		return nil
	}
	h.mu.Lock()
	started, stopping := h.started[pod.UID], h.stopping[pod.UID]
	h.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil && !stopping:
		return h.beginStop(ctx, pod, key)
	case pod.DeletionTimestamp != nil && time.Since(pod.DeletionTimestamp.Add(-deletionGrace(pod))) >= h.stopAfter:
		return h.finish(ctx, pod)
	case pod.DeletionTimestamp == nil && !started:
		return h.start(ctx, pod)
	}
	return nil
}

// start records what the kubelet records for a container whose image is
// present: Pulled, Created, Started, then Running and Ready.
func (h *hollowKubelet) start(ctx context.Context, pod *corev1.Pod) error {
	for _, r := range [][2]string{{"Pulled", "Container image already present on machine"}, {"Created", "Created container: app"}, {"Started", "Started container app"}} {
		if err := h.event(ctx, pod, r[0], r[1]); err != nil {
			return err
		}
	}
	now := metav1.Now()
	ip := h.ips.Add(1)
	status := map[string]any{
		"phase": corev1.PodRunning, "podIP": podIP(ip), "podIPs": []map[string]string{{"ip": podIP(ip)}},
		"hostIP": "10.0.0.1", "startTime": now,
		"conditions": conditions(corev1.ConditionTrue, now),
		"containerStatuses": []corev1.ContainerStatus{{
			Name: "app", Ready: true, Image: pod.Spec.Containers[0].Image, ImageID: "sha256:hollow",
			ContainerID: fmt.Sprintf("containerd://%032x%032x", ip, uint64(ip)*7919),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if err := h.patchStatus(ctx, pod, status); err != nil {
		return err
	}
	h.mark(h.started, pod.UID)
	return nil
}

// beginStop records Killing, as the kubelet does when it sends the stop
// signal, and comes back once the container has had stopAfter to exit.
func (h *hollowKubelet) beginStop(ctx context.Context, pod *corev1.Pod, key types.NamespacedName) error {
	if err := h.event(ctx, pod, "Killing", "Stopping container app"); err != nil {
		return err
	}
	h.mark(h.stopping, pod.UID)
	h.queue.AddAfter(key, h.stopAfter)
	return nil
}

// finish reports the container exited and the pod terminal, then deletes
// it with grace 0: what the kubelet does once every container has stopped.
func (h *hollowKubelet) finish(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	status := map[string]any{
		"phase": corev1.PodSucceeded, "conditions": conditions(corev1.ConditionFalse, now),
		"containerStatuses": []corev1.ContainerStatus{{
			Name: "app", Image: pod.Spec.Containers[0].Image, ImageID: "sha256:hollow",
			ContainerID: containerID(pod),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", FinishedAt: now, ContainerID: containerID(pod)}},
		}},
	}
	if err := h.patchStatus(ctx, pod, status); err != nil {
		return err
	}
	zero := int64(0)
	err := h.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil // already gone
	}
	if err == nil {
		h.forget(pod.UID)
	}
	return err
}

func (h *hollowKubelet) patchStatus(ctx context.Context, pod *corev1.Pod, status map[string]any) error {
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = h.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (h *hollowKubelet) event(ctx context.Context, pod *corev1.Pod, reason, msg string) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			APIVersion: "v1", ResourceVersion: pod.ResourceVersion, FieldPath: "spec.containers{app}"},
		Reason: reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1,
		Source:         corev1.EventSource{Component: "kubelet", Host: pod.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, ReportingController: "kubelet", ReportingInstance: pod.Spec.NodeName,
	}
	_, err := h.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the namespace is going away
	}
	return err
}

func (h *hollowKubelet) mark(set map[types.UID]bool, uid types.UID) {
	h.mu.Lock()
	set[uid] = true
	h.mu.Unlock()
}

func (h *hollowKubelet) forget(uid types.UID) {
	h.mu.Lock()
	delete(h.started, uid)
	delete(h.stopping, uid)
	h.mu.Unlock()
}

func conditions(s corev1.ConditionStatus, now metav1.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		out = append(out, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
	}
	out[0].Status = corev1.ConditionTrue // initialized stays true
	return out
}

// podIP hands out addresses from 10.128.0.0/9: never routed, only written.
func podIP(n uint32) string {
	n += 128 << 16
	return fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

func containerID(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		return s.ContainerID
	}
	return ""
}

func deletionGrace(pod *corev1.Pod) time.Duration {
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 0
}
