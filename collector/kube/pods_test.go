package kube

import (
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/drainwatch/drainwatch/collector"
)

// sinkRecorder keeps what a podWatch sends.
type sinkRecorder struct {
	mu      sync.Mutex
	pods    []collector.PodUpdate
	deleted []collector.PodDeleted
}

func (r *sinkRecorder) Pod(u collector.PodUpdate) {
	r.mu.Lock()
	r.pods = append(r.pods, u)
	r.mu.Unlock()
}
func (r *sinkRecorder) PodDeleted(d collector.PodDeleted) {
	r.mu.Lock()
	r.deleted = append(r.deleted, d)
	r.mu.Unlock()
}
func (r *sinkRecorder) Kubelet(collector.KubeletEvent)    {}
func (r *sinkRecorder) Endpoint(collector.EndpointUpdate) {}

func testPodWatch(rec *sinkRecorder) *podWatch {
	k := &Kube{cfg: Config{Sink: rec, Now: func() time.Time { return t0 }, Linger: time.Hour},
		owners: &ownerCache{entries: map[string]ownerEntry{}, now: func() time.Time { return t0 }}}
	k.events, k.endpoints = newEventWatch(k), newEndpointWatch(k)
	return newPodWatch(k)
}

// TestPodWatchDeleteTombstone: a delete the watch missed arrives as a
// DeletedFinalStateUnknown tombstone and is still a PodDeleted.
func TestPodWatchDeleteTombstone(t *testing.T) {
	rec := &sinkRecorder{}
	w := testPodWatch(rec)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: testUID}}
	w.onDelete(cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: pod})
	w.onDelete(cache.DeletedFinalStateUnknown{Key: "shop/gone", Obj: "not a pod"})
	if len(rec.deleted) != 1 || rec.deleted[0] != (collector.PodDeleted{Seen: t0, UID: testUID}) {
		t.Fatalf("deleted = %+v, want one PodDeleted of %s", rec.deleted, testUID)
	}
}

// TestSamePodButVersion: an update that only touches what the transform
// dropped (same shrunk pod, new resourceVersion) is not sent on.
func TestSamePodButVersion(t *testing.T) {
	a := ShrinkPod(fullPod())
	b := a.DeepCopy()
	b.ResourceVersion = "43"
	if !samePodButVersion(a, b) {
		t.Fatal("a new resourceVersion alone counts as a change")
	}
	b.Status.PodIP = "10.244.1.8"
	if samePodButVersion(a, b) {
		t.Fatal("a new pod IP does not count as a change")
	}
}
