package kube

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/drainwatch/drainwatch/collector"
)

const (
	revisionAnnotation = "deployment.kubernetes.io/revision"
	revisionHashLabel  = "controller-revision-hash"
	templateHashLabel  = "pod-template-hash"
	// ownerTTL bounds how stale a cached ReplicaSet revision may be: it only
	// changes when a rollback reuses an old ReplicaSet.
	ownerTTL = 2 * time.Minute
	// ownerErrTTL spaces retries of a ReplicaSet that could not be read.
	ownerErrTTL     = 10 * time.Second
	ownerGetTimeout = 5 * time.Second
)

var replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}

// ReplicaSetMeta is what rollout identity needs of a ReplicaSet: its
// revision annotation and its controller.
type ReplicaSetMeta struct {
	Revision   string
	Controller *metav1.OwnerReference
}

// ResolveWorkload computes a pod's rollout identity from its controller
// reference; lookupRS reads a ReplicaSet's metadata (ok false when it cannot).
func ResolveWorkload(pod *corev1.Pod, lookupRS func(ns, name string) (ReplicaSetMeta, bool)) collector.Workload {
	w := collector.Workload{Namespace: pod.Namespace, Kind: "none"}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return w
	}
	w.Kind, w.Name = ref.Kind, ref.Name
	switch ref.Kind {
	case "StatefulSet", "DaemonSet":
		w.Revision = pod.Labels[revisionHashLabel]
	case "ReplicaSet":
		rs, ok := lookupRS(pod.Namespace, ref.Name)
		if !ok {
			return guessDeployment(pod, w)
		}
		w.Revision = rs.Revision
		if c := rs.Controller; c != nil && c.Kind == "Deployment" {
			w.Kind, w.Name = "Deployment", c.Name
		}
	case "Job":
	default:
		// Custom controllers (Argo Rollouts, …) keep their own kind and name.
	}
	return w
}

// guessDeployment names the Deployment of a ReplicaSet that could not be
// read (deleted already, no permission) from the Deployment controller's
// naming, <deployment>-<pod-template-hash>; the revision stays unknown.
func guessDeployment(pod *corev1.Pod, w collector.Workload) collector.Workload {
	hash := pod.Labels[templateHashLabel]
	if hash != "" && strings.HasSuffix(w.Name, "-"+hash) {
		w.Kind, w.Name = "Deployment", strings.TrimSuffix(w.Name, "-"+hash)
	}
	return w
}

// ownerCache reads ReplicaSets as metadata only (PartialObjectMetadata GETs)
// and caches them: no ReplicaSet watch, one GET per ReplicaSet per TTL.
type ownerCache struct {
	meta    metadata.Interface
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]ownerEntry
}

type ownerEntry struct {
	rs      ReplicaSetMeta
	ok      bool
	expires time.Time
}

func newOwnerCache(meta metadata.Interface, now func() time.Time) *ownerCache {
	return &ownerCache{meta: meta, now: now, entries: make(map[string]ownerEntry)}
}

func (c *ownerCache) workload(pod *corev1.Pod) collector.Workload {
	return ResolveWorkload(pod, c.replicaSet)
}

func (c *ownerCache) replicaSet(ns, name string) (ReplicaSetMeta, bool) {
	key := ns + "/" + name
	now := c.now()
	c.mu.Lock()
	e, hit := c.entries[key]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		return e.rs, e.ok
	}
	e = c.get(ns, name, now)
	c.mu.Lock()
	c.entries[key] = e
	c.dropExpired(now)
	c.mu.Unlock()
	return e.rs, e.ok
}

func (c *ownerCache) get(ns, name string, now time.Time) ownerEntry {
	ctx, cancel := context.WithTimeout(context.Background(), ownerGetTimeout)
	defer cancel()
	m, err := c.meta.Resource(replicaSetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ownerEntry{expires: now.Add(ownerErrTTL)}
	}
	rs := ReplicaSetMeta{Revision: m.Annotations[revisionAnnotation], Controller: metav1.GetControllerOfNoCopy(m)}
	return ownerEntry{rs: rs, ok: true, expires: now.Add(ownerTTL)}
}

// dropExpired keeps the cache bounded by the ReplicaSets of recent pods.
func (c *ownerCache) dropExpired(now time.Time) {
	if len(c.entries) < 256 {
		return
	}
	for k, e := range c.entries {
		if now.After(e.expires) {
			delete(c.entries, k)
		}
	}
}
