package kube

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// endpointSink keeps the endpoint updates it receives.
type endpointSink struct {
	discardSink
	recorder[collector.EndpointUpdate]
}

func (s *endpointSink) Endpoint(u collector.EndpointUpdate) { s.add(u) }

// TestSliceWatchPerService: a service that comes to select a local pod gets
// its own slice watch, and the watches of the services already followed go
// on without a new list: each service's slices are requested exactly once,
// and an update of the first service's slice after the second joined still
// arrives on its first watch.
func TestSliceWatchPerService(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "shop"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slicesAPI := cp.Client.DiscoveryV1().EndpointSlices(ns)
	for _, name := range []string{"web", "api"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := slice("web-hand", "web", time.Time{}, ep(localA, yes, yes, no))
	web.AddressType = discoveryv1.AddressTypeIPv4
	api := slice("api-hand", "api", time.Time{}, ep(localB, yes, yes, no))
	api.AddressType = discoveryv1.AddressTypeIPv4
	for _, s := range []*discoveryv1.EndpointSlice{web, api} {
		if _, err := slicesAPI.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	log := &requestLog{what: "/endpointslices"}
	cfg := rest.CopyConfig(cp.RestConfig)
	cfg.WrapTransport = log.wrap
	sink := &endpointSink{}
	k, err := New(Config{NodeName: "node-a", Rest: cfg, Sink: sink, Log: zerolog.New(zerolog.NewTestWriter(t)), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer k.endpoints.stopAll()
	k.endpoints.podSeen(ns, localA, map[string]string{"app": "web"})
	waitUpdates(ctx, t, sink, 1)
	k.endpoints.podSeen(ns, localB, map[string]string{"app": "api"})
	waitUpdates(ctx, t, sink, 2)
	web, err = slicesAPI.Get(ctx, web.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: no, Serving: yes, Terminating: yes}
	if _, err := slicesAPI.Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUpdates(ctx, t, sink, 3)

	want := []collector.EndpointUpdate{
		upd(localA, true, true, true, false, time.Time{}),
		upd(localB, true, true, true, false, time.Time{}),
		upd(localA, true, false, true, true, time.Time{}),
	}
	if diff := cmp.Diff(want, sink.received()); diff != "" {
		t.Errorf("endpoint updates (-want +got):\n%s", diff)
	}
	// One request per service: a watch whose initial events are the list
	// (client-go's WatchList, served from the watch cache).
	type request struct{ Selector, Watch, SendInitialEvents string }
	var got []request
	for _, q := range log.recorded() {
		got = append(got, request{q.Get("labelSelector"), q.Get("watch"), q.Get("sendInitialEvents")})
	}
	wantRequests := []request{
		{"kubernetes.io/service-name=web", "true", "true"},
		{"kubernetes.io/service-name=api", "true", "true"},
	}
	if diff := cmp.Diff(wantRequests, got); diff != "" {
		t.Errorf("EndpointSlice requests (-want +got):\n%s", diff)
	}
	if n := k.Stats().SliceWatches; n != 2 {
		t.Errorf("slice watches started: %d, want 2", n)
	}
}

func waitUpdates(ctx context.Context, t *testing.T, s *endpointSink, n int) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(s.received()) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d endpoint updates: %v; got %+v", n, err, s.received())
	}
}
