package kube

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/drainwatch/drainwatch/collector"
	"github.com/drainwatch/drainwatch/testenv/controlplane/cptest"
)

// kubeletSink keeps the kubelet Events it receives.
type kubeletSink struct {
	discardSink
	recorder[collector.KubeletEvent]
}

func (s *kubeletSink) Kubelet(e collector.KubeletEvent) { s.add(e) }

// recorder keeps what a sink receives, safe for the informers' goroutines.
type recorder[T any] struct {
	mu  sync.Mutex
	got []T
}

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v)
}

func (r *recorder[T]) received() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

type discardSink struct{}

func (discardSink) Pod(collector.PodUpdate)           {}
func (discardSink) PodDeleted(collector.PodDeleted)   {}
func (discardSink) Kubelet(collector.KubeletEvent)    {}
func (discardSink) Endpoint(collector.EndpointUpdate) {}

// requestLog records the query of every request to a path containing what.
type requestLog struct {
	what    string
	mu      sync.Mutex
	queries []url.Values
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.Contains(r.URL.Path, l.what) {
			l.mu.Lock()
			l.queries = append(l.queries, r.URL.Query())
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (l *requestLog) recorded() []url.Values {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queries)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestEventWatchListsThenWatches: a terminating pod's Event watch is a
// plain list and a watch from its resourceVersion, never a WatchList stream
// (sendInitialEvents), whose required bookmark can come after the linger has
// ended the watch; the Killing Event recorded before the watch comes from
// the list, the FailedPreStopHook after it from the watch, another pod's
// from neither.
func TestEventWatchListsThenWatches(t *testing.T) {
	cp := cptest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "events-list-watch"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const uid, other = "0b9f2c6e-0000-4000-8000-00000000000a", "0b9f2c6e-0000-4000-8000-00000000000b"
	killedAt := time.Date(2026, 11, 30, 9, 0, 1, 250000000, time.UTC)
	record := func(name, podUID, reason string, at time.Time) {
		t.Helper()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-" + podUID[len(podUID)-1:], UID: types.UID(podUID)},
			Reason:         reason, Message: reason + " message", Type: corev1.EventTypeNormal,
			Source:    corev1.EventSource{Component: "kubelet", Host: "node-a"},
			EventTime: metav1.NewMicroTime(at), ReportingController: "kubelet", ReportingInstance: "node-a", Action: reason,
		}
		if _, err := cp.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("recording %s: %v", name, err)
		}
	}
	record("killing-a", uid, ReasonKilling, killedAt)

	log := &requestLog{what: "/events"}
	cfg := rest.CopyConfig(cp.RestConfig)
	cfg.WrapTransport = log.wrap
	sink := &kubeletSink{}
	k, err := New(Config{NodeName: "node-a", Rest: cfg, Sink: sink, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	k.events.start(ns, uid)
	defer k.events.stopAll()
	waitEvents(ctx, t, sink, 1)
	record("killing-b", other, ReasonKilling, killedAt)
	record("prestop-a", uid, ReasonFailedPreStopHook, killedAt.Add(time.Second))
	waitEvents(ctx, t, sink, 2)

	want := []collector.KubeletEvent{
		{PodUID: uid, Reason: ReasonKilling, Message: "Killing message", Time: killedAt},
		{PodUID: uid, Reason: ReasonFailedPreStopHook, Message: "FailedPreStopHook message", Time: killedAt.Add(time.Second)},
	}
	if diff := cmp.Diff(want, sink.received()); diff != "" {
		t.Errorf("kubelet events (-want +got):\n%s", diff)
	}
	queries := log.recorded()
	if len(queries) != 2 || queries[0].Has("watch") || queries[1].Get("watch") != "true" ||
		queries[0].Has("sendInitialEvents") || queries[1].Has("sendInitialEvents") {
		t.Errorf("event requests %q: want a list, then a watch, neither with sendInitialEvents", queries)
	}
}

func waitEvents(ctx context.Context, t *testing.T, s *kubeletSink, n int) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(s.received()) >= n, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d kubelet events: %v; got %+v", n, err, s.received())
	}
}
