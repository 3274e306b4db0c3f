package kube

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drainwatch/drainwatch/collector"
)

// TestStatefulSetRevisionBehind: the statefulset controller deletes the
// first old pod of a rollout before it writes the new updateRevision. The
// revision read then is unknown, not the old one, and is not cached: the
// pod's next update, once the status caught up, reads the new one.
func TestStatefulSetRevisionBehind(t *testing.T) {
	now := time.Unix(1000, 0)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdateRevision: "web-old"}}
	reads := 0
	c := newOwnerCache(nil, func() time.Time { return now })
	c.updateRevision = func(context.Context, string, string) (string, error) {
		reads++
		return statefulSetUpdateRevision(sts)
	}
	w := collector.Workload{Namespace: "shop", Kind: "StatefulSet", Name: "web", Revision: "web-old"}
	if got := c.currentRevision(w); got != "" {
		t.Errorf("status behind: current revision %q, want unknown", got)
	}
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "web-new"}
	now = now.Add(100 * time.Millisecond) // well within currentTTL
	if got := c.currentRevision(w); got != "web-new" {
		t.Errorf("status caught up: current revision %q, want web-new", got)
	}
	if got := c.currentRevision(w); got != "web-new" || reads != 2 {
		t.Errorf("cached: %q after %d reads, want web-new after 2", got, reads)
	}
}
