package exporter

import (
	"context"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// refused is what client-go returns while the API server is down.
var refused = &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/shop/events",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}

// refusingClient refuses the first refusals Event creations, then accepts
// them; creates counts every try.
func refusingClient(refusals int32, creates *atomic.Int32) *fake.Clientset {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-uid"}}
	client := fake.NewClientset(dep)
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) <= refusals {
			return true, nil, refused
		}
		return false, nil, nil
	})
	return client
}

// TestEventDroppedAfterTheBroadcastersTries: with the API server refusing
// for good, the broadcaster tries each of a termination's 2 Events (pod,
// workload) eventTries times, 24 creations in all, then gives up; both are
// counted as dropped, api_unreachable, exactly when the broadcaster stops.
// It also holds eventTries to client-go's unexported maxTriesPerEvent.
func TestEventDroppedAfterTheBroadcastersTries(t *testing.T) {
	var creates atomic.Int32
	client := refusingClient(1<<30, &creates)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1", RetryEvery: time.Millisecond})
	defer r.Shutdown()
	if n := r.Record(context.Background(), naiveTermination()); n != 2 {
		t.Fatalf("recorded %d Events, want 2", n)
	}
	waitDropped(t, r, DropUnreachable, 2)
	time.Sleep(50 * time.Millisecond) // 50 retry periods: a 25th try would show
	if n := creates.Load(); n != 2*eventTries {
		t.Errorf("%d creations tried, want %d (%d per Event)", n, 2*eventTries, eventTries)
	}
}

// TestEventRetriedThroughAnOutage: refused 5 times (an outage shorter than
// the retry bound), an Event is posted on the 6th try and nothing is dropped.
func TestEventRetriedThroughAnOutage(t *testing.T) {
	var creates atomic.Int32
	client := refusingClient(5, &creates)
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1", RetryEvery: time.Millisecond})
	defer r.Shutdown()
	r.Record(context.Background(), naiveTermination())
	evs := waitEvents(t, client, "shop", 2)
	if len(evs) != 2 || creates.Load() != 7 {
		t.Errorf("%d Events posted in %d tries, want 2 in 7 (5 refused)", len(evs), creates.Load())
	}
	for _, reason := range []string{DropUnreachable, DropRejected, DropWorkloadUnknown} {
		if n := testutil.ToFloat64(r.dropped.WithLabelValues(reason)); n != 0 {
			t.Errorf("drainwatch_events_dropped_total{reason=%q} = %v, want 0", reason, n)
		}
	}
}

// TestWorkloadEventDroppedWhenUnknown: the workload's UID cannot be looked
// up (API server unreachable): the pod's Event is posted, the workload's
// is counted as dropped.
func TestWorkloadEventDroppedWhenUnknown(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, refused
	})
	r := NewEventReporter(client, zerolog.Nop(), EventOptions{Node: "node-1"})
	defer r.Shutdown()
	if n := r.Record(context.Background(), naiveTermination()); n != 1 {
		t.Errorf("recorded %d Events, want 1 (the pod's)", n)
	}
	if n := testutil.ToFloat64(r.dropped.WithLabelValues(DropWorkloadUnknown)); n != 1 {
		t.Errorf("drainwatch_events_dropped_total{reason=workload_unknown} = %v, want 1", n)
	}
}

func waitDropped(t *testing.T, r *EventReporter, reason string, want float64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(r.dropped.WithLabelValues(reason)) == want, nil
	})
	if err != nil {
		t.Fatalf("drainwatch_events_dropped_total{reason=%q} = %v, want %v", reason, testutil.ToFloat64(r.dropped.WithLabelValues(reason)), want)
	}
}

// failingSink is an API server that cannot be reached.
type failingSink struct{}

func (failingSink) Create(*corev1.Event) (*corev1.Event, error) { return nil, refused }
func (failingSink) Update(*corev1.Event) (*corev1.Event, error) { return nil, refused }
func (failingSink) Patch(*corev1.Event, []byte) (*corev1.Event, error) {
	return nil, refused
}

// TestRetriedEventsBoundedWithoutForgettingDrops: Events the broadcaster
// stopped retrying after a failed try (its shutdown) are tracked up to
// maxRetried; past it, the oldest is forgotten and counted as dropped, one
// for one, while the Event being retried keeps its tries and is counted
// once, after its last.
func TestRetriedEventsBoundedWithoutForgettingDrops(t *testing.T) {
	dropped := NewEventsDropped()
	s := newCountingSink(failingSink{}, dropped)
	abandoned := make([]*corev1.Event, maxRetried+10)
	for i := range abandoned {
		abandoned[i] = &corev1.Event{}
		s.Create(abandoned[i])
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues(DropUnreachable)); n != 10 || len(s.retried) != maxRetried {
		t.Fatalf("%d Events abandoned: %v counted as dropped, %d tracked; want 10 and %d",
			len(abandoned), n, len(s.retried), maxRetried)
	}
	for _, ev := range abandoned[:10] {
		if _, ok := s.retried[ev]; ok {
			t.Fatal("an Event counted as dropped is still tracked")
		}
	}
	// The Event being retried is the newest: a new Event at the bound
	// forgets an abandoned one instead.
	retrying := &corev1.Event{}
	for range eventTries - 1 {
		s.Patch(retrying, nil)
	}
	s.Create(&corev1.Event{})
	if r := s.retried[retrying]; r.tries != eventTries-1 {
		t.Fatalf("the Event being retried has %d tries tracked, want %d", r.tries, eventTries-1)
	}
	s.Create(retrying)
	if n := testutil.ToFloat64(dropped.WithLabelValues(DropUnreachable)); n != 13 || len(s.retried) != maxRetried-1 {
		t.Errorf("dropped %v, %d tracked; want 13 (10 + 2 forgotten + the retried Event's last try) and %d",
			n, len(s.retried), maxRetried-1)
	}
}
