package apiserver

import (
	"context"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/exporter/apiserver/v1alpha1"
)

// TestNewQuery: equality on the workload, revision and pod labels goes to
// the daemons, the node label picks the daemon, anything else is applied
// to the answers only; a field selector on another field is refused.
func TestNewQuery(t *testing.T) {
	ctx := genericapirequest.WithNamespace(context.Background(), "shop")
	sel, err := labels.Parse("drainwatch.io/workload=web,drainwatch.io/revision in (7),drainwatch.io/node==n1,drainwatch.io/pod!=x,tier=a")
	if err != nil {
		t.Fatal(err)
	}
	q, err := newQuery(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if q.filter.Namespace != "shop" || q.filter.Workload != "web" || q.filter.Revision != "7" || q.filter.Pod != "" ||
		len(q.nodes) != 1 || q.nodes[0] != "n1" || q.selector.String() != sel.String() {
		t.Errorf("query %+v nodes %v selector %s", q.filter, q.nodes, q.selector)
	}
	if _, err := newQuery(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.phase", "x")}); err == nil {
		t.Error("a field selector on status.phase was accepted")
	}
	if _, err := newQuery(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "x")}); err != nil {
		t.Errorf("metadata.name: %v", err)
	}
}

// TestObjectNames: a pod's termination and its containers' are told
// apart, and a name finds its pod.
func TestObjectNames(t *testing.T) {
	start := time.Unix(1764800000, 0)
	if got := objectName("web-0", "3f2a9c1e-1111-2222", "", start); got != "web-0.3f2a9c1e" {
		t.Errorf("pod: %s", got)
	}
	name := objectName("web-0", "3f2a9c1e-1111-2222", "app", start)
	if name != "web-0.3f2a9c1e.app.1764800000" {
		t.Errorf("container: %s", name)
	}
	// A pod's own termination narrows the daemons' query to its pod; a
	// container's, or a pod whose name holds dots, cannot be told apart:
	// the field selector alone picks it.
	if o := nameOptions("web-0.3f2a9c1e"); !o.LabelSelector.Matches(labels.Set{v1alpha1.LabelPod: "web-0"}) ||
		o.LabelSelector.Matches(labels.Set{v1alpha1.LabelPod: "web-1"}) || !o.FieldSelector.Matches(fields.Set{"metadata.name": "web-0.3f2a9c1e"}) {
		t.Errorf("pod: selectors %s, %s", o.LabelSelector, o.FieldSelector)
	}
	for _, n := range []string{name, "a.b.c.3f2a9c1e"} {
		if o := nameOptions(n); !o.LabelSelector.Empty() || !o.FieldSelector.Matches(fields.Set{"metadata.name": n}) {
			t.Errorf("%s: selectors %s, %s", n, o.LabelSelector, o.FieldSelector)
		}
	}
	l := objectLabels(collector.Workload{Kind: "Deployment", Name: "web", Revision: "7"}, "web-0", "n1", "")
	if len(l) != 5 || l[v1alpha1.LabelWorkloadKind] != "Deployment" || l[v1alpha1.LabelNode] != "n1" {
		t.Errorf("labels %v", l)
	}
}

// TestCapItems: a list keeps its latest MaxListItems.
func TestCapItems(t *testing.T) {
	items := make([]int, MaxListItems+3)
	for i := range items {
		items[i] = i
	}
	got := capItems(context.Background(), items, "terminations")
	if len(got) != MaxListItems || got[0] != 3 || got[len(got)-1] != MaxListItems+2 {
		t.Errorf("kept %d, from %d to %d", len(got), got[0], got[len(got)-1])
	}
	if got := capItems(context.Background(), items[:10], "terminations"); len(got) != 10 {
		t.Errorf("a short list lost items: %d", len(got))
	}
}
