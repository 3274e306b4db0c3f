package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/drainwatch/drainwatch/collector"
)

const (
	revisionAnnotation     = "deployment.kubernetes.io/revision"
	argoRevisionAnnotation = "rollout.argoproj.io/revision"
	revisionHashLabel      = "controller-revision-hash"
	templateHashLabel      = "pod-template-hash"
	// ownerTTL bounds how stale a cached owner may be: a ReplicaSet's
	// revision only changes when a rollback reuses an old ReplicaSet, a
	// Job's controller never.
	ownerTTL = 2 * time.Minute
	// ownerErrTTL spaces retries of an owner that could not be read.
	ownerErrTTL     = 10 * time.Second
	ownerGetTimeout = 5 * time.Second
)

// currentTTL bounds how stale an owner's current revision may be: short,
// because a rollout changes it, and a deletion right after the change must
// be told from a scale-down.
const currentTTL = 2 * time.Second

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	rolloutsGVR    = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
)

// The owners a pod's controller chain passes through, read as metadata.
var ownerGVRs = map[string]schema.GroupVersionResource{
	"ReplicaSet": {Group: "apps", Version: "v1", Resource: "replicasets"},
	"Job":        {Group: "batch", Version: "v1", Resource: "jobs"},
}

// OwnerMeta is what rollout identity needs of a pod's controller (a
// ReplicaSet or a Job): its revision annotation and its own controller.
type OwnerMeta struct {
	Revision   string
	Controller *metav1.OwnerReference
}

// OwnerLookup reads the metadata of a pod's controller of the given kind
// (ReplicaSet or Job); ok is false when it cannot be read.
type OwnerLookup func(kind, ns, name string) (m OwnerMeta, ok bool)

// ResolveWorkload computes a pod's rollout identity from its controller
// reference: the workload people operate (a Deployment, not its
// ReplicaSet; a CronJob, not each of its Jobs) and its revision.
func ResolveWorkload(pod *corev1.Pod, lookup OwnerLookup) collector.Workload {
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
		rs, ok := lookup(ref.Kind, pod.Namespace, ref.Name)
		if !ok {
			if r, ok := guessRollout(pod.Labels, w); ok {
				return r
			}
			return guessDeployment(pod, w)
		}
		w.Revision = rs.Revision
		if c := rs.Controller; c != nil && (c.Kind == "Deployment" || c.Kind == "Rollout") {
			// Argo Rollouts own ReplicaSets the way Deployments do.
			w.Kind, w.Name = c.Kind, c.Name
		}
		if w.Kind == "Rollout" {
			w.Revision = rolloutRevision(pod.Labels, rs.Revision)
		}
	case "Job":
		// A CronJob's Jobs are its runs, not its revisions: the CronJob is
		// the workload and a run has no revision.
		if job, ok := lookup(ref.Kind, pod.Namespace, ref.Name); ok && job.Controller != nil && job.Controller.Kind == "CronJob" {
			w.Kind, w.Name = "CronJob", job.Controller.Name
		}
	default:
		// Other custom controllers keep their own kind and name.
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

// ownerCache reads owners as metadata only (PartialObjectMetadata GETs)
// and caches them: no ReplicaSet or Job watch, one GET per owner per TTL.
// An owner that was read once and cannot be read now (an API server
// outage, a timeout) keeps its last known metadata: a transient failure
// never rewrites a pod's revision to "".
type ownerCache struct {
	meta    metadata.Interface
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]ownerEntry
	// current caches workloads' current revisions for currentTTL.
	current map[string]ownerEntry
	// updateRevision reads a StatefulSet's status.updateRevision (not in
	// its metadata); nil when unavailable.
	updateRevision func(ctx context.Context, ns, name string) (string, error)
	// rolloutPodHash reads an Argo Rollout's status.currentPodHash; nil
	// when unavailable.
	rolloutPodHash func(ctx context.Context, ns, name string) (string, error)
}

type ownerEntry struct {
	meta    OwnerMeta
	ok      bool
	expires time.Time
}

func newOwnerCache(meta metadata.Interface, now func() time.Time) *ownerCache {
	return &ownerCache{meta: meta, now: now, entries: make(map[string]ownerEntry), current: make(map[string]ownerEntry)}
}

func (c *ownerCache) workload(pod *corev1.Pod) collector.Workload {
	return ResolveWorkload(pod, c.owner)
}

