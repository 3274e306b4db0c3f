package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector"
)

// rolloutHashLabel is the label Argo Rollouts puts on the ReplicaSets and
// pods of a Rollout: the hash of the pod template, the same value its
// analysis passes as podTemplateHashValue (Stable, Latest). It is the
// revision of a Rollout's pod, so that a gate's query selects the old and
// the new revision by what Argo names them; like the revision annotation,
// it takes one value per ReplicaSet.
const rolloutHashLabel = "rollouts-pod-template-hash"

// rolloutRevision is the revision of a pod of an Argo Rollout: its
// template hash, or the ReplicaSet's revision annotation for a pod without
// the label (not made by Argo's controller).
func rolloutRevision(podLabels map[string]string, rsRevision string) string {
	if h := podLabels[rolloutHashLabel]; h != "" {
		return boundRevision(h)
	}
	return rsRevision
}

// guessRollout names the Rollout of a ReplicaSet that could not be read
// from Argo's naming, <rollout>-<rollouts-pod-template-hash>; the hash is
// the revision, so it stays known.
func guessRollout(labels map[string]string, w collector.Workload) (collector.Workload, bool) {
	hash := labels[rolloutHashLabel]
	if hash == "" || !strings.HasSuffix(w.Name, "-"+hash) {
		return w, false
	}
	w.Kind, w.Name, w.Revision = "Rollout", strings.TrimSuffix(w.Name, "-"+hash), boundRevision(hash)
	return w, true
}

// rolloutStatus is the part of an Argo Rollout read for its current
// revision.
type rolloutStatus struct {
	Status struct {
		CurrentPodHash string `json:"currentPodHash"`
	} `json:"status"`
}

// rolloutPodHashReader reads a Rollout's status.currentPodHash (the hash of
// the template it is rolling out; not in its metadata) with a GET through
// rc, in JSON: custom resources are not served as protobuf.
func rolloutPodHashReader(rc rest.Interface) func(ctx context.Context, ns, name string) (string, error) {
	return func(ctx context.Context, ns, name string) (string, error) {
		body, err := rc.Get().AbsPath("/apis", rolloutsGVR.Group, rolloutsGVR.Version, "namespaces", ns, rolloutsGVR.Resource, name).
			SetHeader("Accept", "application/json").DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("reading Rollout %s/%s: %w", ns, name, err)
		}
		var r rolloutStatus
		if err := json.Unmarshal(body, &r); err != nil {
			return "", fmt.Errorf("decoding Rollout %s/%s: %w", ns, name, err)
		}
		return boundRevision(r.Status.CurrentPodHash), nil
	}
}
