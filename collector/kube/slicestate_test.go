package kube

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drainwatch/drainwatch/collector"
)

const (
	localA  = "aaaaaaaa-0000-4000-8000-000000000001"
	localB  = "bbbbbbbb-0000-4000-8000-000000000002"
	remoteC = "cccccccc-0000-4000-8000-000000000003"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// ep builds an endpoint; conditions are ready/serving/terminating, nil for unset.
func ep(uid string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{"10.244.0.1"},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", UID: types.UID(uid)},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
	}
}

func slice(name, service string, trigger time.Time, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		Endpoints: eps,
	}
	if !trigger.IsZero() {
		s.Annotations = map[string]string{triggerTimeAnnotation: trigger.Format(time.RFC3339Nano)}
	}
	return s
}

var yes, no = ptr.To(true), ptr.To(false)

func upd(uid string, present, ready, serving, terminating bool, trigger time.Time) collector.EndpointUpdate {
	return collector.EndpointUpdate{Seen: t0, PodUID: uid, Present: present, Ready: ready, Serving: serving, Terminating: terminating, TriggerTime: trigger}
}

// TestEndpointTable walks the slice states of a termination: a local pod
// ready, then terminating (ready=false, serving=true), then gone; a remote
// pod in the same slice never produces an update; a second service's slice
// keeps the pod present until it drops it too.
func TestEndpointTable(t *testing.T) {
	local := map[string]bool{localA: true, localB: true}
	tab := newEndpointTable(func(uid string) bool { return local[uid] })
	trig := t0.Add(-time.Second)
	steps := []struct {
		name string
		run  func() []collector.EndpointUpdate
		want []collector.EndpointUpdate
	}{
		{"both ready, remote ignored", func() []collector.EndpointUpdate {
			return tab.apply(slice("web-1", "web", trig, ep(localA, nil, nil, nil), ep(remoteC, yes, yes, no)), t0)
		}, []collector.EndpointUpdate{upd(localA, true, true, true, false, trig)}},
		{"same state again: nothing", func() []collector.EndpointUpdate {
			return tab.apply(slice("web-1", "web", trig, ep(localA, yes, yes, no), ep(remoteC, no, no, yes)), t0)
		}, nil},
		{"second service lists A and B", func() []collector.EndpointUpdate {
			return tab.apply(slice("web-admin-1", "web-admin", time.Time{}, ep(localA, yes, yes, no), ep(localB, yes, yes, no)), t0)
		}, []collector.EndpointUpdate{upd(localB, true, true, true, false, time.Time{})}},
		{"A terminating in one service: not ready", func() []collector.EndpointUpdate {
			return tab.apply(slice("web-1", "web", trig.Add(time.Second), ep(localA, no, yes, yes)), t0)
		}, []collector.EndpointUpdate{upd(localA, true, false, true, true, trig.Add(time.Second))}},
		{"A gone from web, still terminating-free in web-admin: present, ready", func() []collector.EndpointUpdate {
			return tab.apply(slice("web-1", "web", trig, ep(remoteC, yes, yes, no)), t0)
		}, []collector.EndpointUpdate{upd(localA, true, true, true, false, trig)}},
		{"web-admin slice deleted: both gone", func() []collector.EndpointUpdate {
			return tab.remove("shop", "web-admin-1", t0)
		}, []collector.EndpointUpdate{upd(localA, false, false, false, false, time.Time{}), upd(localB, false, false, false, false, time.Time{})}},
		{"deleting an unknown slice: nothing", func() []collector.EndpointUpdate { return tab.remove("shop", "nope", t0) }, nil},
	}
	for _, s := range steps {
		got := s.run()
		sortUpdates(got)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestEndpointTableRetain(t *testing.T) {
	tab := newEndpointTable(func(uid string) bool { return uid == localA })
	tab.apply(slice("web-1", "web", time.Time{}, ep(localA, yes, yes, no)), t0)
	got := tab.retain("other-ns", func(string, sliceEntry) bool { return false }, t0)
	if len(got) != 0 {
		t.Fatalf("retain of another namespace changed %v", got)
	}
	got = tab.retain("shop", func(_ string, e sliceEntry) bool { return e.service != "web" }, t0)
	if want := []collector.EndpointUpdate{upd(localA, false, false, false, false, time.Time{})}; !cmp.Equal(want, got) {
		t.Fatalf("retain without web: %s", cmp.Diff(want, got))
	}
	tab.forget(localA)
	if got := tab.apply(slice("web-1", "web", time.Time{}), t0); len(got) != 0 {
		t.Fatalf("forgotten pod produced %v", got)
	}
}

func sortUpdates(u []collector.EndpointUpdate) {
	for i := 1; i < len(u); i++ {
		for j := i; j > 0 && u[j].PodUID < u[j-1].PodUID; j-- {
			u[j], u[j-1] = u[j-1], u[j]
		}
	}
}
