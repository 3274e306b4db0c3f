package exporter

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drainwatch/drainwatch/collector"
)

type workloadKey struct{ namespace, kind, name string }

// workloadAPIVersion is the API group of each workload kind that can carry
// an Event; pods without a controller (none) have no workload Event.
var workloadAPIVersion = map[string]string{
	"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
	"ReplicaSet": "apps/v1", "Job": "batch/v1",
}

var errNoWorkload = errors.New("pod has no workload")

// workloadRef returns the reference of workload w with its UID (kubectl
// describe selects Events by the object's UID), looked up once per workload.
func (r *EventReporter) workloadRef(ctx context.Context, w collector.Workload) (*corev1.ObjectReference, error) {
	apiVersion, ok := workloadAPIVersion[w.Kind]
	if !ok || w.Name == "" {
		return nil, errNoWorkload
	}
	key := workloadKey{w.Namespace, w.Kind, w.Name}
	r.mu.Lock()
	uid, cached := r.uids[key]
	r.mu.Unlock()
	if !cached {
		var err error
		if uid, err = r.lookupUID(ctx, key); err != nil {
			return nil, fmt.Errorf("looking up %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
		}
		r.mu.Lock()
		r.uids[key] = uid
		r.mu.Unlock()
	}
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: uid}, nil
}

func (r *EventReporter) lookupUID(ctx context.Context, k workloadKey) (types.UID, error) {
	var (
		meta metav1.Object
		err  error
	)
	opts := metav1.GetOptions{}
	switch k.kind {
	case "Deployment":
		meta, err = r.client.AppsV1().Deployments(k.namespace).Get(ctx, k.name, opts)
	case "StatefulSet":
		meta, err = r.client.AppsV1().StatefulSets(k.namespace).Get(ctx, k.name, opts)
	case "DaemonSet":
		meta, err = r.client.AppsV1().DaemonSets(k.namespace).Get(ctx, k.name, opts)
	case "ReplicaSet":
		meta, err = r.client.AppsV1().ReplicaSets(k.namespace).Get(ctx, k.name, opts)
	case "Job":
		meta, err = r.client.BatchV1().Jobs(k.namespace).Get(ctx, k.name, opts)
	default:
		return "", errNoWorkload
	}
	if err != nil {
		return "", err
	}
	return meta.GetUID(), nil
}