func (c *ownerCache) owner(kind, ns, name string) (OwnerMeta, bool) {
	gvr, known := ownerGVRs[kind]
	if !known {
		return OwnerMeta{}, false
	}
	key := kind + "/" + ns + "/" + name
	now := c.now()
	c.mu.Lock()
	e, hit := c.entries[key]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		return e.meta, e.ok
	}
	fresh := c.get(gvr, ns, name, now)
	if !fresh.ok && hit && e.ok {
		// Keep what was known; retry after ownerErrTTL.
		fresh = ownerEntry{meta: e.meta, ok: true, expires: now.Add(ownerErrTTL)}
	}
	c.mu.Lock()
	c.entries[key] = fresh
	c.dropExpired(now)
	c.mu.Unlock()
	return fresh.meta, fresh.ok
}

func (c *ownerCache) get(gvr schema.GroupVersionResource, ns, name string, now time.Time) ownerEntry {
	ctx, cancel := context.WithTimeout(context.Background(), ownerGetTimeout)
	defer cancel()
	m, err := c.meta.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ownerEntry{expires: now.Add(ownerErrTTL)}
	}
	revision := m.Annotations[revisionAnnotation]
	if revision == "" {
		revision = m.Annotations[argoRevisionAnnotation]
	}
	revision = boundRevision(revision)
	return ownerEntry{meta: OwnerMeta{Revision: revision, Controller: metav1.GetControllerOfNoCopy(m)}, ok: true, expires: now.Add(ownerTTL)}
}

// dropExpired keeps the cache bounded by the owners of recent pods. An
// expired entry that was read successfully is kept one more TTL so that
// an outage right after it expired still finds it (owner above).
func (c *ownerCache) dropExpired(now time.Time) {
	if len(c.entries) < 256 {
		return
	}
	for k, e := range c.entries {
		if now.After(e.expires.Add(ownerTTL)) {
			delete(c.entries, k)
		}
	}
}

// currentRevision is the revision w's owner is at now, to tell a rollout
// (the pod's revision is behind it) from a scale-down: a Deployment's
// revision annotation, an Argo Rollout's status.currentPodHash (its pods'
// revision is their template hash), a StatefulSet's updateRevision; ""
// for other kinds or when it cannot be read.
func (c *ownerCache) currentRevision(w collector.Workload) string {
	if w.Kind != "Deployment" && w.Kind != "Rollout" && w.Kind != "StatefulSet" {
		return ""
	}
	key := w.Kind + "/" + w.Namespace + "/" + w.Name
	now := c.now()
	c.mu.Lock()
	e, hit := c.current[key]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		return e.meta.Revision
	}
	revision, err := c.readCurrent(w)
	if errors.Is(err, errStatusBehind) {
		// Not cached: the controller writes its status within moments,
		// and the pod's next update must read it.
		return ""
	}
	c.mu.Lock()
	c.current[key] = ownerEntry{meta: OwnerMeta{Revision: revision}, ok: revision != "", expires: now.Add(currentTTL)}
	if len(c.current) >= 256 {
		for k, old := range c.current {
			if now.After(old.expires) {
				delete(c.current, k)
			}
		}
	}
	c.mu.Unlock()
	return revision
}

func (c *ownerCache) readCurrent(w collector.Workload) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerGetTimeout)
	defer cancel()
	switch read := c.statusReader(w.Kind); {
	case read != nil:
		return read(ctx, w.Namespace, w.Name)
	case w.Kind != "Deployment":
		return "", nil
	}
	m, err := c.meta.Resource(deploymentsGVR).Namespace(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
	}
	return boundRevision(m.Annotations[revisionAnnotation]), nil
}

// statusReader is the reader of the kinds whose current revision is in
// their status, not their metadata: StatefulSets and Argo Rollouts.
func (c *ownerCache) statusReader(kind string) func(ctx context.Context, ns, name string) (string, error) {
	switch kind {
	case "StatefulSet":
		return c.updateRevision
	case "Rollout":
		return c.rolloutPodHash
	}
	return nil
}

// boundRevision bounds a revision read from an annotation, which the API
// server does not validate, to the label value it becomes: the API, the
// state file and `timeline --revision` then all see the metrics' value.
func boundRevision(r string) string { return collector.Truncate(r, collector.MaxValueBytes) }

// errStatusBehind: a StatefulSet's status is older than its spec. The
// statefulset controller deletes the first old pod of a rollout in the
// sync that computes the new revision and writes status.updateRevision
// only at the end of it: read at that deletion, the status still names
// the old revision, and the rollout would look like a scale-down.
var errStatusBehind = errors.New("the StatefulSet's status is behind its spec")

// statefulSetUpdateRevision is s's status.updateRevision, or
// errStatusBehind while the controller has not observed its spec.
func statefulSetUpdateRevision(s *appsv1.StatefulSet) (string, error) {
	if s.Status.ObservedGeneration < s.Generation {
		return "", errStatusBehind
	}
	return s.Status.UpdateRevision, nil
}
